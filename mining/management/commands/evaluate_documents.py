"""`manage.py evaluate_documents CORPUS --src en --tgt fr [--train-corpus OTHER]`: document matching, every method.

Every method is scored over ALL target documents of the corpus, on the documents' own sentence splits and on a
noisy re-split (each document's sentences joined and split again by the automatic splitter), as in the HiDE paper's
Table 3: P@1/3/10 of its raw ranking, and P@1 and precision of the pairs a run with it keeps (margin, one-to-one
selection, pre-filter), the figure `match_documents` prints. HiDE (both poolings) and Document BoW are trained on
--train-corpus's gold document pairs, never on the evaluated corpus, and so are the re-ranker's vote weight and the
pre-filter's thresholds; without it, HiDE rows use the latest trained HiDE model of the language pair, if any.
"""

import time

from django.core.management.base import BaseCommand, CommandError

from mining.core.doc_evaluation import Models, Noise, format_table, train_models
from mining.core.docmatch import HideConfig, HideModel
from mining.models import Artefact, ArtefactKind, Corpus
from mining.services.doc_evaluation import corpus_pairs, evaluate_corpus
from mining.services.encoders import artefact_path, encoder_default, load_encoder


class Command(BaseCommand):
    help = __doc__.split("\n\n")[1].replace("\n", " ")

    def add_arguments(self, parser):
        parser.add_argument("corpus")
        parser.add_argument("--src", required=True)
        parser.add_argument("--tgt", required=True)
        parser.add_argument("--train-corpus", help="train HiDE and Document BoW on this corpus's gold document pairs")
        parser.add_argument("--encoder", type=int, help="sentence encoder artefact id (default: the app's default)")
        parser.add_argument("--noise", choices=[n.value for n in Noise], default=Noise.RESPLIT.value)
        parser.add_argument("--window", type=int, default=120, help="characters per piece with --noise window")
        parser.add_argument("--epochs", type=int, default=HideConfig.epochs, help="HiDE training epochs")
        parser.add_argument("--no-bow", action="store_true", help="skip Document BoW (its training is the slowest)")
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args, **o):
        corpus = Corpus.objects.filter(name=o["corpus"]).first()
        if corpus is None:
            raise CommandError(f"no corpus named '{o['corpus']}'")
        artefact = (
            Artefact.objects.filter(pk=o["encoder"], kind=ArtefactKind.ENCODER).first()
            if o["encoder"]
            else encoder_default()
        )
        if artefact is None:
            raise CommandError(f"no encoder artefact {o['encoder']}")
        encoder = load_encoder(artefact)
        o["corpus_pk"] = corpus.pk
        t0 = time.perf_counter()
        try:
            pairs = corpus_pairs(corpus, o["src"], o["tgt"])
            models = self._models(o, encoder, artefact.pk)
            results = evaluate_corpus(pairs, encoder.encode, models, noise=Noise(o["noise"]), window=o["window"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        title = (
            f"{corpus.name} {o['src']}-{o['tgt']}, sentence encoder {artefact}: P@N (%) of "
            f"{pairs.src.n_docs} source documents over all {pairs.tgt.n_docs} target documents "
            f"({time.perf_counter() - t0:.0f} s)"
        )
        self.stdout.write(format_table(results, title))

    def _models(self, o, encoder, encoder_pk: int) -> Models:
        if o["train_corpus"]:
            train = Corpus.objects.filter(name=o["train_corpus"]).first()
            if train is None:
                raise CommandError(f"no corpus named '{o['train_corpus']}'")
            if train.name == o["corpus"]:
                raise CommandError("--train-corpus must differ from the evaluated corpus")
            tp = corpus_pairs(train, o["src"], o["tgt"])
            return train_models(
                tp.src.embedded(encoder.encode),
                tp.paired_tgt.embedded(encoder.encode),
                hide_config=HideConfig(epochs=o["epochs"]),
                seed=o["seed"],
                bow=not o["no_bow"],
            )
        latest = (
            Artefact.objects.filter(
                kind=ArtefactKind.DOC_MODEL,
                name="hide",
                src_lang=o["src"],
                tgt_lang=o["tgt"],
                params__encoder=encoder_pk,
            )
            .order_by("-version")
            .first()
        )
        if latest is None:
            self.stdout.write(
                "No --train-corpus and no HiDE model trained for this pair over this sentence encoder: "
                "HiDE and Document BoW rows are left out."
            )
            return Models()
        model = HideModel.load(artefact_path(latest))
        if latest.trained_on_id == o["corpus_pk"]:
            self.stdout.write(
                f"HiDE model {latest.pk} was trained on this corpus's gold pairs: its rows are not held-out figures."
            )
        return Models({model.config.pooling: model}, None)
