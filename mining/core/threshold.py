"""Score thresholds tuned on labelled pairs by one sort and a cumulative sweep (O(n log n)).

A pair is kept when ``score >= threshold``. Weights let a stratified sample count each labelled
pair by the size of the stratum it stands for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Sweep:
    """Precision / recall / F1 at every distinct score used as threshold, thresholds descending.

    Attributes:
        thresholds: (m,) float64 distinct scores, descending.
        precision: (m,) float64 weighted precision of the pairs with score >= threshold.
        recall: (m,) float64 weighted recall (against ``n_positive``).
        f1: (m,) float64 harmonic mean of the two (0 where both are 0).
        n_kept: (m,) int64 number of labelled pairs kept (unweighted).
        kept_weight: (m,) float64 weighted number of pairs kept.
    """

    thresholds: np.ndarray
    precision: np.ndarray
    recall: np.ndarray
    f1: np.ndarray
    n_kept: np.ndarray
    kept_weight: np.ndarray


@dataclass(frozen=True)
class ThresholdChoice:
    """One operating point of a sweep."""

    threshold: float
    precision: float
    recall: float
    f1: float
    n_kept: int


def _validate(
    scores: np.ndarray, labels: np.ndarray, weights: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    if s.ndim != 1 or y.shape != s.shape:
        raise ValueError(f"scores {s.shape} and labels {y.shape} must be equal-length 1-d arrays")
    if not np.all(np.isin(y, (0, 1))):
        raise ValueError("labels must be 0/1 or bool")
    if np.isnan(s).any():
        raise ValueError("scores contain NaN")
    w = np.ones_like(s) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != s.shape or (w < 0).any():
        raise ValueError("weights must be non-negative and shaped like scores")
    return s, y.astype(np.float64), w


def sweep(
    scores: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray | None = None,
    n_positive: float | None = None,
) -> Sweep:
    """Precision, recall and F1 at each distinct threshold.

    Args:
        scores: (n,) float scores of labelled pairs.
        labels: (n,) bool or 0/1, True for a correct pair.
        weights: optional (n,) non-negative weight of each pair (e.g. stratum size / sample size).
        n_positive: total (weighted) number of true pairs for recall; defaults to the weighted
            positives among ``labels``. Pass the gold count to count gold pairs never scored.

    Returns:
        Sweep with one entry per distinct score (empty arrays for empty input).
    """
    s, y, w = _validate(scores, labels, weights)
    order = np.argsort(-s, kind="stable")
    s, y, w = s[order], y[order], w[order]
    tp = np.cumsum(w * y)
    kept = np.cumsum(w)
    ends = np.flatnonzero(np.r_[s[1:] != s[:-1], True]) if s.size else np.zeros(0, dtype=np.int64)
    tp, kept = tp[ends], kept[ends]
    total = float(np.sum(w * y)) if n_positive is None else float(n_positive)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(kept > 0, tp / kept, 0.0)
        recall = tp / total if total > 0 else np.zeros_like(tp)
        f1 = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)
    return Sweep(
        thresholds=s[ends],
        precision=precision,
        recall=recall,
        f1=f1,
        n_kept=(ends + 1).astype(np.int64),
        kept_weight=kept,
    )


def _choice(sw: Sweep, i: int) -> ThresholdChoice:
    return ThresholdChoice(
        threshold=float(sw.thresholds[i]),
        precision=float(sw.precision[i]),
        recall=float(sw.recall[i]),
        f1=float(sw.f1[i]),
        n_kept=int(sw.n_kept[i]),
    )


def best_f1_threshold(
    scores: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray | None = None,
    n_positive: float | None = None,
) -> ThresholdChoice:
    """The threshold that maximises F1 (the highest such threshold when several tie).

    Args: as in ``sweep``. Raises ValueError on empty input.
    """
    sw = sweep(scores, labels, weights, n_positive)
    if sw.thresholds.size == 0:
        raise ValueError("no scores to choose a threshold from")
    return _choice(sw, int(np.argmax(sw.f1)))


def threshold_for_precision(
    scores: np.ndarray,
    labels: np.ndarray,
    target: float,
    weights: np.ndarray | None = None,
    n_positive: float | None = None,
) -> ThresholdChoice | None:
    """The lowest threshold whose kept set reaches ``precision >= target`` (most recall).

    Args: as in ``sweep``; target in [0, 1].

    Returns:
        The operating point, or None when no threshold reaches the target.
    """
    if not 0.0 <= target <= 1.0:
        raise ValueError(f"target precision must be in [0, 1], got {target}")
    sw = sweep(scores, labels, weights, n_positive)
    ok = np.flatnonzero(sw.precision >= target)
    if ok.size == 0:
        return None
    return _choice(sw, int(ok[-1]))
