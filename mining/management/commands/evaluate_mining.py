"""`manage.py evaluate_mining CORPUS --src en --tgt fr`: BUCC-style evaluation of every margin x strategy."""

from django.core.management.base import BaseCommand, CommandError

from mining.core.evaluation_report import evaluate_encoder, format_report
from mining.management.commands._args import comma_ints
from mining.models import Artefact, ArtefactKind, Corpus
from mining.services.encoders import encoder_default, load_encoder
from mining.services.evaluation import bucc_from_corpus


class Command(BaseCommand):
    help = (
        "Hide a corpus's gold pairs among non-parallel sentences (about 2-5 % parallel), mine with every "
        "margin x strategy, print P/R/F1 at the F1-best threshold and the gold-only P@1."
    )

    def add_arguments(self, parser):
        parser.add_argument("corpus")
        parser.add_argument("--src", required=True)
        parser.add_argument("--tgt", required=True)
        parser.add_argument("--encoder", help="NAME or NAME:VERSION (default: the built-in encoder)")
        parser.add_argument("--share", type=float, default=0.04, help="parallel share of the test set")
        parser.add_argument("--n-gold", type=int, default=None, help="number of gold pairs to hide")
        parser.add_argument("--min-words", type=int, default=5)
        parser.add_argument(
            "--k",
            type=comma_ints(minimum=1),
            default=[4],
            help="margin neighbourhood size, or several separated by commas (4,16): each is scored",
        )
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args, **o):
        corpus = Corpus.objects.filter(name=o["corpus"]).first()
        if corpus is None:
            raise CommandError(f"no corpus named '{o['corpus']}'")
        artefact = encoder_default()
        if o["encoder"]:
            name, _, version = o["encoder"].partition(":")
            qs = Artefact.objects.filter(kind=ArtefactKind.ENCODER, name=name)
            artefact = (qs.filter(version=int(version)) if version else qs).order_by("-version").first()
            if artefact is None:
                raise CommandError(f"no encoder '{o['encoder']}'")
        try:
            bucc = bucc_from_corpus(
                corpus,
                o["src"],
                o["tgt"],
                parallel_share=o["share"],
                n_gold=o["n_gold"],
                min_words=o["min_words"],
                seed=o["seed"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if len(bucc.gold) == 0:
            raise CommandError("no gold pairs left after the quality checks (try --min-words 1)")
        report = evaluate_encoder(bucc, load_encoder(artefact), o["src"], o["tgt"], k=o["k"])
        self.stdout.write(f"encoder: {artefact}")
        self.stdout.write(format_report(report))
