"""Reads of the mining app: run progress, candidate lists, score histograms, run comparison, the dashboard.

Every function here reads only; each list is a fixed number of queries whatever the table size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.apps import apps
from django.db import connection, models
from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from pcapp.roles import is_reviewer, is_staff

from .models import (
    Corpus,
    DocumentPairCandidate,
    GoldSentencePair,
    ImportJob,
    JobStatus,
    LanguagePairSetting,
    MiningRun,
    RunKind,
    SentencePairCandidate,
    Verdict,
)
from .words import readable

GOOD, BAD = Verdict.GOOD.value, Verdict.BAD.value


def label_model() -> type[models.Model] | None:
    """annotation.Label when the annotation app has it (verdict GOOD/BAD, FK sentence_pair), else None."""
    try:
        return apps.get_model("annotation", "Label")
    except LookupError:
        return None


# --- corpora ----------------------------------------------------------------------------------------------------


def corpus_list() -> QuerySet[Corpus]:
    """Every corpus by name, with how many runs read it (one query)."""
    n_runs = (
        MiningRun.objects.filter(Q(src_corpus=OuterRef("pk")) | Q(tgt_corpus=OuterRef("pk")))
        .order_by()
        .annotate(c=models.Func(models.F("pk"), function="COUNT"))
        .values("c")
    )
    return Corpus.objects.order_by("name").annotate(n_runs=models.Subquery(n_runs, output_field=models.IntegerField()))


def corpus_detail(*, corpus: Corpus, gold_sample: int = 10) -> dict[str, Any]:
    """One corpus's page: per-language counts, its imports, the runs reading it, its gold pairs per language pair and a
    few of them. A fixed number of queries."""
    per_language = sorted((corpus.stats or {}).get("per_language", {}).items())
    gold = GoldSentencePair.objects.filter(corpus=corpus)
    return {
        "corpus": corpus,
        "per_language": per_language,
        "imports": list(ImportJob.objects.filter(corpus=corpus).order_by("-created_at")[:20]),
        "runs": list(
            MiningRun.objects.filter(Q(src_corpus=corpus) | Q(tgt_corpus=corpus))
            .select_related("src_corpus", "tgt_corpus", "encoder")
            .order_by("-created_at")[:50]
        ),
        "gold_by_pair": list(
            gold.order_by().values_list("src__lang", "tgt__lang").annotate(n=Count("pk")).order_by("-n")
        ),
        "gold_sample": list(gold.select_related("src", "tgt").order_by("id")[:gold_sample]),
    }


# --- runs -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobBar:
    """What a progress bar of a job (run or import) shows: the percent done and what it is a percent of.

    `overall` is True when the percent is the share of the whole job (its `progress` field, or 100 once it
    succeeded), False when only the current stage's done/total is known (then `label` names the stage)."""

    percent: float | None
    overall: bool
    label: str


def job_bar(job: Any) -> JobBar:
    """The progress bar of a run or import: 100 % once it succeeded; else its share over all stages when the worker
    reports one; else the current stage's done/total, labelled with the stage; else nothing to draw."""
    stage = readable(job.stage) if job.stage and job.stage != "done" else ""
    if job.status == JobStatus.SUCCEEDED:
        return JobBar(100.0, True, "done")
    if job.status == JobStatus.PENDING:
        return JobBar(None, True, "queued")
    if job.progress and job.progress > 0:
        pct = min(100.0, 100.0 * float(job.progress))
        where = f" · {stage}" if stage else ""
        return JobBar(pct, True, f"{pct:.0f} % of the whole job{where}")
    if job.total > 0:
        pct = min(100.0, 100.0 * job.done / job.total)
        return JobBar(pct, False, f"{stage or 'stage'}: {job.done:,} / {job.total:,} ({pct:.0f} % of this stage)")
    return JobBar(None, False, stage or job.get_status_display().lower())


@dataclass(frozen=True)
class RunProgress:
    """What the run page shows while a run works: stage, done/total, elapsed seconds, items per second."""

    status: str
    stage: str
    done: int
    total: int
    elapsed_s: float | None
    rate: float | None
    percent: float | None
    finished: bool
    bar: JobBar | None = None


def run_progress(*, run: MiningRun, now: datetime | None = None) -> RunProgress:
    """Progress of a run from its row: the rate is the current stage's done over the time spent in that stage."""
    now = now or timezone.now()
    elapsed = None
    if run.started_at is not None:
        elapsed = max(0.0, ((run.finished_at or now) - run.started_at).total_seconds())
    rate = None
    if elapsed is not None and run.done > 0:
        spent_before = sum(float(v) for k, v in (run.timings or {}).items() if k != run.stage)
        stage_time = elapsed - spent_before
        rate = run.done / stage_time if stage_time > 0 else None
    bar = job_bar(run)
    percent = bar.percent
    return RunProgress(
        status=run.status,
        stage=run.stage,
        done=run.done,
        total=run.total,
        elapsed_s=elapsed,
        rate=rate,
        percent=percent,
        finished=run.is_finished,
        bar=bar,
    )


def run_get(*, pk: int) -> MiningRun:
    """One run with its corpora and encoder (one query)."""
    return MiningRun.objects.select_related("src_corpus", "tgt_corpus", "encoder", "parent").get(pk=pk)


def run_list(*, limit: int = 50, kinds: tuple[str, ...] | None = None, status: str | None = None) -> list[MiningRun]:
    """Recent runs (of the given kinds and status, if given) with corpora and encoder joined."""
    qs = MiningRun.objects.select_related("src_corpus", "tgt_corpus", "encoder").order_by("-created_at")
    if kinds is not None:
        qs = qs.filter(kind__in=kinds)
    if status is not None:
        qs = qs.filter(status=status)
    return list(qs[:limit])


@dataclass(frozen=True)
class RunThreshold:
    """The score threshold that decides which of a run's candidates are kept, and where it comes from."""

    value: float | None
    source: str  # "run" (its parameters), "calibrated" (the language pair's stored threshold), "default", "none"
    detail: dict = field(default_factory=dict)


def run_threshold_info(run: MiningRun) -> RunThreshold:
    """The run's own threshold if it was started with one; else the threshold stored for its language pair from
    calibration; else the label-free default estimated from the run's scores (with its method, estimated precision
    and assumption); else none (every candidate is kept)."""
    # The pair's setting is read whatever the run's parameters, so that every results page makes the same queries.
    setting = LanguagePairSetting.objects.filter(src_lang=run.src_lang, tgt_lang=run.tgt_lang).first()
    value = (run.params or {}).get("threshold")
    if value is not None:
        return RunThreshold(float(value), "run")
    if run.kind == RunKind.SENTENCE and setting is not None and setting.threshold is not None:
        return RunThreshold(float(setting.threshold), "calibrated", {"target_precision": setting.target_precision})
    default = (run.stats or {}).get("default_threshold") or {}
    if default.get("threshold") is not None:
        return RunThreshold(float(default["threshold"]), "default", default)
    return RunThreshold(None, "none", default)


def run_threshold(run: MiningRun) -> float | None:
    """The threshold that keeps a run's candidates (None keeps every candidate): see `run_threshold_info`."""
    return run_threshold_info(run).value


# --- candidates -------------------------------------------------------------------------------------------------


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


def candidate_page(
    *, run: MiningRun, filters: dict[str, Any], after: int | None = None, size: int = 50
) -> CandidatePage:
    """One keyset page (rank > after) of a run's candidates: one query, uses the (run, rank) index."""
    qs = candidate_queryset(run=run, filters=filters)
    if after:
        qs = qs.filter(rank__gt=after)
    items = list(qs[: size + 1])
    next_after = items[size - 1].rank if len(items) > size else None
    return CandidatePage(items=items[:size], next_after=next_after)


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


# --- histogram and yield ----------------------------------------------------------------------------------------


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


# --- comparison -------------------------------------------------------------------------------------------------


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


# --- dashboard --------------------------------------------------------------------------------------------------


def dashboard_data(*, user: Any) -> dict[str, Any]:
    """Corpora, recent runs, and what needs attention (recently failed and active runs and imports).

    Users with no role (neither staff nor reviewer) see nothing but a note.
    """
    if not is_reviewer(user):
        return {"no_role": True}
    recent_failures = MiningRun.objects.filter(
        status=JobStatus.FAILED, finished_at__gte=timezone.now() - timezone.timedelta(days=7)
    )
    return {
        "corpora": list(Corpus.objects.order_by("name")[:50]),
        "runs": list(run_list(limit=20)),
        "attention_runs": list(recent_failures.order_by("-finished_at")[:10]),
        "active_runs": list(
            MiningRun.objects.filter(status__in=[JobStatus.PENDING, JobStatus.RUNNING]).order_by("created_at")[:10]
        ),
        "failed_imports": list(
            ImportJob.objects.filter(
                status=JobStatus.FAILED, finished_at__gte=timezone.now() - timezone.timedelta(days=7)
            ).order_by("-finished_at")[:5]
        )
        if is_staff(user)
        else [],
        "active_imports": list(
            ImportJob.objects.filter(status__in=[JobStatus.PENDING, JobStatus.RUNNING]).order_by("created_at")[:5]
        )
        if is_staff(user)
        else [],
    }
