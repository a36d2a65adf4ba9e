"""`manage.py match_documents CORPUS --src en --tgt fr [--method rerank|sentence_avg|hide|bow|sentence_vote|count]`."""

import json

from django.core.management.base import BaseCommand, CommandError

from mining.core.docmethod import DocMethod
from mining.management.commands._args import add_param_arguments, create_run, params_from_options
from mining.models import Corpus, MiningRun, RunKind
from mining.params import DocumentRunParams
from mining.services.doc_models import check_doc_model_params, execute_train_doc_model
from mining.services.document_sites import execute_document_any
from mining.services.execute import execute_run_service


class Command(BaseCommand):
    help = (
        "Find parallel documents (a document run) and, when the corpus has gold document pairs, print the P@1, P@3 "
        "and precision of the run's selection on the pairs it did not learn from. --train first trains the document "
        "model (Document BoW with --method bow, else HiDE) on --train-corpus's gold document pairs (on the matched "
        "corpus itself only with --train-on-matched-corpus: its figures then say nothing about new documents)."
    )

    def add_arguments(self, parser):
        parser.add_argument("corpus")
        parser.add_argument("--tgt-corpus")
        parser.add_argument("--src", required=True)
        parser.add_argument("--tgt", required=True)
        add_param_arguments(parser, DocumentRunParams)
        parser.add_argument(
            "--train",
            action="store_true",
            help="train Document BoW (--method bow) or HiDE first, on --train-corpus's gold document pairs",
        )
        parser.add_argument("--train-corpus", help="the corpus whose gold document pairs --train trains on")
        parser.add_argument(
            "--train-on-matched-corpus",
            action="store_true",
            help="let --train train on the matched corpus's own gold pairs (labelled; no held-out figure is left)",
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
        corpus = _corpus(o["corpus"])
        tgt_corpus = _corpus(o["tgt_corpus"]) if o["tgt_corpus"] else corpus
        if o["train_param"] and not o["train"]:
            raise CommandError("--train-param needs --train")
        if (o["train_corpus"] or o["train_on_matched_corpus"]) and not o["train"]:
            raise CommandError("--train-corpus and --train-on-matched-corpus need --train")
        chosen = params_from_options(DocumentRunParams, o)
        params = chosen
        runs = []
        if o["train"]:
            runs.append(self._train_run(o, corpus, chosen.method))
        runs.append(
            create_run(
                kind=RunKind.DOCUMENT,
                src_corpus=corpus,
                tgt_corpus=tgt_corpus,
                src_lang=o["src"],
                tgt_lang=o["tgt"],
                params=params,
                enqueue=o["run_async"] and not o["train"],
            )
        )
        if o["run_async"] and not o["train"]:
            self.stdout.write(f"Document run {runs[-1].pk} enqueued.")
            return
        for run in runs:
            handler = execute_train_doc_model if run.kind == RunKind.TRAIN_DOC_MODEL else execute_document_any
            result = execute_run_service(run=run, handler=handler)
            run.refresh_from_db()
            if run.status != "succeeded":
                raise CommandError(f"run {run.pk} {run.status}: {run.error}")
            self.stdout.write(self.style.SUCCESS(f"Run {run.pk} ({run.get_kind_display()}): {result}"))
        self.stdout.write(gold_summary(runs[-1]))

    def _train_run(self, o: dict, corpus: Corpus, method: DocMethod) -> MiningRun:
        if o["train_corpus"]:
            train_corpus = _corpus(o["train_corpus"])
            if train_corpus.pk == corpus.pk and not o["train_on_matched_corpus"]:
                raise CommandError("--train-corpus is the matched corpus: add --train-on-matched-corpus to allow it")
        elif o["train_on_matched_corpus"]:
            train_corpus = corpus
        else:
            raise CommandError(
                "--train needs --train-corpus OTHER (a corpus with gold document pairs), or "
                "--train-on-matched-corpus to train on the pairs being matched (its figures are then not held out)"
            )
        model = "bow" if method is DocMethod.BOW else "hide"
        return create_run(
            kind=RunKind.TRAIN_DOC_MODEL,
            src_corpus=train_corpus,
            src_lang=o["src"],
            tgt_lang=o["tgt"],
            params={"model": model, **_train_params(model, o)},
            enqueue=False,
        )


def _corpus(name: str) -> Corpus:
    corpus = Corpus.objects.filter(name=name).first()
    if corpus is None:
        raise CommandError(f"no corpus named '{name}'")
    return corpus


def gold_summary(run: MiningRun) -> str:
    """The line the command prints about the run's gold document pairs (P@1 / P@3 / precision of its selection)."""
    gold = run.stats.get("gold", {})
    label = ""
    if run.stats.get("doc_model", {}).get("trained_on_this_corpus"):
        label = " [document model trained on this corpus]"
    if not gold.get("pairs"):
        return f"Gold document pairs: none to measure with ({gold.get('note', 'no gold pairs')}){label}."
    prec = "-" if gold["precision"] is None else f"{100 * gold['precision']:.1f}"
    return (
        f"Gold document pairs ({gold['note']}): P@1 {100 * gold['p_at_1']:.1f}, P@3 {100 * gold['p_at_3']:.1f}, "
        f"precision {prec} (the run's selection: margin, one-to-one, pre-filter){label}."
    )


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
