"""Calibration metrics: expected calibration error (equal-mass bins), Brier score, log loss, reliability bins.

Every function takes confidences in [0, 1], 0/1 labels and optional non-negative sample weights
(e.g. stratum size / labelled count), and never mutates its inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ReliabilityBins:
    """A reliability diagram's data, one entry per non-empty equal-mass bin, bins by rising confidence.

    Attributes:
        mean_confidence: (b,) float64 weighted mean confidence in the bin.
        frequency: (b,) float64 weighted observed frequency of label 1 in the bin.
        count: (b,) int64 number of items in the bin (unweighted).
        weight: (b,) float64 total weight of the bin.
        low: (b,) float64 smallest confidence in the bin.
        high: (b,) float64 largest confidence in the bin.
    """

    mean_confidence: np.ndarray
    frequency: np.ndarray
    count: np.ndarray
    weight: np.ndarray
    low: np.ndarray
    high: np.ndarray


def validate_binary(
    conf: np.ndarray, labels: np.ndarray, weights: np.ndarray | None, *, unit_interval: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Check and convert (confidences, labels, weights) to float64 copies of equal shape (n,).

    Args:
        conf: (n,) float confidences (in [0, 1] when ``unit_interval``).
        labels: (n,) bool or 0/1 labels.
        weights: optional (n,) non-negative weights; ones when None.
        unit_interval: require ``conf`` in [0, 1].

    Returns:
        (conf, labels, weights), each (n,) float64.
    """
    c = np.asarray(conf, dtype=np.float64)
    y = np.asarray(labels)
    if c.ndim != 1 or y.shape != c.shape:
        raise ValueError(f"confidences {c.shape} and labels {y.shape} must be equal-length 1-d arrays")
    if not np.all(np.isin(y, (0, 1))):
        raise ValueError("labels must be 0/1 or bool")
    if not np.all(np.isfinite(c)):
        raise ValueError("confidences must be finite")
    if unit_interval and c.size and (c.min() < 0.0 or c.max() > 1.0):
        raise ValueError("confidences must lie in [0, 1]")
    w = np.ones_like(c) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != c.shape or not np.all(np.isfinite(w)) or (w < 0).any():
        raise ValueError("weights must be finite, non-negative and shaped like the confidences")
    return c, y.astype(np.float64), w


def _total(w: np.ndarray) -> float:
    total = float(w.sum())
    if total <= 0.0:
        raise ValueError("need at least one item with positive weight")
    return total


def brier_score(conf: np.ndarray, labels: np.ndarray, weights: np.ndarray | None = None) -> float:
    """Weighted mean of (conf - label)^2.

    Args:
        conf: (n,) float confidences in [0, 1].
        labels: (n,) bool or 0/1.
        weights: optional (n,) non-negative weights.
    """
    c, y, w = validate_binary(conf, labels, weights)
    return float(np.sum(w * (c - y) ** 2) / _total(w))


def log_loss(conf: np.ndarray, labels: np.ndarray, weights: np.ndarray | None = None, eps: float = 1e-7) -> float:
    """Weighted mean negative log-likelihood (natural log), confidences clipped to [eps, 1 - eps].

    Args:
        conf: (n,) float confidences in [0, 1].
        labels: (n,) bool or 0/1.
        weights: optional (n,) non-negative weights.
        eps: clipping so that a confident mistake costs -log(eps), not infinity.
    """
    c, y, w = validate_binary(conf, labels, weights)
    c = np.clip(c, eps, 1.0 - eps)
    nll = -(y * np.log(c) + (1.0 - y) * np.log1p(-c))
    return float(np.sum(w * nll) / _total(w))


def equal_mass_bins(conf: np.ndarray, weights: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin index of each item so that bins hold (about) equal weight, in order of rising confidence.

    Args:
        conf: (n,) float64 confidences.
        weights: (n,) float64 non-negative weights.
        n_bins: number of bins, >= 1.

    Returns:
        (n,) int64 bin index in [0, n_bins); ties in confidence keep their input order.
    """
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    order = np.argsort(conf, kind="stable")
    w = weights[order]
    total = w.sum()
    if total <= 0.0:
        return np.zeros(conf.shape, dtype=np.int64)
    # Each item goes to the bin holding the midpoint of its weight: equal counts when unweighted.
    mid = np.cumsum(w) - 0.5 * w
    sorted_bins = np.minimum((mid / total * n_bins).astype(np.int64), n_bins - 1)
    bins = np.empty_like(sorted_bins)
    bins[order] = sorted_bins
    return bins


def reliability_bins(
    conf: np.ndarray, labels: np.ndarray, n_bins: int = 10, weights: np.ndarray | None = None
) -> ReliabilityBins:
    """Per equal-mass bin: mean confidence, observed frequency, count, weight and confidence range.

    Args:
        conf: (n,) float confidences in [0, 1].
        labels: (n,) bool or 0/1.
        n_bins: number of equal-mass bins (fewer come back when n < n_bins or bins are empty).
        weights: optional (n,) non-negative weights; bins then hold equal weight.
    """
    c, y, w = validate_binary(conf, labels, weights)
    bins = equal_mass_bins(c, w, n_bins)
    count = np.bincount(bins, minlength=n_bins)
    wsum = np.bincount(bins, weights=w, minlength=n_bins)
    csum = np.bincount(bins, weights=w * c, minlength=n_bins)
    ysum = np.bincount(bins, weights=w * y, minlength=n_bins)
    low = np.full(n_bins, np.inf)
    high = np.full(n_bins, -np.inf)
    np.minimum.at(low, bins, c)
    np.maximum.at(high, bins, c)
    keep = wsum > 0
    return ReliabilityBins(
        mean_confidence=csum[keep] / wsum[keep],
        frequency=ysum[keep] / wsum[keep],
        count=count[keep].astype(np.int64),
        weight=wsum[keep],
        low=low[keep],
        high=high[keep],
    )


def expected_calibration_error(
    conf: np.ndarray, labels: np.ndarray, n_bins: int = 10, weights: np.ndarray | None = None
) -> float:
    """ECE = sum over equal-mass bins of (bin weight / total) * |mean confidence - observed frequency|.

    Args: as in ``reliability_bins``. Returns a value in [0, 1].
    """
    rb = reliability_bins(conf, labels, n_bins, weights)
    total = _total(rb.weight)
    return float(np.sum(rb.weight / total * np.abs(rb.mean_confidence - rb.frequency)))
