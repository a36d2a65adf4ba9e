"""Start a sentence-mining run: `manage.py mine CORPUS --src en --tgt fr [--tgt-corpus OTHER] [--async]`."""

from django.core.management.base import BaseCommand, CommandError

from mining.models import Artefact, ArtefactKind, Corpus, RunKind
from mining.services.execute import execute_run_service
from mining.services.mining_runs import DEFAULT_PARAMS, execute_sentence_run, sentence_run_params
from mining.services.runs import run_create


class Command(BaseCommand):
    help = "Mine sentence pairs between two languages of one or two corpora (inline, or on a worker with --async)."

    def add_arguments(self, parser):
        parser.add_argument("corpus", help="source corpus name")
        parser.add_argument("--tgt-corpus", help="target corpus name (default: the source corpus)")
        parser.add_argument("--src", required=True, help="source language code")
        parser.add_argument("--tgt", required=True, help="target language code")
        parser.add_argument("--encoder", help="encoder artefact as NAME or NAME:VERSION (default: the built-in one)")
        parser.add_argument("--knn", choices=["exact", "ivf"], default=DEFAULT_PARAMS["knn"])
        parser.add_argument("--margin", choices=["absolute", "distance", "ratio"], default=DEFAULT_PARAMS["margin"])
        parser.add_argument("--k", type=int, default=DEFAULT_PARAMS["k"])
        parser.add_argument(
            "--strategy",
            choices=["forward", "backward", "intersection", "max_score"],
            default=DEFAULT_PARAMS["strategy"],
        )
        parser.add_argument("--threshold", type=float, default=None)
        parser.add_argument("--no-filters", action="store_true")
        parser.add_argument("--name", default="")
        parser.add_argument("--async", dest="run_async", action="store_true", help="enqueue on a Celery worker")

    def handle(self, *args, **o):
        src_corpus = _corpus(o["corpus"])
        tgt_corpus = _corpus(o["tgt_corpus"]) if o["tgt_corpus"] else src_corpus
        for corpus, lang in ((src_corpus, o["src"]), (tgt_corpus, o["tgt"])):
            if lang not in corpus.languages:
                have = ", ".join(corpus.languages)
                raise CommandError(f"corpus '{corpus}' has no '{lang}' sentences (it has: {have})")
        params = sentence_run_params(
            {
                "knn": o["knn"],
                "margin": o["margin"],
                "k": o["k"],
                "strategy": o["strategy"],
                "threshold": o["threshold"],
                "filters": not o["no_filters"],
            }
        )
        run = run_create(
            kind=RunKind.SENTENCE,
            src_corpus=src_corpus,
            tgt_corpus=tgt_corpus,
            src_lang=o["src"],
            tgt_lang=o["tgt"],
            encoder=_encoder(o["encoder"]) if o["encoder"] else None,
            params=params,
            name=o["name"],
            enqueue=o["run_async"],
        )
        if o["run_async"]:
            self.stdout.write(f"Run {run.pk} enqueued.")
            return
        result = execute_run_service(run=run, handler=execute_sentence_run)
        run.refresh_from_db()
        if run.status != "succeeded":
            raise CommandError(f"run {run.pk} {run.status}: {run.error}")
        self.stdout.write(
            self.style.SUCCESS(f"Run {run.pk}: {result.get('candidates', 0)} candidates; timings {run.timings}")
        )


def _corpus(name: str) -> Corpus:
    try:
        return Corpus.objects.get(name=name)
    except Corpus.DoesNotExist as exc:
        raise CommandError(f"no corpus named '{name}'") from exc


def _encoder(spec: str) -> Artefact:
    name, _, version = spec.partition(":")
    qs = Artefact.objects.filter(kind=ArtefactKind.ENCODER, name=name)
    if version:
        qs = qs.filter(version=int(version))
    artefact = qs.order_by("-version").first()
    if artefact is None:
        raise CommandError(f"no encoder artefact '{spec}'")
    return artefact
