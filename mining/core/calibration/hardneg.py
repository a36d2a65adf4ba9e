"""Training pairs for the encoder from human reviews: GOOD pairs as positives, high-scoring BAD
pairs as hard negatives (near-misses the current model ranks high; Guo et al. 2018, section 2.3)."""

from __future__ import annotations

import numpy as np


def review_training_pairs(labels: np.ndarray, scores: np.ndarray, min_score: float) -> tuple[np.ndarray, np.ndarray]:
    """Split reviewed pairs into positives and hard negatives.

    Args:
        labels: (n,) bool or 0/1 review verdicts, GOOD = 1.
        scores: (n,) float model scores of the same pairs (margin, cosine or confidence).
        min_score: BAD pairs scoring >= this are hard negatives; e.g. ``np.quantile(run_scores, 0.9)``
            or the mining threshold. BAD pairs below it are easy and left out.

    Returns:
        positives: (p,) int64 indices of GOOD pairs; hard_negatives: (h,) int64 indices of BAD pairs
        with score >= min_score, by falling score.
    """
    y = np.asarray(labels)
    s = np.asarray(scores, dtype=np.float64)
    if y.ndim != 1 or s.shape != y.shape:
        raise ValueError(f"labels {y.shape} and scores {s.shape} must be equal-length 1-d arrays")
    if not np.all(np.isin(y, (0, 1))):
        raise ValueError("labels must be 0/1 or bool")
    good = y.astype(bool)
    positives = np.flatnonzero(good).astype(np.int64)
    hard = np.flatnonzero(~good & (s >= min_score))
    hard = hard[np.argsort(-s[hard], kind="stable")].astype(np.int64)
    return positives, hard
