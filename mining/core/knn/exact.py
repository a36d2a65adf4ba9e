"""Exact kNN by inner product over L2-normalised float32 rows.

* ``knn_exact``: one direction with faiss ``IndexFlatIP`` (BLAS block size tuned).
* ``knn_both_ways``: both directions from the SAME similarity tiles: one GEMM per tile, then one
  compiled pass keeps the running top-k of the tile's rows and of its columns, so exact mining costs about one
  matrix product instead of two flat searches.

Both return each neighbour's similarity re-computed with float64 accumulation (``exact_sims``): a GEMM's fp32
value depends on how the BLAS blocks the product (tile shapes, faiss' flat search or tiles), so without it a
backward shard that searched by itself scored its pairs differently, in the 7th digit, from one merged from the
shared tile pass.
"""

from __future__ import annotations

import logging

import faiss
import numpy as np
import torch

from mining.core.knn.common import (
    BLAS_DATABASE_BS,
    Progress,
    blas_block,
    check_pair,
    empty_result,
    missing_to_neg_inf,
)
from mining.core.knn.rescore import candidate_dots
from mining.core.knn.tiles import tile_pass
from mining.core.knn.topk import push_f32_tile
from mining.core.types import KnnResult

logger = logging.getLogger(__name__)


def knn_exact(
    queries: np.ndarray, base: np.ndarray, k: int, *, batch_size: int = 16384, progress: Progress | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Exact k nearest neighbours of each query row among the base rows, by inner product.

    Args:
        queries: (nq, d) float32, rows L2-normalised.
        base: (nb, d) float32, rows L2-normalised.
        k: neighbours per query; clipped to nb.
        batch_size: queries per faiss call (bounds the temporary memory and paces ``progress``).
        progress: optional ``progress(done, total)`` callback, in queries.

    Returns:
        sims (nq, k') float32 descending and ids (nq, k') int64, with k' = min(k, nb).
    """
    q, b = check_pair(queries, base, k)
    k = min(k, b.shape[0])
    if k == 0 or q.shape[0] == 0:
        return empty_result(q.shape[0], k)
    index = faiss.IndexFlatIP(b.shape[1])
    index.add(b)
    sims, ids = empty_result(q.shape[0], k)
    with blas_block(BLAS_DATABASE_BS):
        for i0 in range(0, q.shape[0], batch_size):
            i1 = min(i0 + batch_size, q.shape[0])
            sims[i0:i1], ids[i0:i1] = index.search(q[i0:i1], k)
            if progress is not None:
                progress(i1, q.shape[0])
    return exact_sims(q, b, missing_to_neg_inf(sims, ids), ids)


def exact_sims(q: np.ndarray, b: np.ndarray, sims: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each listed neighbour's similarity accumulated in float64 (as float32), re-sorted; missing ones stay last.

    Args:
        q: (nq, d) float32 or float16 rows; b: (nb, d) likewise.
        sims: (nq, k) float32 similarities from an fp32 GEMM (-inf where missing).
        ids: (nq, k) int64 rows of b (-1 where missing).

    Returns:
        sims (nq, k) float32 descending, equal values in id order, and their ids.
    """
    if ids.size == 0:
        return sims, ids
    missing = ids < 0
    exact = candidate_dots(q, b, np.where(missing, 0, ids)).astype(np.float32)
    exact[missing] = -np.inf
    order = np.lexsort((np.where(missing, np.iinfo(np.int64).max, ids), -exact), axis=1)
    return np.take_along_axis(exact, order, 1), np.take_along_axis(ids, order, 1)


def knn_both_ways(
    src: np.ndarray,
    tgt: np.ndarray,
    k: int,
    *,
    tile: tuple[int, int] = (512, 2048),
    workers: int | None = None,
    progress: Progress | None = None,
) -> KnnResult:
    """Exact top-k in both directions from one pass of similarity tiles.

    Each (ts, tt) tile S = src_i @ tgt_j.T is computed once (torch GEMM); one compiled pass over it
    (``topk.push_f32_tile``) offers its rows to the source heaps and its columns to the target heaps,
    pushing only the values that beat a heap's current k-th, so the top-k bookkeeping costs little
    next to the GEMM.

    With ``workers`` > 1, that many Python threads take interleaved source blocks, each doing
    its GEMMs and bookkeeping on one core (torch is set to 1 intra-op thread meanwhile, a
    process-wide setting restored afterwards), so the bookkeeping runs in parallel too instead
    of serialising between multi-threaded GEMMs. Each worker keeps its own target heaps; they
    are merged at the end. ``progress`` is always called from the calling thread.
    Memory: the heaps ((n_src + workers * n_tgt) * (k * 12 + 6) bytes) plus one tile per worker.

    Args:
        src: (n_src, d) float32, rows L2-normalised.
        tgt: (n_tgt, d) float32, rows L2-normalised.
        k: neighbours per row; clipped to the other side's size.
        tile: (source rows, target rows) per tile; any positive sizes work.
        workers: parallel workers; default ``torch.get_num_threads()``.
        progress: optional ``progress(done, total)`` callback, in source rows.

    Returns:
        KnnResult with fwd (n_src, min(k, n_tgt)) and bwd (n_tgt, min(k, n_src)) arrays.
    """
    s, t = check_pair(src, tgt, k)
    ts, tt = (int(v) for v in tile)
    if ts < 1 or tt < 1:
        raise ValueError(f"tile sizes must be positive, got {tile}")
    n_s, n_t = s.shape[0], t.shape[0]
    if n_s == 0 or n_t == 0:
        (fs, fi), (bs, bi) = empty_result(n_s, min(k, n_t)), empty_result(n_t, min(k, n_s))
        return KnnResult(fwd_sims=fs, fwd_ids=fi, bwd_sims=bs, bwd_ids=bi)
    (f_sims, f_ids), (b_sims, b_ids) = tile_pass(
        torch.from_numpy(s),
        torch.from_numpy(t),
        min(k, n_t),
        min(k, n_s),
        (ts, tt),
        workers,
        progress,
        out_dtype=torch.float32,
        product=lambda a, b, out: torch.mm(a, b.T, out=out),
        push=lambda tile_t, i0, j0, rows, cols: push_f32_tile(tile_t.numpy(), i0, j0, rows, cols),
    )
    fwd_sims, fwd_ids = exact_sims(s, t, f_sims, f_ids)
    bwd_sims, bwd_ids = exact_sims(t, s, b_sims, b_ids)
    return KnnResult(fwd_sims=fwd_sims, fwd_ids=fwd_ids, bwd_sims=bwd_sims, bwd_ids=bwd_ids)
