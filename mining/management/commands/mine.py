"""Start a sentence-mining run: `manage.py mine CORPUS --src en --tgt fr [--tgt-corpus OTHER] [--async]`."""

from django.core.management.base import BaseCommand, CommandError

from mining.management.commands._args import add_param_arguments, create_run, params_from_options
from mining.models import Artefact, ArtefactKind, Corpus, RunKind
from mining.params import SentenceRunParams
from mining.services.execute import execute_run_service
from mining.services.mining_runs import execute_sentence_run


class Command(BaseCommand):
    help = "Mine sentence pairs between two languages of one or two corpora (inline, or on a worker with --async)."

    def add_arguments(self, parser):
        parser.add_argument("corpus", help="source corpus name")
        parser.add_argument("--tgt-corpus", help="target corpus name (default: the source corpus)")
        parser.add_argument("--src", required=True, help="source language code")
        parser.add_argument("--tgt", required=True, help="target language code")
        parser.add_argument("--encoder", help="encoder artefact as NAME or NAME:VERSION (default: the built-in one)")
        add_param_arguments(parser, SentenceRunParams)
        parser.add_argument("--name", default="")
        parser.add_argument("--async", dest="run_async", action="store_true", help="enqueue on a Celery worker")

    def handle(self, *args, **o):
        src_corpus = _corpus(o["corpus"])
        tgt_corpus = _corpus(o["tgt_corpus"]) if o["tgt_corpus"] else src_corpus
        for corpus, lang in ((src_corpus, o["src"]), (tgt_corpus, o["tgt"])):
            if lang not in corpus.languages:
                have = ", ".join(corpus.languages)
                raise CommandError(f"corpus '{corpus}' has no '{lang}' sentences (it has: {have})")
        params = params_from_options(SentenceRunParams, o)
        run = create_run(
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
