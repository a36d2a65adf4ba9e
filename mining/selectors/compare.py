"""Comparing two runs: the overlap of the pairs they keep and each one's precision on labels and on gold pairs."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import models
from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from ..models import GoldSentencePair, MiningRun, SentencePairCandidate
from .candidates import BAD, GOOD, kept_q
from .labels import label_model


@dataclass(frozen=True)
class RunComparison:
    """Kept pairs of runs A and B, their overlap, and each one's precision on labelled and on gold pairs."""

    kept_a: int
    kept_b: int
    overlap: int
    labelled_a: int
    good_a: int
    labelled_b: int
    good_b: int
    gold_covered_a: int = 0
    gold_hits_a: int = 0
    gold_covered_b: int = 0
    gold_hits_b: int = 0

    @staticmethod
    def _ratio(num: int, den: int) -> float | None:
        return num / den if den else None

    @property
    def precision_a(self) -> float | None:
        return self._ratio(self.good_a, self.labelled_a)

    @property
    def precision_b(self) -> float | None:
        return self._ratio(self.good_b, self.labelled_b)

    @property
    def gold_precision_a(self) -> float | None:
        return self._ratio(self.gold_hits_a, self.gold_covered_a)

    @property
    def gold_precision_b(self) -> float | None:
        return self._ratio(self.gold_hits_b, self.gold_covered_b)

    @property
    def jaccard(self) -> float | None:
        return self._ratio(self.overlap, self.kept_a + self.kept_b - self.overlap)


def _pair_label_counts(kept: QuerySet[SentencePairCandidate]) -> tuple[int, int]:
    """(labelled, GOOD) among kept pairs, judging a (src, tgt) pair by labels on any run's candidate for it.

    A pair counts as GOOD when it has more GOOD than BAD labels.
    """
    label = label_model()
    if label is None:
        return 0, 0

    def count(verdict: str) -> models.Func:
        sub = (
            label.objects.filter(
                sentence_pair__src=OuterRef("src"), sentence_pair__tgt=OuterRef("tgt"), verdict=verdict
            )
            .order_by()
            .values("verdict")
            .annotate(c=Count("pk"))
            .values("c")
        )
        return models.functions.Coalesce(models.Subquery(sub, output_field=models.IntegerField()), 0)

    agg = kept.annotate(g=count(GOOD), b=count(BAD)).aggregate(
        labelled=Count("pk", filter=Q(g__gt=0) | Q(b__gt=0)),
        good=Count("pk", filter=Q(g__gt=models.F("b"))),
    )
    return agg["labelled"], agg["good"]


def _gold_counts(kept: QuerySet[SentencePairCandidate]) -> tuple[int, int]:
    """(kept pairs whose source sentence has a gold translation, kept pairs that are gold), either direction."""
    gold = GoldSentencePair.objects
    covered = Exists(gold.filter(src=OuterRef("src"))) | Exists(gold.filter(tgt=OuterRef("src")))
    hit = Exists(gold.filter(src=OuterRef("src"), tgt=OuterRef("tgt"))) | Exists(
        gold.filter(src=OuterRef("tgt"), tgt=OuterRef("src"))
    )
    agg = kept.aggregate(covered=Count("pk", filter=covered), hits=Count("pk", filter=hit))
    return agg["covered"], agg["hits"]


def run_compare(*, a: MiningRun, b: MiningRun, threshold_a: float | None, threshold_b: float | None) -> RunComparison:
    """Overlap of the pairs two runs keep (matched on (src, tgt) sentence ids) and each one's precision on labels."""
    kept_a = SentencePairCandidate.objects.filter(kept_q(threshold=threshold_a), run=a)
    kept_b = SentencePairCandidate.objects.filter(kept_q(threshold=threshold_b), run=b)
    overlap = kept_a.filter(Exists(kept_b.filter(src=OuterRef("src"), tgt=OuterRef("tgt")))).count()
    labelled_a, good_a = _pair_label_counts(kept_a)
    labelled_b, good_b = _pair_label_counts(kept_b)
    gold_covered_a, gold_hits_a = _gold_counts(kept_a)
    gold_covered_b, gold_hits_b = _gold_counts(kept_b)
    return RunComparison(
        kept_a=kept_a.count(),
        kept_b=kept_b.count(),
        overlap=overlap,
        labelled_a=labelled_a,
        good_a=good_a,
        labelled_b=labelled_b,
        good_b=good_b,
        gold_covered_a=gold_covered_a,
        gold_hits_a=gold_hits_a,
        gold_covered_b=gold_covered_b,
        gold_hits_b=gold_hits_b,
    )
