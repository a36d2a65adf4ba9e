"""The one pass of similarity tiles that the exact searches on the CPU share (fp32 in ``exact``, bf16 and int8 in
``lowp``): worker threads over interleaved source blocks, each tile's product and its compiled top-k push
(``topk``), and the merge of the per-worker column lists. The searches differ only in the product and the push.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import queue
from collections.abc import Callable

import numpy as np
import torch

from mining.core.knn.common import Progress, empty_result
from mining.core.knn.topk import TopK

# out = a @ b.T for a tile (a: source rows, b: target rows, out: a preallocated (rows, cols) tile).
Product = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], None]
# Offer a tile's values to its rows' heaps and (if given) its columns' heaps, the tile's first row and column given.
Push = Callable[[torch.Tensor, int, int, TopK, "TopK | None"], None]


def tile_pass(
    s: torch.Tensor,
    t: torch.Tensor,
    width_f: int,
    width_b: int,
    tile: tuple[int, int],
    workers: int | None,
    progress: Progress | None,
    *,
    out_dtype: torch.dtype,
    product: Product,
    push: Push,
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Top-``width_f`` tile values and ids of every row of s and top-``width_b`` of every row of t (0: none, an
    empty backward result), descending, from ONE pass of (ts, tt) tiles.

    With ``workers`` > 1, that many threads take interleaved source blocks, each doing its products and pushes on
    one core (see ``run_workers``) and keeping its own column lists, merged at the end. Memory: the lists plus one
    ``out_dtype`` tile per worker.
    """
    n_s, n_t = s.shape[0], t.shape[0]
    ts, tt = tile
    n_blocks = -(-n_s // ts)
    workers = max(1, min(int(workers or torch.get_num_threads()), n_blocks))
    fwd = TopK(n_s, width_f)
    bwds = [TopK(n_t, width_b) for _ in range(workers)] if width_b else []

    def run(worker: int, report: Callable[[int], None]) -> None:
        bwd = bwds[worker] if bwds else None
        buf = torch.empty(min(ts, n_s) * min(tt, n_t), dtype=out_dtype)
        for block in range(worker, n_blocks, workers):
            i0, i1 = block * ts, min(block * ts + ts, n_s)
            for j0 in range(0, n_t, tt):
                j1 = min(j0 + tt, n_t)
                tile_t = buf[: (i1 - i0) * (j1 - j0)].view(i1 - i0, j1 - j0)
                product(s[i0:i1], t[j0:j1], tile_t)
                push(tile_t, i0, j0, fwd, bwd)
            report(i1 - i0)

    run_workers(run, workers, n_s, progress)
    if not bwds:
        return fwd.result(), empty_result(n_t, 0)
    return fwd.result(), merge_heaps([h.result() for h in bwds], width_b)


def run_workers(
    run: Callable[[int, Callable[[int], None]], None], workers: int, total: int, progress: Progress | None
) -> None:
    """Run ``run(worker, report)`` on ``workers`` threads; relay reported counts to ``progress`` here.

    With more than one worker torch is set to 1 intra-op thread meanwhile (a process-wide setting,
    restored afterwards), so each worker does its GEMMs and bookkeeping on one core.
    """
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


def merge_heaps(parts: list[tuple[np.ndarray, np.ndarray]], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Merge per-worker (n, k) descending top-k lists (disjoint ids) into one (n, k) top-k."""
    if len(parts) == 1:
        return parts[0]
    vals = np.concatenate([p[0] for p in parts], axis=1)
    ids = np.concatenate([p[1] for p in parts], axis=1)
    order = np.argsort(-vals, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(vals, order, 1), np.take_along_axis(ids, order, 1)
