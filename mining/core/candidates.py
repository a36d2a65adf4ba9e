"""Candidate generation from kNN results: forward, backward, intersection and max-score.

Each source's k neighbours and each target's k neighbours are scored with the margin
(``margin.margin_score``); forward keeps each source's best target, backward each target's best
source, intersection the pairs found both ways, and max-score the union sorted by score and kept
greedily one-to-one (Artetxe & Schwenk 2019, section 3.2).
"""

from __future__ import annotations

import logging

import numpy as np

from mining.core.enums import Strategy
from mining.core.margin import Margin, margin_score, neighbourhood_means
from mining.core.types import Candidates, Direction, KnnResult

logger = logging.getLogger(__name__)

# After this many vectorised rounds, the greedy pass finishes the (rare) leftover chain in a loop.
_MAX_VECTOR_ROUNDS = 64


def _best_per_row(
    sims: np.ndarray, ids: np.ndarray, own_mean: np.ndarray, other_mean: np.ndarray, margin: Margin, own_is_src: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Score each row's neighbours and return (row, neighbour, cosine, score) of each row's best.

    Rows whose neighbours are all missing (id -1) or whose score is NaN are dropped.
    """
    valid = ids >= 0
    safe_ids = np.where(valid, ids, 0)
    if own_is_src:
        scores = margin_score(sims, own_mean[:, None], other_mean[safe_ids], margin)
    else:
        scores = margin_score(sims, other_mean[safe_ids], own_mean[:, None], margin)
    scores = np.where(valid & ~np.isnan(scores), scores, -np.inf)
    best = np.argmax(scores, axis=1)
    rows = np.arange(sims.shape[0], dtype=np.int64)
    best_score = scores[rows, best]
    ok = np.isfinite(best_score) | (best_score == np.inf)
    rows = rows[ok]
    best = best[ok]
    return rows, ids[rows, best].astype(np.int64), sims[rows, best].astype(np.float32), best_score[ok]


def greedy_one_to_one(src: np.ndarray, tgt: np.ndarray) -> np.ndarray:
    """Keep pairs greedily in the given priority order when neither side is used yet.

    Equivalent to a loop over the pairs that keeps (s, t) when s and t are both unused. It runs
    in vectorised rounds: a pair that comes first among the live pairs for both its source and
    its target is kept by the loop too; kept pairs then kill the live pairs sharing a side. Each
    round costs O(m log m) and keeps at least one pair; real mining output needs a handful of
    rounds. After ``_MAX_VECTOR_ROUNDS`` rounds the leftover pairs go through the plain loop.

    Args:
        src: (m,) int64 source ids, in priority order (best first).
        tgt: (m,) int64 target ids, same order.

    Returns:
        (m,) bool mask of kept pairs.
    """
    m = src.shape[0]
    keep = np.zeros(m, dtype=bool)
    if m == 0:
        return keep
    _, s_code = np.unique(src, return_inverse=True)
    _, t_code = np.unique(tgt, return_inverse=True)
    used_s = np.zeros(int(s_code.max()) + 1, dtype=bool)
    used_t = np.zeros(int(t_code.max()) + 1, dtype=bool)
    alive = np.arange(m)
    rounds = 0
    while alive.size and rounds < _MAX_VECTOR_ROUNDS:
        s, t = s_code[alive], t_code[alive]
        first_s = np.zeros(alive.size, dtype=bool)
        first_s[np.unique(s, return_index=True)[1]] = True
        first_t = np.zeros(alive.size, dtype=bool)
        first_t[np.unique(t, return_index=True)[1]] = True
        won = first_s & first_t
        keep[alive[won]] = True
        used_s[s[won]] = True
        used_t[t[won]] = True
        alive = alive[~(used_s[s] | used_t[t])]
        rounds += 1
    if alive.size:
        logger.debug("greedy one-to-one: %d pairs left after %d rounds, finishing in a loop", alive.size, rounds)
        for i in alive.tolist():
            if not used_s[s_code[i]] and not used_t[t_code[i]]:
                keep[i] = True
                used_s[s_code[i]] = True
                used_t[t_code[i]] = True
    return keep


def _member(keys: np.ndarray, sorted_pool: np.ndarray) -> np.ndarray:
    """(m,) bool: which keys occur in the ascending int64 array ``sorted_pool`` (binary search)."""
    if sorted_pool.size == 0:
        return np.zeros(keys.shape[0], dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_pool, keys), sorted_pool.size - 1)
    return sorted_pool[pos] == keys


def _rank_in_forward(fwd_ids: np.ndarray, src: np.ndarray, tgt: np.ndarray) -> np.ndarray:
    """0-based position of each tgt in its source's neighbour list, -1 if absent."""
    if src.size == 0:
        return np.zeros(0, dtype=np.int64)
    hit = fwd_ids[src] == tgt[:, None]
    return np.where(hit.any(axis=1), hit.argmax(axis=1), -1).astype(np.int64)


def mine_candidates(
    knn: KnnResult,
    margin: Margin = Margin.RATIO,
    *,
    k: int,
    strategy: Strategy = Strategy.MAX_SCORE,
    threshold: float | None = None,
) -> Candidates:
    """Score kNN neighbours with a margin and select candidate pairs.

    Args:
        knn: neighbours both ways; only the first ``k`` columns of each direction are used.
        margin: margin function (``Margin.RATIO`` is the paper's best).
        k: neighbourhood size for the means and for the candidates; clipped to ``knn.k``.
        strategy: forward, backward, intersection or max-score (one-to-one).
        threshold: if given, keep only pairs whose score is >= threshold.

    Returns:
        Candidates sorted by score descending (ties by source then target id).
    """
    if not isinstance(margin, Margin) or not isinstance(strategy, Strategy):
        raise TypeError("margin and strategy must be Margin and Strategy members")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    k = min(k, knn.k)
    fs, fi = knn.fwd_sims[:, :k], knn.fwd_ids[:, :k]
    bs, bi = knn.bwd_sims[:, :k], knn.bwd_ids[:, :k]
    fwd_mean = neighbourhood_means(np.where(fi >= 0, fs, -np.inf), k)
    bwd_mean = neighbourhood_means(np.where(bi >= 0, bs, -np.inf), k)

    f_src, f_tgt, f_cos, f_score = _best_per_row(fs, fi, fwd_mean, bwd_mean, margin, own_is_src=True)
    b_tgt, b_src, b_cos, b_score = _best_per_row(bs, bi, bwd_mean, fwd_mean, margin, own_is_src=False)

    n_tgt = np.int64(max(knn.n_tgt, 1))
    f_key = f_src * n_tgt + f_tgt
    b_key = b_src * n_tgt + b_tgt

    # f_key is ascending (one best target per source, sources in order); sort b_key likewise.
    b_order = np.argsort(b_key, kind="stable")
    b_src, b_tgt, b_cos, b_score, b_key = (
        b_src[b_order],
        b_tgt[b_order],
        b_cos[b_order],
        b_score[b_order],
        b_key[b_order],
    )
    if strategy is Strategy.FORWARD:
        key, src, tgt, cos, score = f_key, f_src, f_tgt, f_cos, f_score
    elif strategy is Strategy.BACKWARD:
        key, src, tgt, cos, score = b_key, b_src, b_tgt, b_cos, b_score
    else:
        key, first = np.unique(np.concatenate([f_key, b_key]), return_index=True)
        src = np.concatenate([f_src, b_src])[first]
        tgt = np.concatenate([f_tgt, b_tgt])[first]
        cos = np.concatenate([f_cos, b_cos])[first]
        score = np.concatenate([f_score, b_score])[first]

    # Rows are in ascending key (source, target) order here: membership tests search sorted
    # needles (cache-friendly), and a stable sort on -score breaks ties by key.
    in_f = _member(key, f_key)
    in_b = _member(key, b_key)
    order = np.argsort(-score, kind="stable")
    src, tgt, cos, score, in_f, in_b = src[order], tgt[order], cos[order], score[order], in_f[order], in_b[order]
    if strategy is Strategy.INTERSECTION:
        sel = in_f & in_b
    elif strategy is Strategy.MAX_SCORE:
        sel = greedy_one_to_one(src, tgt)
    else:
        sel = np.ones(src.shape[0], dtype=bool)
    if threshold is not None:
        sel &= score >= threshold

    src, tgt = src[sel], tgt[sel]
    direction = (in_f[sel] * int(Direction.FORWARD) + in_b[sel] * int(Direction.BACKWARD)).astype(np.uint8)
    return Candidates(
        src_idx=src,
        tgt_idx=tgt,
        cosine=cos[sel].astype(np.float32),
        score=score[sel].astype(np.float32),
        fwd_mean=fwd_mean[src],
        bwd_mean=bwd_mean[tgt],
        rank=_rank_in_forward(fi, src, tgt),
        direction=direction,
    )
