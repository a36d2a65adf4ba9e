"""The stated precision of a run's kept set settled by reviewers' labels (``core.precision_labels``): the labels of
randomly drawn kept pairs (the one-click check's campaign, a uniform campaign; the label provider says which labels
those are, ``labels.random_sample_filter``) with the label-free decoy estimate as a prior. The run page, the API and
the exports show it, with its source ("checked with N labels"), beside the label-free figure
(``precision.threshold_statement``).

Three queries: the kept set's score range and band sizes (``samples.kept_band_sizes``, as the kept-set sampler cuts
its bands), and the labelled kept pairs with their GOOD share (a pair labelled by several reviewers counts its share
of GOOD).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from django.db.models import Avg, Case, FloatField, Value, When

from ..core.precision_labels import (
    BANDS,
    BIAS_SD_DISJOINT,
    BandCounts,
    decoy_variance,
    score_bands,
    settle_precision,
)
from ..models import MiningRun, Verdict
from . import samples
from .labels import label_model, random_sample_filter


def _labelled(run: MiningRun, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """(scores, GOOD shares) of the run's kept pairs labelled at random."""
    label, sampled = label_model(), random_sample_filter()
    if label is None or sampled is None:
        return np.zeros(0), np.zeros(0)
    rows = (
        label.objects.filter(
            sampled,
            sentence_pair__run=run,
            sentence_pair__filter_reason="",
            sentence_pair__score__gte=threshold,
        )
        .values("sentence_pair_id")
        .annotate(
            score=Avg("sentence_pair__score"),
            good=Avg(Case(When(verdict=Verdict.GOOD, then=Value(1.0)), default=Value(0.0), output_field=FloatField())),
        )
        .values_list("score", "good")
    )
    arr = np.asarray(list(rows), dtype=np.float64).reshape(-1, 2)
    return arr[:, 0], arr[:, 1]


def settled_statement(run: MiningRun, *, threshold: float, estimate: dict[str, Any] | None) -> dict[str, Any] | None:
    """The precision of the run's pairs kept at `threshold` settled by its random labels, or None without any.

    Args:
        run: a sentence run.
        threshold: the kept set's threshold.
        estimate: the label-free decoy estimate made at this threshold (``run.stats["precision_estimate"]``), or None
            when there is none at this threshold: the labels then speak alone.

    Returns:
        ``core.precision_labels.SettledPrecision.to_dict()`` plus ``source_label`` ("checked with N labels").
    """
    scores, good = _labelled(run, threshold)
    if scores.size == 0:
        return None
    kept = samples.kept_band_sizes(run=run, threshold=threshold, bands=BANDS)
    if kept is None:
        return None
    lo, hi, sizes = kept[0], kept[1], np.asarray(kept[2], dtype=np.int64)
    band = score_bands(scores, lo, hi, BANDS)
    inside = band >= 0
    counts = BandCounts(
        sizes,
        np.bincount(band[inside], minlength=BANDS).astype(np.int64),
        np.bincount(band[inside], weights=good[inside], minlength=BANDS),
    )
    # `estimate` is a stated one (threshold_statement passes it only then): disjoint decoys, whose bias spread is
    # BIAS_SD_DISJOINT; figures from the fallback decoys are never stated, so they never serve as a prior.
    prior = prior_var = None
    if estimate and estimate.get("precision") is not None and estimate.get("n_decoys"):
        prior = float(estimate["precision"])
        prior_var = decoy_variance(
            decoy_hits=int(estimate["decoy_hits"]),
            n_kept=int(estimate["n_kept"]),
            n_targets=int(estimate["n_targets"]),
            n_decoys=int(estimate["n_decoys"]),
        )
    settled = settle_precision(counts, prior_precision=prior, prior_variance=prior_var, bias_sd=BIAS_SD_DISJOINT)
    if settled is None:
        return None
    return {**settled.to_dict(), "source_label": f"checked with {settled.n_labels} labels"}
