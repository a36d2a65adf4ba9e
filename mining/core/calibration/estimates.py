"""Precision estimates with Wilson intervals, thresholds for a target precision, whole-run yield,
stratum weights for stratified review samples, and the sampler for uncertain pairs.

The threshold sweep itself lives in ``mining.core.threshold``; this module adds the interval,
the yield over every scored pair of a run (not only the labelled sample) and the sampling weights.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

import numpy as np

from mining.core.calibration.metrics import validate_binary
from mining.core.threshold import sweep, threshold_for_precision

logger = logging.getLogger(__name__)

Z_95 = 1.959963984540054


class PrecisionCriterion(enum.Enum):
    """What must reach the target precision when choosing a threshold."""

    POINT = "point"  # the (weighted) precision estimate itself
    LOWER_BOUND = "lower_bound"  # the Wilson lower bound (conservative)


@dataclass(frozen=True)
class Estimate:
    """A precision estimate from labelled pairs.

    Attributes:
        precision: weighted share of GOOD among the labelled pairs kept (nan when none kept).
        low: Wilson lower bound.
        high: Wilson upper bound.
        n_labelled: labelled pairs kept (unweighted count).
        n_effective: effective sample size (sum w)^2 / sum w^2 (= n_labelled when unweighted).
    """

    precision: float
    low: float
    high: float
    n_labelled: int
    n_effective: float


@dataclass(frozen=True)
class ThresholdEstimate:
    """A chosen threshold with its precision estimate and what it keeps of the whole run.

    Attributes:
        threshold: keep pairs with score >= threshold.
        estimate: precision estimate and interval on the labelled pairs kept.
        recall: weighted recall among the labelled GOOD pairs.
        n_kept: pairs of the whole run kept (the yield).
        fraction_kept: n_kept / number of the run's scores.
    """

    threshold: float
    estimate: Estimate
    recall: float
    n_kept: int
    fraction_kept: float


def wilson_interval(
    proportion: np.ndarray | float, n: np.ndarray | float, z: float = Z_95
) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of a proportion observed on n trials (n may be an effective size).

    Args:
        proportion: observed proportion(s) in [0, 1].
        n: number(s) of trials, > 0 (float allowed); where n == 0 the interval is [0, 1].
        z: normal quantile (1.96 for 95 %).

    Returns:
        (low, high) float64 arrays broadcast from the inputs.
    """
    p = np.asarray(proportion, dtype=np.float64)
    nn = np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = 1.0 + z * z / nn
        centre = (p + z * z / (2.0 * nn)) / denom
        half = z / denom * np.sqrt(p * (1.0 - p) / nn + z * z / (4.0 * nn * nn))
        low = np.where(nn > 0, np.clip(centre - half, 0.0, 1.0), 0.0)
        high = np.where(nn > 0, np.clip(centre + half, 0.0, 1.0), 1.0)
    return low, high


def weighted_proportion(labels: np.ndarray, weights: np.ndarray | None = None, z: float = Z_95) -> Estimate:
    """Weighted share of label 1 with a Wilson interval on the effective sample size.

    Args:
        labels: (n,) bool or 0/1.
        weights: optional (n,) non-negative weights.
        z: normal quantile.
    """
    y = np.asarray(labels)
    _, y, w = validate_binary(np.zeros(y.shape), y, weights)
    sw, sw2 = float(w.sum()), float(np.sum(w * w))
    if sw <= 0.0:
        return Estimate(float("nan"), 0.0, 1.0, int(y.size), 0.0)
    p = float(np.sum(w * y) / sw)
    n_eff = sw * sw / sw2
    low, high = wilson_interval(p, n_eff, z)
    return Estimate(p, float(low), float(high), int(y.size), n_eff)


def precision_at_threshold(
    scores: np.ndarray,
    labels: np.ndarray,
    threshold: float,
    weights: np.ndarray | None = None,
    z: float = Z_95,
) -> Estimate:
    """Precision of the labelled pairs with score >= threshold, with a Wilson interval.

    Args:
        scores: (n,) float scores (or calibrated confidences) of the labelled pairs.
        labels: (n,) bool or 0/1, GOOD = 1.
        threshold: keep score >= threshold.
        weights: optional (n,) stratum weights.
        z: normal quantile.
    """
    s, y, w = validate_binary(scores, labels, weights, unit_interval=False)
    kept = s >= threshold
    return weighted_proportion(y[kept], w[kept], z)


def _lower_bound_sweep(
    scores: np.ndarray, labels: np.ndarray, weights: np.ndarray | None, z: float
) -> tuple[np.ndarray, np.ndarray]:
    """Thresholds (descending) and the Wilson lower bound of precision at each."""
    s, y, w = validate_binary(scores, labels, weights, unit_interval=False)
    sw = sweep(s, y, w)
    order = np.argsort(-s, kind="stable")
    w2 = np.cumsum(w[order] ** 2)[sw.n_kept - 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        n_eff = np.where(w2 > 0, sw.kept_weight**2 / w2, 0.0)
    low, _ = wilson_interval(sw.precision, n_eff, z)
    return sw.thresholds, low


def yield_curve(all_scores: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Number of the run's pairs with score >= each threshold.

    Args:
        all_scores: (N,) float scores of every candidate pair of the run.
        thresholds: (m,) float thresholds.

    Returns:
        (m,) int64 counts.
    """
    s = np.sort(np.asarray(all_scores, dtype=np.float64).ravel())
    t = np.asarray(thresholds, dtype=np.float64)
    return (s.size - np.searchsorted(s, t, side="left")).astype(np.int64)


def choose_threshold(
    scores: np.ndarray,
    labels: np.ndarray,
    target_precision: float,
    weights: np.ndarray | None = None,
    all_scores: np.ndarray | None = None,
    criterion: PrecisionCriterion = PrecisionCriterion.POINT,
    z: float = Z_95,
) -> ThresholdEstimate | None:
    """The lowest threshold whose estimated precision reaches the target, with interval and yield.

    Args:
        scores: (n,) float scores (or confidences) of the labelled pairs.
        labels: (n,) bool or 0/1.
        target_precision: in [0, 1].
        weights: optional (n,) stratum weights.
        all_scores: (N,) scores of every pair of the run, for the yield; the labelled scores when None.
        criterion: POINT (the estimate reaches the target) or LOWER_BOUND (its Wilson lower bound does).
        z: normal quantile for the interval.

    Returns:
        The choice, or None when no threshold reaches the target.
    """
    if not 0.0 <= target_precision <= 1.0:
        raise ValueError(f"target precision must be in [0, 1], got {target_precision}")
    s, y, w = validate_binary(scores, labels, weights, unit_interval=False)
    if criterion is PrecisionCriterion.POINT:
        choice = threshold_for_precision(s, y, target_precision, w)
        if choice is None:
            return None
        threshold = choice.threshold
    else:
        thresholds, low = _lower_bound_sweep(s, y, w, z)
        ok = np.flatnonzero(low >= target_precision)
        if ok.size == 0:
            return None
        threshold = float(thresholds[ok[-1]])
    pool = s if all_scores is None else np.asarray(all_scores, dtype=np.float64).ravel()
    n_kept = int(yield_curve(pool, np.array([threshold]))[0])
    positives = float(np.sum(w * y))
    recall = float(np.sum((w * y)[s >= threshold]) / positives) if positives > 0 else 0.0
    return ThresholdEstimate(
        threshold=threshold,
        estimate=precision_at_threshold(s, y, threshold, w, z),
        recall=recall,
        n_kept=n_kept,
        fraction_kept=n_kept / pool.size if pool.size else 0.0,
    )


def stratum_weights(strata_of_labelled: np.ndarray, stratum_sizes: np.ndarray) -> np.ndarray:
    """Weight of each labelled item: its stratum's population / the labelled count in that stratum.

    Weighted means over the labelled items then estimate population means without bias, however
    unevenly the strata were sampled.

    Args:
        strata_of_labelled: (n,) int stratum id of each labelled item, in [0, S).
        stratum_sizes: (S,) non-negative population of each stratum.

    Returns:
        (n,) float64 weights (they sum to the population of the strata that have labels).
    """
    strata = np.asarray(strata_of_labelled)
    sizes = np.asarray(stratum_sizes, dtype=np.float64)
    if strata.ndim != 1 or sizes.ndim != 1:
        raise ValueError("strata_of_labelled and stratum_sizes must be 1-d")
    if strata.size and (not np.issubdtype(strata.dtype, np.integer) or strata.min() < 0 or strata.max() >= sizes.size):
        raise ValueError(f"stratum ids must be integers in [0, {sizes.size})")
    if (sizes < 0).any():
        raise ValueError("stratum sizes must be non-negative")
    counts = np.bincount(strata.astype(np.int64), minlength=sizes.size)
    unlabelled = np.flatnonzero((counts == 0) & (sizes > 0))
    if unlabelled.size:
        logger.warning("strata %s have pairs but no labels; estimates cover only labelled strata", unlabelled.tolist())
    return (sizes[strata] / counts[strata]).astype(np.float64)


def uncertain_sample(
    confidences: np.ndarray,
    threshold: float,
    n: int,
    exclude: np.ndarray | None = None,
    seed: int | np.random.Generator = 0,
) -> np.ndarray:
    """Indices of the items whose calibrated confidence is nearest the threshold, nearest first.

    Args:
        confidences: (N,) float confidences of the run's pairs (NaN = not scored, never picked).
        threshold: the operating threshold on the confidence.
        n: how many to pick (fewer come back when fewer are eligible).
        exclude: indices (int array) or (N,) bool mask of items not to pick (e.g. already labelled).
        seed: seed or generator for breaking ties at random.

    Returns:
        (m,) int64 indices, m = min(n, eligible items), by rising |confidence - threshold|.
    """
    c = np.asarray(confidences, dtype=np.float64)
    if c.ndim != 1:
        raise ValueError(f"confidences must be 1-d, got shape {c.shape}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    dist = np.abs(c - threshold)
    dist[np.isnan(dist)] = np.inf
    if exclude is not None:
        ex = np.asarray(exclude)
        if ex.dtype == bool and ex.shape != c.shape:
            raise ValueError("a boolean exclude mask must be shaped like confidences")
        dist[ex] = np.inf
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    perm = rng.permutation(c.size)
    d = dist[perm]
    m = min(n, int(np.isfinite(d).sum()))
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    part = np.argpartition(d, m - 1)[:m] if m < d.size else np.arange(d.size)
    part = part[np.argsort(d[part], kind="stable")]
    return perm[part].astype(np.int64)
