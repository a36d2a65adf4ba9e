"""What both exact both-ways searches share around their tiles: worker threads over interleaved source blocks and
the merge of per-worker top-k lists (the heaps themselves are ``topk.TopK``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import queue
from collections.abc import Callable

import numpy as np
import torch

from mining.core.knn.common import Progress


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
