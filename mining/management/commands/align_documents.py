"""`manage.py align_documents RUN_ID [--threshold X]`: align the sentences of a document run's pairs."""

from django.core.management.base import BaseCommand, CommandError

from mining.models import MiningRun, RunKind
from mining.services.align_runs import execute_align_run
from mining.services.execute import execute_run_service
from mining.services.runs import run_create


class Command(BaseCommand):
    help = "Align the sentences inside the document pairs of a document run (pairs scoring >= --threshold)."

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument("--threshold", type=float)
        parser.add_argument("--async", dest="run_async", action="store_true")

    def handle(self, *args, run_id, threshold, run_async, **o):
        parent = MiningRun.objects.filter(pk=run_id, kind=RunKind.DOCUMENT).first()
        if parent is None:
            raise CommandError(f"run {run_id} is not a document run")
        run = run_create(
            kind=RunKind.ALIGN,
            parent=parent,
            src_corpus=parent.src_corpus,
            tgt_corpus=parent.tgt_corpus,
            src_lang=parent.src_lang,
            tgt_lang=parent.tgt_lang,
            params={"threshold": threshold},
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
