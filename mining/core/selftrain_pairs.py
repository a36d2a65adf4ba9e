"""The pairs a self-training round trains on: mutual best, past the pre-filters, and confident by the false pairs'
bell (rules 1-3 of ``selftrain``'s docstring)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mining.core.candidates import Strategy, mine_candidates
from mining.core.default_threshold import MIN_CANDIDATES, null_posteriors
from mining.core.defaults import DEFAULT_K
from mining.core.knn import knn_both_ways
from mining.core.margin import Margin
from mining.core.types import Direction

KeepFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
_BOTH = int(Direction.FORWARD | Direction.BACKWARD)


@dataclass(frozen=True)
class ConfidentPairs:
    """The pairs one round trains on, and what the mining that chose them looked like.

    Attributes:
        src_idx, tgt_idx: (m,) int64 rows of the confident pairs, best first.
        score: (m,) float32 their margin scores.
        n_mutual: mutual-best candidates that passed the pre-filters.
        estimated_true: expected true pairs among them (NaN when the mixture could not be fitted).
        estimated_precision: expected precision of the confident pairs (NaN likewise).
        rule: "precision" or "fallback_share".
    """

    src_idx: np.ndarray
    tgt_idx: np.ndarray
    score: np.ndarray
    n_mutual: int
    estimated_true: float
    estimated_precision: float
    rule: str


def confident_pairs(
    src: np.ndarray,
    tgt: np.ndarray,
    *,
    k: int = DEFAULT_K,
    margin: Margin = Margin.RATIO,
    min_precision: float = 0.95,
    fallback_share: float = 0.5,
    keep: KeepFn | None = None,
) -> ConfidentPairs:
    """Mine (src, tgt) and return the pairs sure enough to train on (module docstring, rules 1-3).

    Args:
        src: (n_src, d) float32 unit rows of the current encoder; tgt: (n_tgt, d) likewise.
        keep: ``keep(src_idx, tgt_idx) -> (m,) bool``, the pre-filters (None keeps every pair).
    """
    knn = knn_both_ways(src, tgt, min(k, len(src), len(tgt)))
    cands = mine_candidates(knn, margin=margin, k=k, strategy=Strategy.INTERSECTION)
    if keep is not None and len(cands):
        mask = np.asarray(keep(cands.src_idx, cands.tgt_idx), dtype=bool)
        if mask.shape != (len(cands),):
            raise ValueError(f"keep returned shape {mask.shape}, expected ({len(cands)},)")
        cands = cands.take(mask)
    cands = cands.take(np.isfinite(cands.score) & (cands.direction == _BOTH))
    m, est_true, est_precision, rule = confident_count(
        cands.score, min_precision=min_precision, fallback_share=fallback_share
    )
    return ConfidentPairs(
        src_idx=cands.src_idx[:m],
        tgt_idx=cands.tgt_idx[:m],
        score=cands.score[:m],
        n_mutual=len(cands),
        estimated_true=est_true,
        estimated_precision=est_precision,
        rule=rule,
    )


def confident_count(
    score: np.ndarray, *, min_precision: float = 0.95, fallback_share: float = 0.5
) -> tuple[int, float, float, str]:
    """How many of the mutual-best pairs past the pre-filters, best first, are confident (rules 2-3).

    Args:
        score: (n,) their finite margin scores, sorted descending.

    Returns:
        (m, expected true pairs among the n, expected precision of the m, rule): NaN estimates under the
        "fallback_share" rule (fewer than MIN_CANDIDATES pairs).
    """
    n = len(score)
    if n >= MIN_CANDIDATES:
        post = null_posteriors(score)  # sorted by score: post is non-increasing
        precision = np.cumsum(post) / np.arange(1, n + 1)
        ok = np.flatnonzero(precision >= min_precision)
        m = int(ok[-1]) + 1 if ok.size else 0
        return m, float(post.sum()), float(precision[m - 1]) if m else float("nan"), "precision"
    return int(np.ceil(fallback_share * n)), float("nan"), float("nan"), "fallback_share"


def agreement(a: ConfidentPairs, b: ConfidentPairs, n_tgt: int) -> float:
    """Jaccard overlap of two rounds' confident pair sets."""
    ka = set((a.src_idx * n_tgt + a.tgt_idx).tolist())
    kb = set((b.src_idx * n_tgt + b.tgt_idx).tolist())
    return len(ka & kb) / max(len(ka | kb), 1)
