"""`manage.py align_documents RUN_ID [--doc-threshold X] [--encoder NAME[:VERSION]]`: align the sentences of a
document run's pairs (the languages and corpora are the document run's)."""

import argparse

from django.core.management.base import BaseCommand, CommandError

from mining.management.commands._args import add_param_arguments, create_run, params_from_options
from mining.models import MiningRun
from mining.params import AlignRunParams
from mining.services.align_runs import execute_align_run
from mining.services.execute import execute_run_service


class Command(BaseCommand):
    help = (
        "Align the sentences inside the document pairs of a document run (pairs scoring >= --doc-threshold); the "
        "languages and corpora are the document run's."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int, help="the document run whose pairs are aligned")
        parser.add_argument("--encoder", help="encoder artefact as NAME or NAME:VERSION (default: the document run's)")
        add_param_arguments(parser, AlignRunParams)
        parser.add_argument("--threshold", dest="doc_threshold", help=argparse.SUPPRESS)  # the old name
        parser.add_argument("--async", dest="run_async", action="store_true")

    def handle(self, *args, run_id, run_async, **o):
        from mining.management.commands.mine import _encoder

        parent = MiningRun.objects.filter(pk=run_id).first()
        if parent is None:
            raise CommandError(f"no run {run_id}")
        params = params_from_options(AlignRunParams, o)
        run = create_run(
            kind="align",
            parent=parent,
            encoder=_encoder(o["encoder"]) if o["encoder"] else None,
            params=params,
            enqueue=run_async,
        )
        if run_async:
            self.stdout.write(f"Alignment run {run.pk} enqueued.")
            return
        result = execute_run_service(run=run, handler=execute_align_run)
        run.refresh_from_db()
        if run.status != "succeeded":
            raise CommandError(f"run {run.pk} {run.status}: {run.error}")
        self.stdout.write(self.style.SUCCESS(f"Alignment run {run.pk}: {result}"))
