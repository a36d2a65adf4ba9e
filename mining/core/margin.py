"""Margin-based scoring of candidate pairs (Artetxe & Schwenk 2019).

score(x, y) = margin(cos(x, y), mean_k(x) / 2 + mean_k(y) / 2), where mean_k(x) is the mean
similarity of x's k nearest neighbours in the other language (the paper's sum / 2k).
"""

from __future__ import annotations

import numpy as np

from mining.core.enums import Margin


def neighbourhood_means(sims: np.ndarray, k: int) -> np.ndarray:
    """Mean of each row's k largest similarities.

    Args:
        sims: (n, K) float similarities sorted descending per row, K >= 1; ``-inf`` or NaN
            entries (neighbours not found) are left out of the mean.
        k: how many leading columns to average; clipped to K.

    Returns:
        (n,) float32 means; NaN for a row with no valid neighbour.
    """
    if sims.ndim != 2:
        raise ValueError(f"sims must be 2-d, got shape {sims.shape}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    head = sims[:, : min(k, sims.shape[1])]
    valid = np.isfinite(head)
    if valid.all():
        return head.mean(axis=1, dtype=np.float64).astype(np.float32)
    total = np.where(valid, head, 0.0).sum(axis=1, dtype=np.float64)
    count = valid.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = total / count
    return means.astype(np.float32)


def margin_score(
    cos: np.ndarray,
    fwd_mean: np.ndarray,
    bwd_mean: np.ndarray,
    margin: Margin = Margin.RATIO,
) -> np.ndarray:
    """Margin score of pairs from their cosine and both neighbourhood means.

    Args:
        cos: (...) float cosine of each pair.
        fwd_mean: (...) float mean kNN similarity of each pair's source (broadcastable to cos).
        bwd_mean: (...) float mean kNN similarity of each pair's target (broadcastable to cos).
        margin: which margin function to apply.

    Returns:
        float32 array of the broadcast shape.
    """
    cos = np.asarray(cos, dtype=np.float32)
    if margin is Margin.ABSOLUTE:
        return np.broadcast_to(cos, np.broadcast_shapes(cos.shape, np.shape(fwd_mean), np.shape(bwd_mean))).copy()
    denom = np.asarray(fwd_mean, dtype=np.float32) / 2 + np.asarray(bwd_mean, dtype=np.float32) / 2
    if margin is Margin.DISTANCE:
        return (cos - denom).astype(np.float32)
    if margin is Margin.RATIO:
        with np.errstate(divide="ignore", invalid="ignore"):
            return (cos / denom).astype(np.float32)
    raise ValueError(f"unknown margin {margin!r}")
