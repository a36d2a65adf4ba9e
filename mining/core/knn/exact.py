"""Exact kNN by inner product over L2-normalised float32 rows.

* ``knn_exact``: one direction with faiss ``IndexFlatIP`` (BLAS block size tuned).
* ``knn_both_ways``: both directions from the SAME similarity tiles: one GEMM per tile, then faiss
  heaps keep the running top-k of the tile's rows and of its columns, so exact mining costs about one
  matrix product instead of two flat searches.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import queue
from collections.abc import Callable

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
    return missing_to_neg_inf(sims, ids), ids


class _Heaps:
    """Running top-k (largest) of ``n`` rows, stored as faiss min-heaps over numpy arrays."""

    def __init__(self, n: int, k: int) -> None:
        self.vals = np.empty((n, k), dtype=np.float32)
        self.ids = np.empty((n, k), dtype=np.int64)
        self._ha = self._wrap(self.vals, self.ids)
        self._ha.heapify()

    @staticmethod
    def _wrap(vals: np.ndarray, ids: np.ndarray) -> faiss.float_minheap_array_t:
        ha = faiss.float_minheap_array_t()
        ha.nh, ha.k = vals.shape
        ha.val = faiss.swig_ptr(vals)
        ha.ids = faiss.swig_ptr(ids)
        return ha

    def kth(self, i0: int, i1: int) -> np.ndarray:
        """(i1 - i0,) the current k-th best value of rows i0:i1 (the heap tops)."""
        return self.vals[i0:i1, 0]

    def add_block(self, block: np.ndarray, i0: int, j0: int) -> None:
        """Offer block[r, c] (C-contiguous float32) as value of id j0 + c to row i0 + r."""
        self._ha.addn(block.shape[1], faiss.swig_ptr(block), j0, i0, block.shape[0])

    def add_subset(self, rows: np.ndarray, block: np.ndarray, ids: np.ndarray) -> None:
        """Offer block[r, c] (C-contiguous float32) as value of id ids[c] to row rows[r].

        rows: (m,) int64 distinct row numbers; ids: (block.shape[1],) int64 contiguous.
        """
        self._ha.addn_query_subset_with_ids(
            rows.shape[0], faiss.swig_ptr(rows), block.shape[1], faiss.swig_ptr(block), faiss.swig_ptr(ids), 0
        )

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """Sort every heap (descending) and return (vals, ids)."""
        self._ha.reorder()
        return missing_to_neg_inf(self.vals, self.ids), self.ids


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

    Each (ts, tt) tile S = src_i @ tgt_j.T is computed once (torch GEMM); its rows go into the
    source heaps and its columns into the target heaps (faiss ``addn``). Rows and columns whose
    tile maximum cannot enter their heap are skipped before any gather, so once the heaps have
    seen a few tiles the top-k bookkeeping costs little next to the GEMM.

    With ``workers`` > 1, that many Python threads take interleaved source blocks, each doing
    its GEMMs and bookkeeping on one core (torch is set to 1 intra-op thread meanwhile, a
    process-wide setting restored afterwards), so the bookkeeping runs in parallel too instead
    of serialising between multi-threaded GEMMs. Each worker keeps its own target heaps; they
    are merged at the end. ``progress`` is always called from the calling thread.
    Memory: the heaps ((n_src + workers * n_tgt) * k * 12 bytes) plus one tile per worker.

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
    n_blocks = -(-n_s // ts)
    workers = max(1, min(int(workers or torch.get_num_threads()), n_blocks))
    fwd = _Heaps(n_s, min(k, n_t))
    bwds = [_Heaps(n_t, min(k, n_s)) for _ in range(workers)]
    s_t, t_t = torch.from_numpy(s), torch.from_numpy(t)
    src_ids, tgt_ids = np.arange(n_s, dtype=np.int64), np.arange(n_t, dtype=np.int64)

    def run(worker: int, report: Callable[[int], None]) -> None:
        if workers > 1:
            faiss.omp_set_num_threads(1)  # OpenMP ICVs are per thread: this worker only
        bwd = bwds[worker]
        buf = torch.empty(min(ts, n_s) * min(tt, n_t), dtype=torch.float32)
        for block in range(worker, n_blocks, workers):
            i0, i1 = block * ts, min(block * ts + ts, n_s)
            for j0 in range(0, n_t, tt):
                j1 = min(j0 + tt, n_t)
                tile_t = buf[: (i1 - i0) * (j1 - j0)].view(i1 - i0, j1 - j0)
                torch.mm(s_t[i0:i1], t_t[j0:j1].T, out=tile_t)
                _add_rows(fwd, tile_t, i0, tgt_ids[j0:j1])
                _add_rows(bwd, tile_t.T, j0, src_ids[i0:i1])
            report(i1 - i0)

    _run_workers(run, workers, n_s, progress)
    fwd_sims, fwd_ids = fwd.result()
    bwd_sims, bwd_ids = _merge_heaps([h.result() for h in bwds], min(k, n_s))
    return KnnResult(fwd_sims=fwd_sims, fwd_ids=fwd_ids, bwd_sims=bwd_sims, bwd_ids=bwd_ids)


def _run_workers(
    run: Callable[[int, Callable[[int], None]], None], workers: int, total: int, progress: Progress | None
) -> None:
    """Run ``run(worker, report)`` on ``workers`` threads; relay reported counts to ``progress`` here."""
    done = 0

    def relay(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, total)

    if workers == 1:
        run(0, relay)
        return
    reports: queue.Queue[int] = queue.Queue()
    old_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(run, w, reports.put) for w in range(workers)]
            while not all(f.done() for f in futures) or not reports.empty():
                with contextlib.suppress(queue.Empty):
                    relay(reports.get(timeout=0.05))
            for f in futures:
                f.result()  # re-raise a worker's exception here
    finally:
        torch.set_num_threads(old_threads)


def _merge_heaps(parts: list[tuple[np.ndarray, np.ndarray]], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Merge per-worker (n, k) descending top-k lists (disjoint ids) into one (n, k) top-k."""
    if len(parts) == 1:
        return parts[0]
    vals = np.concatenate([p[0] for p in parts], axis=1)
    ids = np.concatenate([p[1] for p in parts], axis=1)
    order = np.argsort(-vals, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(vals, order, 1), np.take_along_axis(ids, order, 1)


def _add_rows(heaps: _Heaps, tile: torch.Tensor, i0: int, ids: np.ndarray) -> None:
    """Offer row r of a (rows, cols) tile (or a transposed view) to heap i0 + r, as ids[c].

    Rows whose maximum cannot beat their heap's k-th value are skipped: once the heaps have
    seen a few tiles, most rows are, so the top-k costs one max pass plus a small gather.
    """
    i1 = i0 + tile.shape[0]
    row_max = tile.amax(dim=1).numpy()
    hot = np.flatnonzero(row_max > heaps.kth(i0, i1))
    if hot.size == 0:
        return
    if hot.size == tile.shape[0]:
        heaps.add_block(tile.contiguous().numpy(), i0, int(ids[0]))
        return
    # Gathering along the tile's contiguous axis, then transposing the small result, is 2-3x
    # faster than gathering strided rows of a transposed view.
    rows = torch.from_numpy(hot)
    if tile.is_contiguous():
        block = tile.index_select(0, rows).numpy()
    else:
        block = tile.T.index_select(1, rows).T.contiguous().numpy()
    heaps.add_subset(hot + i0, block, ids)
