"""Inter-annotator agreement: Cohen's kappa (two raters) and Fleiss' kappa (a fixed number of raters per item)."""

from __future__ import annotations

import numpy as np


def cohen_kappa(a: np.ndarray, b: np.ndarray) -> float:
    """Cohen's kappa of two raters' categorical labels on the same items; nan when undefined (no items, or chance
    agreement 1)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("two 1-d label arrays of the same length are needed")
    if len(a) == 0:
        return float("nan")
    cats = np.union1d(a, b)
    pa = (a[:, None] == cats).mean(0)
    pb = (b[:, None] == cats).mean(0)
    po = float((a == b).mean())
    pe = float(pa @ pb)
    return float("nan") if pe >= 1.0 else (po - pe) / (1.0 - pe)


def fleiss_kappa(counts: np.ndarray) -> float:
    """Fleiss' kappa from an (items, categories) matrix of how many raters chose each category; every item must have
    the same number of raters (>= 2)."""
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 2 or len(counts) == 0:
        return float("nan")
    n = counts.sum(1)
    if not np.all(n == n[0]) or n[0] < 2:
        raise ValueError("every item needs the same number (>= 2) of ratings")
    r = n[0]
    p_j = counts.sum(0) / counts.sum()
    p_i = ((counts * counts).sum(1) - r) / (r * (r - 1))
    p_bar, p_e = p_i.mean(), float((p_j**2).sum())
    return float("nan") if p_e >= 1.0 else float((p_bar - p_e) / (1.0 - p_e))
