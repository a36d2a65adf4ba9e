"""Out-of-fold predictions for any calibrator, so calibration is never measured on training pairs."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from mining.core.calibration.base import Calibrator, as_scores
from mining.core.calibration.metrics import (
    ReliabilityBins,
    brier_score,
    expected_calibration_error,
    log_loss,
    reliability_bins,
    validate_binary,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CalibrationReport:
    """Metrics of out-of-fold confidences against the human labels.

    Attributes:
        ece: expected calibration error over equal-mass bins.
        brier: Brier score.
        log_loss: clipped log loss.
        reliability: the reliability diagram's bins.
        confidences: (n,) float32 the out-of-fold confidences the metrics were computed on.
        n_labelled: number of labelled pairs.
    """

    ece: float
    brier: float
    log_loss: float
    reliability: ReliabilityBins
    confidences: np.ndarray
    n_labelled: int


def stratified_folds(labels: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """Fold id of each item, each label spread evenly over the k folds in a seeded random order.

    Args:
        labels: (n,) bool or 0/1.
        k: number of folds, >= 2.
        seed: seed of the shuffle.

    Returns:
        (n,) int64 fold ids in [0, k).
    """
    if k < 2:
        raise ValueError(f"k must be >= 2, got {k}")
    y = np.asarray(labels).astype(bool)
    rng = np.random.default_rng(seed)
    # Random order, then a stable sort by label: within each label the order stays random. Dealing
    # the sorted items round-robin gives each fold an equal share (+-1) of each label, and since the
    # positives continue the deal where the negatives stopped, fold sizes also differ by at most one.
    order = rng.permutation(y.size)
    order = order[np.argsort(y[order], kind="stable")]
    folds = np.empty(y.size, dtype=np.int64)
    folds[order] = np.arange(y.size) % k
    return folds


def _take(u: np.ndarray | None, idx: np.ndarray) -> np.ndarray | None:
    return None if u is None else u[idx]


def cross_val_predict(
    make_model: Callable[[], Calibrator],
    u: np.ndarray | None,
    phi: np.ndarray,
    labels: np.ndarray,
    k: int = 5,
    seed: int = 0,
    sample_weight: np.ndarray | None = None,
) -> np.ndarray:
    """Out-of-fold confidences: each item is predicted by a model fitted on the other k - 1 folds.

    Args:
        make_model: returns a fresh unfitted calibrator.
        u: (n, d) float32 source embeddings, or None for score-only calibrators.
        phi: (n,) float pair scores.
        labels: (n,) bool or 0/1.
        k: number of stratified folds (clipped to n).
        seed: seeds the folds; fold f's model is fitted with ``seed + 1 + f``.
        sample_weight: optional (n,) non-negative weights, used for fitting.

    Returns:
        (n,) float32 out-of-fold confidences.
    """
    s, y, w = validate_binary(as_scores(phi), labels, sample_weight, unit_interval=False)
    if u is not None and np.asarray(u).shape[0] != s.size:
        raise ValueError(f"u has {np.asarray(u).shape[0]} rows for {s.size} scores")
    k = min(k, s.size)
    folds = stratified_folds(y, k, seed)
    out = np.empty(s.size, dtype=np.float32)
    for f in range(k):
        test = folds == f
        train = ~test
        model = make_model().fit(_take(u, train), s[train], y[train], sample_weight=w[train], seed=seed + 1 + f)
        out[test] = model.predict(_take(u, test), s[test])
        logger.debug("fold %d/%d: %d train, %d held out", f + 1, k, int(train.sum()), int(test.sum()))
    return out


def calibration_report(
    conf: np.ndarray, labels: np.ndarray, n_bins: int = 10, weights: np.ndarray | None = None
) -> CalibrationReport:
    """ECE, Brier, log loss and reliability bins of (n,) confidences against (n,) labels."""
    c = np.asarray(conf, dtype=np.float32)
    return CalibrationReport(
        ece=expected_calibration_error(c, labels, n_bins, weights),
        brier=brier_score(c, labels, weights),
        log_loss=log_loss(c, labels, weights),
        reliability=reliability_bins(c, labels, n_bins, weights),
        confidences=c,
        n_labelled=int(c.size),
    )


def compare_calibrators(
    makers: Mapping[str, Callable[[], Calibrator]],
    u: np.ndarray | None,
    phi: np.ndarray,
    labels: np.ndarray,
    k: int = 5,
    seed: int = 0,
    sample_weight: np.ndarray | None = None,
    n_bins: int = 10,
) -> dict[str, CalibrationReport]:
    """Cross-validated report of each calibrator on the same folds.

    Args:
        makers: name -> factory of an unfitted calibrator.
        u, phi, labels, k, seed, sample_weight: as in ``cross_val_predict`` (weights also weight the metrics).
        n_bins: equal-mass bins for ECE and the reliability diagram.

    Returns:
        name -> CalibrationReport, in the order of ``makers``.
    """
    return {
        name: calibration_report(
            cross_val_predict(make, u, phi, labels, k=k, seed=seed, sample_weight=sample_weight),
            labels,
            n_bins,
            sample_weight,
        )
        for name, make in makers.items()
    }
