"""`manage.py estimate_precision RUN [DECOY_CORPUS]`: estimate a sentence run's precision from decoy hits now."""

from django.core.management.base import BaseCommand, CommandError

from mining.models import Corpus, MiningRun
from mining.services.precision import run_precision_estimate


class Command(BaseCommand):
    help = (
        "Estimate the precision of a succeeded sentence run's kept pairs from decoy hits and store it with the run. "
        "DECOY_CORPUS (a corpus name or id, disjoint from the run's, with sentences in its target language) gives "
        "the decoys; without it the largest other corpus in that language is used, and when there is none the run's "
        "target sentences with their words shuffled (a rough figure with a wide interval)."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int, metavar="RUN")
        parser.add_argument("decoy_corpus", nargs="?", default=None, metavar="DECOY_CORPUS")
        parser.add_argument("--seed", type=int, default=0, help="the decoys' seed. Default: 0.")

    def handle(self, *args, run_id: int, decoy_corpus: str | None, seed: int, **options):
        run = MiningRun.objects.select_related("src_corpus", "tgt_corpus", "encoder").filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"no run {run_id}")
        decoys = None
        if decoy_corpus is not None:
            query = {"pk": int(decoy_corpus)} if decoy_corpus.isdigit() else {"name": decoy_corpus}
            decoys = Corpus.objects.filter(**query).first()
            if decoys is None:
                raise CommandError(f"no corpus '{decoy_corpus}'")
        try:
            got = run_precision_estimate(run=run, decoy_corpus=decoys, seed=seed)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if got["precision"] is None:
            self.stdout.write(f"Run {run_id}: no estimate: {got['reason']}")
            return
        self.stdout.write(
            f"Run {run_id}: precision {100 * got['precision']:.1f} % "
            f"({100 * got['low']:.1f}-{100 * got['high']:.1f} %, {100 * got['confidence']:.0f} % interval) of the "
            f"{got['n_kept']} pairs kept at {got['threshold']:.4f} ({got['threshold_source']}); "
            f"{got['decoy_hits']} decoy hits among {got['n_decoys']} decoys: {got['decoys']}"
        )
