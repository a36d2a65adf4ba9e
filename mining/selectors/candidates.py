"""Reads of a run's candidates: the kept filter, their label counts, filtered querysets and keyset pages, the
pre-filter tallies, and the score histogram with yield and precision per threshold."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import connection, models
from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from ..models import DocumentPairCandidate, MiningRun, RunKind, SentencePairCandidate, Verdict
from .labels import label_model

GOOD, BAD = Verdict.GOOD.value, Verdict.BAD.value


def kept_q(*, threshold: float | None, include_filtered: bool = False) -> Q:
    """Candidates a threshold keeps: score >= threshold and (unless asked) no pre-filter rejection."""
    q = Q()
    if threshold is not None:
        q &= Q(score__gte=threshold)
    if not include_filtered:
        q &= Q(filter_reason="")
    return q


def candidate_model(run: MiningRun) -> type[models.Model]:
    """Document runs hold DocumentPairCandidate rows; every other kind SentencePairCandidate rows."""
    return DocumentPairCandidate if run.kind == RunKind.DOCUMENT else SentencePairCandidate


def _label_fk(model: type[models.Model]) -> str:
    return "document_pair" if model is DocumentPairCandidate else "sentence_pair"


def annotate_labels(qs: QuerySet) -> QuerySet:
    """Add n_good / n_bad (labels of each candidate) as correlated subqueries: still one query."""
    label = label_model()
    if label is None:
        return qs.annotate(
            n_good=models.Value(0, output_field=models.IntegerField()),
            n_bad=models.Value(0, output_field=models.IntegerField()),
        )
    fk = _label_fk(qs.model)

    def count(verdict: str) -> models.Func:
        sub = (
            label.objects.filter(**{fk: OuterRef("pk")}, verdict=verdict)
            .order_by()
            .values(fk)
            .annotate(c=Count("pk"))
            .values("c")
        )
        return models.functions.Coalesce(models.Subquery(sub, output_field=models.IntegerField()), 0)

    return qs.annotate(n_good=count(GOOD), n_bad=count(BAD))


def filter_by_label(qs: QuerySet, state: str) -> QuerySet:
    """unlabelled / good / bad (majority of the candidate's labels; a tie is neither). Needs annotate_labels."""
    if not state:
        return qs
    label = label_model()
    if label is None:
        return qs if state == "unlabelled" else qs.none()
    fk = _label_fk(qs.model)
    if state == "unlabelled":
        return qs.filter(~Exists(label.objects.filter(**{fk: OuterRef("pk")})))
    # The Exists() first lets Postgres semi-join the labels instead of counting them for every candidate.
    if state == "good":
        return qs.filter(
            Exists(label.objects.filter(**{fk: OuterRef("pk")}, verdict=GOOD)), n_good__gt=models.F("n_bad")
        )
    if state == "bad":
        return qs.filter(
            Exists(label.objects.filter(**{fk: OuterRef("pk")}, verdict=BAD)), n_bad__gt=models.F("n_good")
        )
    raise ValueError(f"unknown label state {state!r}")


def candidate_queryset(*, run: MiningRun, filters: dict[str, Any]) -> QuerySet:
    """A run's candidates (sentence or document pairs), filtered, with both sides joined and label counts, by rank."""
    model = candidate_model(run)
    qs = model.objects.filter(run=run)
    if filters.get("min_score") is not None:
        qs = qs.filter(score__gte=filters["min_score"])
    if filters.get("max_score") is not None:
        qs = qs.filter(score__lte=filters["max_score"])
    reason = (filters.get("filter_reason") or "").strip()
    if reason:
        qs = qs.filter(filter_reason="" if reason == "none" else reason)
    text = (filters.get("q") or "").strip()
    if text and model is DocumentPairCandidate:
        qs = qs.filter(
            Q(src__title__icontains=text)
            | Q(tgt__title__icontains=text)
            | Q(src__external_id__icontains=text)
            | Q(tgt__external_id__icontains=text)
        )
    elif text:
        qs = qs.filter(Q(src__text__icontains=text) | Q(tgt__text__icontains=text))
    qs = annotate_labels(qs)
    qs = filter_by_label(qs, filters.get("label") or "")
    joined = ("src", "tgt") if model is DocumentPairCandidate else ("src", "tgt", "calibration")
    return qs.select_related(*joined).order_by("rank")


@dataclass(frozen=True)
class CandidatePage:
    items: list[Any]
    next_after: int | None
    has_prev: bool = False
    prev_after: int | None = None
    """The previous page is the one `after=prev_after` shows (None: the first page)."""


def candidate_page(
    *, run: MiningRun, filters: dict[str, Any], after: int | None = None, size: int = 50
) -> CandidatePage:
    """One keyset page (rank > after) of a run's candidates: one query, uses the (run, rank) index."""
    qs = candidate_queryset(run=run, filters=filters)
    has_prev, prev_after = False, None
    if after:
        # the previous page: the `size` matching ranks up to `after`; it starts after the one before them, if any
        before = list(qs.filter(rank__lte=after).order_by("-rank").values_list("rank", flat=True)[: size + 1])
        has_prev = bool(before)
        prev_after = before[size] if len(before) > size else None
        qs = qs.filter(rank__gt=after)
    items = list(qs[: size + 1])
    next_after = items[size - 1].rank if len(items) > size else None
    return CandidatePage(items=items[:size], next_after=next_after, has_prev=has_prev, prev_after=prev_after)


def filter_reasons(*, run: MiningRun) -> list[tuple[str, int]]:
    """(rule name, how many candidates it rejected), most frequent first."""
    rows = (
        candidate_model(run)
        .objects.filter(run=run)
        .exclude(filter_reason="")
        .order_by()
        .values_list("filter_reason")
        .annotate(n=Count("pk"))
        .order_by("-n")
    )
    return [(r, n) for r, n in rows]


@dataclass(frozen=True)
class ScoreHistogram:
    """Score distribution in equal-width bins: edges (bins+1,); per bin all, kept (unfiltered), labelled and GOOD
    (kept pairs with labels / with more GOOD than BAD labels) counts."""

    edges: list[float]
    counts: list[int]
    kept_counts: list[int]
    labelled_counts: list[int] = field(default_factory=list)
    good_counts: list[int] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.counts)

    @staticmethod
    def _suffix_sums(values: list[int]) -> list[int]:
        out, running = [0] * len(values), 0
        for i in range(len(values) - 1, -1, -1):
            running += values[i]
            out[i] = running
        return out

    def yield_curve(self) -> list[tuple[float, int]]:
        """(threshold, pairs kept) at each bin's lower edge: unfiltered pairs scoring at least the threshold."""
        return list(zip(self.edges[:-1], self._suffix_sums(self.kept_counts), strict=True))

    def threshold_table(self) -> list[tuple[float, int, int, float | None]]:
        """(threshold, pairs kept, labelled among them, precision on the labelled) at each bin's lower edge."""
        kept = self._suffix_sums(self.kept_counts)
        labelled = self._suffix_sums(self.labelled_counts or [0] * len(self.counts))
        good = self._suffix_sums(self.good_counts or [0] * len(self.counts))
        return [
            (t, k, n, g / n if n else None) for t, k, n, g in zip(self.edges[:-1], kept, labelled, good, strict=True)
        ]


def _label_join(run: MiningRun) -> tuple[str, list[Any]]:
    """SQL joining each candidate of the run to its GOOD/BAD label counts (l.g, l.b); empty without labels."""
    label = label_model()
    if label is None:
        return "", []
    model = candidate_model(run)
    fk = label._meta.get_field(_label_fk(model)).column
    verdict = label._meta.get_field("verdict").column
    cand = model._meta.db_table
    sql = (
        f"LEFT JOIN (SELECT {fk} AS cid, count(*) FILTER (WHERE {verdict} = %s) AS g, "
        f"count(*) FILTER (WHERE {verdict} = %s) AS b FROM {label._meta.db_table} "
        f"WHERE {fk} IN (SELECT id FROM {cand} WHERE run_id = %s) GROUP BY {fk}) l ON l.cid = c.id"
    )
    return sql, [GOOD, BAD, run.pk]


def score_histogram(*, run: MiningRun, bins: int = 40) -> ScoreHistogram:
    """One aggregate query (width_bucket over [min, max], labels joined per candidate); never loads the rows."""
    table = candidate_model(run)._meta.db_table
    join, join_params = _label_join(run)
    labelled, good = (
        (
            "count(*) FILTER (WHERE c.filter_reason = '' AND l.cid IS NOT NULL)",
            "count(*) FILTER (WHERE c.filter_reason = '' AND l.g > l.b)",
        )
        if join
        else ("0", "0")
    )
    sql = f"""
        WITH b AS (SELECT min(score) AS lo, max(score) AS hi FROM {table} WHERE run_id = %s)
        SELECT b.lo, b.hi, least(width_bucket(c.score, b.lo, b.hi + 1e-9, %s), %s) AS bucket,
               count(*), count(*) FILTER (WHERE c.filter_reason = ''), {labelled}, {good}
        FROM {table} c CROSS JOIN b {join} WHERE c.run_id = %s GROUP BY b.lo, b.hi, bucket ORDER BY bucket
    """
    with connection.cursor() as cur:
        cur.execute(sql, [run.pk, bins, bins, *join_params, run.pk])
        rows = cur.fetchall()
    if not rows:
        return ScoreHistogram(edges=[], counts=[], kept_counts=[])
    lo, hi = float(rows[0][0]), float(rows[0][1])
    width = (hi + 1e-9 - lo) / bins
    edges = [lo + i * width for i in range(bins + 1)]
    counts, kept, n_labelled, n_good = [0] * bins, [0] * bins, [0] * bins, [0] * bins
    for _, _, bucket, n, n_kept, n_lab, n_g in rows:
        i = int(bucket) - 1
        counts[i], kept[i], n_labelled[i], n_good[i] = n, n_kept, n_lab, n_g
    return ScoreHistogram(edges=edges, counts=counts, kept_counts=kept, labelled_counts=n_labelled, good_counts=n_good)
