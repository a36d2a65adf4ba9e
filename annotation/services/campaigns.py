"""Create campaigns: sample each run's items (uniform, score bands, around a threshold, uncertain, the kept set),
add controls, and the one-click check of a run's stated precision."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import Max, Min

from mining.core.calibration.estimates import uncertain_sample
from mining.core.precision_labels import proportional_allocation
from mining.models import (
    GoldSentencePair,
    MiningRun,
    RunKind,
    SentencePairCandidate,
)
from mining.selectors import run_threshold, run_threshold_info, samples

from ..models import Campaign, CampaignItem, Sampler, Verdict
from ..spec import SEED_MAX, CampaignSpec
from .errors import ReviewError


def _sample_ids(run: MiningRun, spec: CampaignSpec) -> list[tuple[int, int, int]]:
    """(candidate id, stratum, stratum size) sampled in SQL, never loading the run's candidates into Python.

    A seeded md5 of the id gives a reproducible random order inside Postgres.
    """
    sampler, n, seed, threshold, bands = spec.sampler, spec.sample_size, spec.seed, spec.threshold, spec.bands
    qs = SentencePairCandidate.objects.filter(run=run)
    if sampler == Sampler.TOP:
        total = qs.count()
        return [(pk, 0, total) for pk in qs.order_by("rank").values_list("id", flat=True)[:n]]
    if sampler == Sampler.KEPT:
        return _kept_ids(run, n, seed, threshold if threshold is not None else run_threshold(run), bands)
    if sampler == Sampler.THRESHOLD:
        threshold = threshold if threshold is not None else run_threshold(run)
        if threshold is None:
            raise ReviewError(
                f"run {run.pk} has no threshold to sample around (none given, none calibrated for "
                f"{run.src_lang}-{run.tgt_lang}, and too few pairs for a default): give one"
            )
        total = qs.count()
        return [(pk, 0, total) for pk in samples.ids_nearest_score(run=run, score=threshold, n=n)]
    if sampler == Sampler.UNIFORM:
        total = qs.count()
        return [(pk, 0, total) for pk in samples.ids_seeded(run=run, seed=seed, n=n)]
    if sampler == Sampler.UNCERTAIN:
        return _uncertain_ids(run, n, seed, exclude=[])
    if sampler == Sampler.STRATIFIED:
        stats = qs.aggregate(lo=Min("score"), hi=Max("score"))
        if stats["lo"] is None:
            return []
        lo, hi = stats["lo"], stats["hi"] + 1e-9
        per_band = max(1, n // bands)
        return samples.ids_by_score_band(run=run, lo=lo, hi=hi, bands=bands, seed=seed, per_band=per_band)
    raise ReviewError(f"unknown sampler '{sampler}'")


def _kept_ids(run: MiningRun, n: int, seed: int, threshold: float | None, bands: int) -> list[tuple[int, int, int]]:
    """(candidate id, band, band size) of a sample stratified over the run's kept set: the pairs that passed the
    pre-filters and score at least `threshold`, cut into `bands` equal score bands from the threshold to the top,
    n drawn in proportion to the bands' sizes (at least one a band: ``core.precision_labels.proportional_allocation``;
    equal allocation weighed the labels so unequally that 100 of them stated the precision to 5 points RMS against 3,
    docs/BENCHMARKS.md), seeded, so that the labels, weighted by band size over labels drawn, estimate the kept set's
    precision."""
    kept = samples.kept_band_sizes(run=run, threshold=threshold, bands=bands)
    if kept is None:
        return []
    lo, hi, sizes = kept
    per_band = proportional_allocation(np.asarray(sizes, dtype=np.int64), n).tolist()
    return samples.ids_by_score_band(run=run, lo=lo, hi=hi, bands=bands, seed=seed, per_band=per_band, kept_only=True)


CHECK_SAMPLE = 50
CHECK_BANDS = 5


def check_estimate_campaign(*, run: MiningRun, user: Any) -> Campaign:
    """The one-click check of a run's stated precision: a campaign of CHECK_SAMPLE pairs drawn stratified over the
    run's kept set (``Sampler.KEPT`` at the run's threshold, in proportion to the score bands' sizes), its creator as
    reviewer, so that its labels settle the precision the run states (``mining.selectors.settled``) and its results
    page gives the kept set's precision from the labels beside the label-free estimate."""
    threshold = run_threshold(run)
    if run.kind != RunKind.SENTENCE or threshold is None:
        raise ReviewError(f"run {run.pk} states no precision to check (a sentence run with a threshold has one)")
    spec = CampaignSpec(
        name=f"Check the precision of run {run.pk} ({run.src_lang}-{run.tgt_lang})",
        sample_size=CHECK_SAMPLE,
        sampler=Sampler.KEPT,
        threshold=threshold,
        bands=CHECK_BANDS,
        seed=run.pk % SEED_MAX,
    )
    return campaign_create(spec=spec, runs=[run], reviewers=[user] if user is not None else [], user=user)


def confidence_threshold(run: MiningRun) -> float:
    """The run's language-pair threshold on the calibrated-confidence scale of this run.

    The calibration page stores the pair's threshold on the margin score; it maps to the confidence that keeps as many
    of the run's pairs (the lowest confidence among the top n, n = pairs scoring at least the threshold), which is the
    same cut exactly when confidence is monotone in the score (Platt, isotonic) and the equal-yield cut for the
    source-aware head. The score threshold is the run's own or the one stored for its language pair on its scoring
    configuration (`run_threshold_info`: never one found on another scale). Raises ReviewError when there is none or
    the run has no calibrated confidences.
    """
    info = run_threshold_info(run)
    chosen = info.value if info.source in ("run", "calibrated") else None
    n_calibrated, n_kept = samples.calibrated_counts(run=run, min_score=chosen if chosen is not None else 0.0)
    if n_calibrated == 0:
        raise ReviewError(
            f"the uncertain sampler needs calibrated confidences, and run '{run}' has none: apply "
            f"a calibration model to it first (calibration page of {run.src_lang}-{run.tgt_lang})"
        )
    if chosen is None:
        raise ReviewError(
            f"the uncertain sampler needs the threshold of {run.src_lang}-{run.tgt_lang}, and none "
            f"is stored for run '{run}'s scoring configuration ({info.scale_key}): choose one on the calibration "
            "page first"
        )
    return samples.confidence_at(run=run, position=max(n_kept - 1, 0))


def _uncertain_ids(run: MiningRun, n: int, seed: int, exclude: Sequence[int]) -> list[tuple[int, int, int]]:
    """(candidate id, 0, 0) of the n candidates whose calibrated confidence is nearest the run's threshold on the
    confidence scale, nearest first (seeded ties), leaving out `exclude`: the core's `uncertain_sample` (the code the
    bench measures) over the run's (id, confidence) pairs, 16 bytes a candidate. Not a probability sample: stratum
    size 0."""
    threshold = confidence_threshold(run)
    rows = np.asarray(samples.calibrated_confidences(run=run), dtype=np.float64).reshape(-1, 2)
    ids = rows[:, 0].astype(np.int64)
    picked = uncertain_sample(rows[:, 1], threshold, n, exclude=np.isin(ids, np.asarray(exclude, np.int64)), seed=seed)
    return [(int(ids[i]), 0, 0) for i in picked]


def _controls(run: MiningRun, n: int, seed: int) -> list[dict[str, Any]]:
    """Known GOOD items from the corpus's gold pairs and known BAD ones from shuffled gold pairs."""
    gold = list(
        GoldSentencePair.objects.filter(
            corpus=run.src_corpus, src__lang=run.src_lang, tgt__lang=run.tgt_lang
        ).values_list("src_id", "tgt_id")[:5000]
    )
    if len(gold) < 2 or n == 0:
        return []
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(gold), size=min(n, len(gold)), replace=False)
    out = []
    for k, i in enumerate(picks):
        if k % 2 == 0:
            out.append({"src_id": gold[i][0], "tgt_id": gold[i][1], "expected": Verdict.GOOD})
        else:
            j = (i + 1 + int(rng.integers(0, len(gold) - 1))) % len(gold)
            out.append({"src_id": gold[i][0], "tgt_id": gold[j][1], "expected": Verdict.BAD})
    return out


@transaction.atomic
def campaign_create(
    *, spec: CampaignSpec, runs: Sequence[MiningRun], reviewers: Sequence[Any], user: Any = None
) -> Campaign:
    """Create a campaign and sample its items from each run (plus control items, placed at seeded positions).

    `spec.n_uncertain` adds that many items per run drawn by the uncertain sampler (active sampling) beside the
    `spec.sampler`'s sample; each item records the sampler that drew it, so precision estimates leave them out.
    """
    if not runs:
        raise ReviewError("a campaign needs at least one run")
    if reviewers and spec.overlap > len(reviewers):
        raise ReviewError(f"overlap must be between 1 and the number of reviewers ({len(reviewers)})")
    campaign = Campaign.objects.create(
        name=spec.name,
        sample_size=spec.sample_size,
        sampler=spec.sampler,
        seed=spec.seed,
        overlap=spec.overlap,
        n_controls=spec.n_controls,
        blind=spec.blind,
        threshold=spec.threshold,
        bands=spec.bands,
        n_uncertain=spec.n_uncertain,
        guidelines=spec.guidelines,
        created_by=user,
    )
    campaign.runs.set(runs)
    campaign.reviewers.set(reviewers)
    items: list[CampaignItem] = []
    for run in runs:
        if run.kind == RunKind.DOCUMENT:
            raise ReviewError("document runs are reviewed pair by pair on the document pages, not in campaigns")
        sampled = [(*row, spec.sampler) for row in _sample_ids(run, spec)]
        if spec.n_uncertain:
            sampled += [
                (*row, Sampler.UNCERTAIN)
                for row in _uncertain_ids(run, spec.n_uncertain, spec.seed, exclude=[r[0] for r in sampled])
            ]
        cands = SentencePairCandidate.objects.in_bulk([r[0] for r in sampled])
        for pk, stratum, size, drawn_by in sampled:
            c = cands[pk]
            items.append(
                CampaignItem(
                    campaign=campaign,
                    run=run,
                    sentence_pair=c,
                    src_id=c.src_id,
                    tgt_id=c.tgt_id,
                    sampler=drawn_by,
                    stratum=stratum,
                    stratum_size=size,
                    position=0,
                )
            )
        for ctl in _controls(run, spec.n_controls, spec.seed):
            items.append(CampaignItem(campaign=campaign, run=run, is_control=True, position=0, stratum=-1, **ctl))
    order = np.random.default_rng(spec.seed).permutation(len(items))
    for pos, i in enumerate(order):
        items[i].position = pos
    # Written in queue order, so that the ids a reviewer sees follow the seeded shuffle: they carry nothing of the
    # sampler's order (score bands, top ranks) and the control items are spread among the others.
    items.sort(key=lambda it: it.position)
    CampaignItem.objects.bulk_create(items, batch_size=2000)
    return campaign
