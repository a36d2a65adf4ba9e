"""kNN over sharded sides: row shards, exact and IVF search of one index shard, and the merge of the shards' top-k.

A side too large for one process is cut into row shards. Each query shard searches every index shard of the
other side; the per-shard top-k lists (ids already global) are merged into one top-k. For exact search the merge
gives the same neighbours as one index over the whole side (ties broken by the smaller id); for IVF every shard is
filled from one trained quantizer, so a query visits the same lists in every shard as in one index.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import faiss
import numpy as np

from mining.core.hw import Compute
from mining.core.knn.common import check_matrix, empty_result, missing_to_neg_inf
from mining.core.knn.ivf import build_ivf
from mining.core.knn.route import exact_both_ways, exact_one_way

__all__ = [
    "IVF_TRAIN_PER_LIST",
    "ivf_assign",
    "ivf_fill_shard",
    "ivf_nlist",
    "ivf_search_shard",
    "ivf_train",
    "merge_topk",
    "row_shards",
    "search_exact_shard",
    "search_exact_shard_both",
]

# k-means points per inverted list when training the shared quantizer (as the one-index IVF path uses).
IVF_TRAIN_PER_LIST = 64


def row_shards(n: int, rows: int) -> list[tuple[int, int]]:
    """[(start, stop), ...] cutting n rows into consecutive shards of at most `rows` rows (none when n == 0)."""
    if n < 0 or rows < 1:
        raise ValueError(f"need n >= 0 and rows >= 1, got n={n}, rows={rows}")
    return [(start, min(n, start + rows)) for start in range(0, n, rows)]


def merge_topk(parts: Sequence[tuple[np.ndarray, np.ndarray]], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Merge per-shard top-k lists of the same queries into one top-k.

    Args:
        parts: [(sims (n, k_i) float32, ids (n, k_i) int64), ...], ids global; id -1 marks a missing neighbour.
        k: neighbours to keep.

    Returns:
        sims (n, k) float32 descending and ids (n, k) int64; equal similarities in the smaller id first, missing
        neighbours (-inf, -1) last.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if not parts:
        raise ValueError("nothing to merge")
    n = parts[0][0].shape[0]
    for sims, ids in parts:
        if sims.shape != ids.shape or sims.ndim != 2 or sims.shape[0] != n:
            raise ValueError(f"every part must be (n, k_i) sims and ids of n = {n} rows, got {sims.shape}/{ids.shape}")
    sims = np.concatenate([np.asarray(s, dtype=np.float32) for s, _ in parts], axis=1)
    ids = np.concatenate([np.asarray(i, dtype=np.int64) for _, i in parts], axis=1)
    sims = np.where(ids >= 0, sims, -np.inf).astype(np.float32)
    # sort each row by (-sim, missing last, id): lexsort's last key is the primary one
    tie = np.where(ids >= 0, ids, np.iinfo(np.int64).max)
    order = np.lexsort((tie, -sims), axis=1)[:, :k]
    out_sims = np.take_along_axis(sims, order, axis=1)
    out_ids = np.take_along_axis(ids, order, axis=1)
    if out_sims.shape[1] < k:
        pad_s, pad_i = empty_result(n, k - out_sims.shape[1])
        out_sims, out_ids = np.hstack([out_sims, pad_s]), np.hstack([out_ids, pad_i])
    return np.ascontiguousarray(out_sims), np.ascontiguousarray(out_ids)


def search_exact_shard(
    queries: np.ndarray, base: np.ndarray, k: int, offset: int, *, compute: Compute | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k of each query among one index shard whose first row is global row `offset`.

    With ``compute`` BF16 or INT8 (the default where the CPU has bf16 or int8 units) the similarities come from
    low-precision tiles with an exact re-score that proves the fp32 top-k (``knn_exact_lowp``); with FP32, from
    faiss' flat search. All give the same neighbours and similarities (to 1e-6).

    Args:
        queries: (nq, d) float32 or float16 rows L2-normalised; base: (nb, d) likewise.
        compute: the arithmetic of the similarity tiles; default ``hw.knn_path()`` (bf16 on a visible GPU).

    Returns:
        sims (nq, min(k, nb)) float32 and global ids (nq, min(k, nb)) int64 (-1 where missing).
    """
    sims, ids = exact_one_way(queries, base, k, compute=compute)
    return sims, np.where(ids >= 0, ids + int(offset), -1)


def search_exact_shard_both(
    queries: np.ndarray, base: np.ndarray, k: int, q_offset: int, b_offset: int, *, compute: Compute | None = None
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Exact top-k both ways between a query shard and an index shard, from ONE pass of similarity tiles.

    The query rows' top-k among the index shard (as ``search_exact_shard``) and the index rows' top-k among the
    query shard, which a run merges over the query shards into the other direction's lists instead of computing
    every tile a second time. BF16 or INT8 (default where the CPU has such units): ``knn_both_ways_lowp``; FP32:
    ``knn_both_ways`` (fp32 tiles); the same neighbours and similarities (to 1e-6).

    Args:
        queries: (nq, d) float32 or float16 rows L2-normalised, global rows q_offset..; base: (nb, d) likewise,
            global rows b_offset...

    Returns:
        ((sims (nq, min(k, nb)), global base ids), (sims (nb, min(k, nq)), global query ids)); float32 / int64.
    """
    res = exact_both_ways(queries, base, k, compute=compute)
    fwd_ids = np.where(res.fwd_ids >= 0, res.fwd_ids + int(b_offset), -1)
    bwd_ids = np.where(res.bwd_ids >= 0, res.bwd_ids + int(q_offset), -1)
    return (res.fwd_sims, fwd_ids), (res.bwd_sims, bwd_ids)


def ivf_nlist(n: int) -> int:
    """Inverted lists for an IVF over min-side size n: about 4 sqrt(n), a power of two, >= 39 points per list."""
    n = max(1, int(n))
    nlist = 2 ** max(0, round(math.log2(max(1.0, 4 * math.sqrt(n)))))
    return max(1, min(nlist, n // 39 or 1))


def ivf_train(sample: np.ndarray, nlist: int, *, seed: int = 0) -> faiss.IndexIVFFlat:
    """A trained, EMPTY inner-product IVF-Flat index (the quantizer every index shard shares).

    Args:
        sample: (m, d) float32 rows L2-normalised, a seeded sample of both sides.
        nlist: inverted lists; lowered to m // 39 when the sample is small.
    """
    x = check_matrix(sample, "sample")
    return build_ivf(x, nlist=max(1, min(int(nlist), x.shape[0] // 39 or 1)), seed=seed)


def ivf_fill_shard(trained: faiss.IndexIVFFlat, base: np.ndarray, offset: int) -> faiss.IndexIVFFlat:
    """A copy of the trained, empty `trained` index holding `base` (nb, d) under global ids offset..offset+nb-1."""
    if trained.ntotal:
        raise ValueError("the trained index must be empty")
    b = check_matrix(base, "base")
    index = faiss.clone_index(trained)
    index.add_with_ids(b, np.arange(offset, offset + b.shape[0], dtype=np.int64))
    return index


def ivf_assign(index: faiss.IndexIVFFlat, queries: np.ndarray, nprobe: int) -> tuple[np.ndarray, np.ndarray]:
    """Each query's `nprobe` nearest inverted lists under the index's quantizer: (distances (nq, p) float32, lists
    (nq, p) int64). Every index shard shares the quantizer, so a query shard is assigned once for all of them."""
    q = check_matrix(queries, "queries")
    if q.shape[1] != index.d:
        raise ValueError(f"dimension mismatch: {q.shape[1]} vs {index.d}")
    dis, lists = index.quantizer.search(q, max(1, min(int(nprobe), index.nlist)))
    return dis, lists


def ivf_search_shard(
    index: faiss.IndexIVFFlat,
    queries: np.ndarray,
    k: int,
    nprobe: int,
    *,
    assign: tuple[np.ndarray, np.ndarray] | None = None,
    batch_size: int = 16384,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of each query (nq, d) among one filled IVF index shard, visiting `nprobe` lists.

    `assign`: the queries' lists from ``ivf_assign`` (same quantizer), so they are not assigned again per shard.

    Returns:
        sims (nq, k) float32 (-inf where missing) and global ids (nq, k) int64 (-1 there).
    """
    q = check_matrix(queries, "queries")
    if q.shape[1] != index.d:
        raise ValueError(f"dimension mismatch: {q.shape[1]} vs {index.d}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    index.nprobe = max(1, min(int(nprobe), index.nlist))
    if assign is None:
        assign = ivf_assign(index, q, index.nprobe)
    dis, lists = assign
    sims, ids = empty_result(q.shape[0], k)
    for i0 in range(0, q.shape[0], batch_size):
        i1 = min(i0 + batch_size, q.shape[0])
        sims[i0:i1], ids[i0:i1] = index.search_preassigned(
            q[i0:i1],
            k,
            np.ascontiguousarray(lists[i0:i1, : index.nprobe]),
            np.ascontiguousarray(dis[i0:i1, : index.nprobe]),
        )
    return missing_to_neg_inf(sims, ids), ids
