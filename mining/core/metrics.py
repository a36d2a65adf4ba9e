"""Retrieval and mining metrics: P@N, and precision / recall / F1 against gold pairs (BUCC-style)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PRF:
    """Precision, recall and F1 of predicted pairs against gold pairs (duplicates counted once)."""

    precision: float
    recall: float
    f1: float
    n_pred: int
    n_gold: int
    n_correct: int


def precision_at_n(ids: np.ndarray, gold: np.ndarray, n: int = 1) -> float:
    """Fraction of queries whose gold id is among their first ``n`` retrieved ids.

    Args:
        ids: (nq, K) int retrieved ids per query, best first (-1 = empty slot).
        gold: (nq,) int the true id of each query.
        n: cut-off, 1 <= n (clipped to K).

    Returns:
        P@n in [0, 1] (0.0 for no queries).
    """
    ids = np.asarray(ids)
    gold = np.asarray(gold)
    if ids.ndim != 2 or gold.shape != (ids.shape[0],):
        raise ValueError(f"ids must be (nq, K) and gold (nq,), got {ids.shape} and {gold.shape}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if ids.shape[0] == 0:
        return 0.0
    return float(np.mean(np.any(ids[:, :n] == gold[:, None], axis=1)))


def precision_at(ids: np.ndarray, gold: np.ndarray, ns: Iterable[int] = (1, 3, 10)) -> dict[int, float]:
    """P@n for several cut-offs at once: ``{n: P@n}``."""
    return {n: precision_at_n(ids, gold, n) for n in ns}


def _pairs(pairs: np.ndarray, name: str) -> np.ndarray:
    p = np.asarray(pairs, dtype=np.int64)
    if p.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if p.ndim != 2 or p.shape[1] != 2:
        raise ValueError(f"{name} must be (m, 2) integer pairs, got shape {p.shape}")
    return p


def _keys(p: np.ndarray, base: np.int64) -> np.ndarray:
    return np.unique(p[:, 0] * base + p[:, 1])


def prf(pred_pairs: np.ndarray, gold_pairs: np.ndarray) -> PRF:
    """Precision, recall and F1 of predicted (src, tgt) pairs against gold pairs.

    Args:
        pred_pairs: (m, 2) int non-negative (source id, target id) predictions.
        gold_pairs: (g, 2) int non-negative gold alignments.

    Returns:
        PRF (each metric 0.0 where undefined).
    """
    pred, gold = _pairs(pred_pairs, "pred_pairs"), _pairs(gold_pairs, "gold_pairs")
    if (pred < 0).any() or (gold < 0).any():
        raise ValueError("pair ids must be non-negative")
    base = np.int64(max(int(pred[:, 1].max(initial=0)), int(gold[:, 1].max(initial=0))) + 1)
    top = max(int(pred[:, 0].max(initial=0)), int(gold[:, 0].max(initial=0)))
    if top and base > np.iinfo(np.int64).max // (top + 1):
        raise ValueError("ids too large to combine into int64 keys")
    pk, gk = _keys(pred, base), _keys(gold, base)
    correct = int(np.intersect1d(pk, gk, assume_unique=True).size)
    p = correct / pk.size if pk.size else 0.0
    r = correct / gk.size if gk.size else 0.0
    f = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return PRF(precision=p, recall=r, f1=f, n_pred=int(pk.size), n_gold=int(gk.size), n_correct=correct)
