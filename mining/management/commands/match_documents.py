"""`manage.py match_documents CORPUS --src en --tgt fr --method sentence_avg|hide|bow|sentence_vote|count`."""

import json

from django.core.management.base import BaseCommand, CommandError

from mining.models import Corpus, RunKind
from mining.services.document_runs import METHODS, check_doc_model_params, execute_document_run
from mining.services.execute import execute_run_service
from mining.services.runs import run_create


class Command(BaseCommand):
    help = (
        "Find parallel documents (a document run); --train first trains the document model on the corpus's gold "
        "document pairs (Document BoW with --method bow, else HiDE)."
    )

    def add_arguments(self, parser):
        parser.add_argument("corpus")
        parser.add_argument("--tgt-corpus")
        parser.add_argument("--src", required=True)
        parser.add_argument("--tgt", required=True)
        parser.add_argument("--method", choices=METHODS, default="sentence_avg")
        parser.add_argument("--k", type=int, default=4)
        parser.add_argument(
            "--train",
            action="store_true",
            help="train Document BoW (--method bow) or HiDE on this corpus's gold document pairs",
        )
        parser.add_argument(
            "--train-param",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="a training setting of the document model (repeatable), e.g. epochs=10 or seed=1",
        )
        parser.add_argument("--async", dest="run_async", action="store_true")

    def handle(self, *args, **o):
        corpus = Corpus.objects.filter(name=o["corpus"]).first()
        tgt_corpus = Corpus.objects.filter(name=o["tgt_corpus"]).first() if o["tgt_corpus"] else corpus
        if corpus is None or tgt_corpus is None:
            raise CommandError("no such corpus")
        if o["train_param"] and not o["train"]:
            raise CommandError("--train-param needs --train")
        runs = []
        if o["train"]:
            model = "bow" if o["method"] == "bow" else "hide"
            runs.append(
                run_create(
                    kind=RunKind.TRAIN_DOC_MODEL,
                    src_corpus=corpus,
                    src_lang=o["src"],
                    tgt_lang=o["tgt"],
                    params={"model": model, **_train_params(model, o)},
                    enqueue=False,
                )
            )
        runs.append(
            run_create(
                kind=RunKind.DOCUMENT,
                src_corpus=corpus,
                tgt_corpus=tgt_corpus,
                src_lang=o["src"],
                tgt_lang=o["tgt"],
                params={"method": o["method"], "k": o["k"]},
                enqueue=o["run_async"] and not o["train"],
            )
        )
        if o["run_async"] and not o["train"]:
            self.stdout.write(f"Document run {runs[-1].pk} enqueued.")
            return
        for run in runs:
            result = execute_run_service(run=run, handler=execute_document_run)
            run.refresh_from_db()
            if run.status != "succeeded":
                raise CommandError(f"run {run.pk} {run.status}: {run.error}")
            self.stdout.write(self.style.SUCCESS(f"Run {run.pk} ({run.get_kind_display()}): {result}"))


def _train_params(model: str, o: dict) -> dict:
    """--train-param NAME=VALUE pairs (VALUE read as JSON when it parses, else as a string), checked by name."""
    params = {}
    for item in o["train_param"]:
        name, sep, raw = item.partition("=")
        if not sep or not name:
            raise CommandError(f"--train-param takes NAME=VALUE, got '{item}'")
        try:
            params[name] = json.loads(raw)
        except json.JSONDecodeError:
            params[name] = raw
    try:
        check_doc_model_params(model, params)
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    return params
