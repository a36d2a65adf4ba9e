"""Tile bookkeeping benchmark: the compiled top-k pass against the faiss-heap bookkeeping it replaced.

Exact mining is a GEMM in tiles plus the running top-k of every row and column of every tile. This script times
only the second part, on the same tiles, in one process, for both tile kinds:

* bf16 tiles: the faiss path (tile -> fp32, segment maxima, hot segments into faiss heaps; K = k + margin) against
  ``topk.push_bf16_tile``;
* fp32 tiles: the faiss path (row maxima, hot rows into faiss heaps; k) against ``topk.push_f32_tile``;

each as seconds and as a ratio to the fp32 GEMM of the whole shape, which the same loop computes tile by tile (the
yardstick of bench/mining_speed.py). The bf16 tiles are the fp32 tiles rounded to bf16 (on a CPU with bf16 units the
GEMM writes them directly; the values differ by accumulation rounding only), so the figures do not need bf16 units:
they hold for any CPU, which the bf16 end-to-end figure of mining_speed.py does not. Not part of the test suite.

    .venv/bin/python bench/tile_bookkeeping.py                 # 100k x 100k, d = 512, 1 thread
    .venv/bin/python bench/tile_bookkeeping.py --n 20000       # smoke run
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100_000, help="rows per side")
    p.add_argument("--d", type=int, default=512, help="embedding dimension")
    p.add_argument("--k", type=int, default=4, help="neighbours (the fp32 path's heap width)")
    p.add_argument("--margin", type=int, default=8, help="bf16 candidates beyond k (K = k + margin)")
    p.add_argument("--tile", type=int, nargs=2, default=(2048, 1024), help="(source rows, target rows) per tile")
    p.add_argument("--threads", type=int, default=1, help="compute threads (one worker's view: 1)")
    p.add_argument("--clusters", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(ARGS.threads)
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from bench._faiss_heaps import Heaps, add_rows, add_segments  # noqa: E402
from bench.mining_speed import make_data  # noqa: E402
from mining.core.knn.topk import TopK, push_bf16_tile, push_f32_tile  # noqa: E402


def main() -> None:
    args = ARGS
    assert args is not None
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, numpy {np.__version__}, {os.cpu_count()} CPUs, {args.threads} thread(s)")
    print(f"load average at start: {os.getloadavg()}")
    n, (ts, tt) = args.n, args.tile
    src, tgt = make_data(n, args.d, args.clusters, args.seed)
    s_t, t_t = torch.from_numpy(src), torch.from_numpy(tgt)
    width = args.k + args.margin
    ids = np.arange(n, dtype=np.int64)
    old_bf = (Heaps(n, width), Heaps(n, width))
    new_bf = (TopK(n, width), TopK(n, width))
    old_32 = (Heaps(n, args.k), Heaps(n, args.k))
    new_32 = (TopK(n, args.k), TopK(n, args.k))
    # Compile (or load from numba's cache) before timing.
    warm = np.zeros((2, 2), dtype=np.float32)
    push_f32_tile(warm, 0, 0, TopK(2, 1), TopK(2, 1))
    push_bf16_tile(warm.view(np.int16)[:, :2].copy(), 0, 0, TopK(2, 1), TopK(2, 1))
    secs = dict.fromkeys(("gemm", "old_bf16", "new_bf16", "old_fp32", "new_fp32"), 0.0)
    buf = torch.empty(min(ts, n) * min(tt, n), dtype=torch.float32)
    buf32 = torch.empty(buf.shape, dtype=torch.float32)
    for i0 in range(0, n, ts):
        i1 = min(i0 + ts, n)
        for j0 in range(0, n, tt):
            j1 = min(j0 + tt, n)
            shape = (i1 - i0, j1 - j0)
            tile = buf[: shape[0] * shape[1]].view(shape)
            t0 = time.perf_counter()
            torch.mm(s_t[i0:i1], t_t[j0:j1].T, out=tile)
            t1 = time.perf_counter()
            secs["gemm"] += t1 - t0
            bf = tile.to(torch.bfloat16)
            t0 = time.perf_counter()
            t32 = buf32[: shape[0] * shape[1]].view(shape)
            t32.copy_(bf)
            add_segments(old_bf[0], t32, i0, ids[j0:j1], 256, columns=False)
            add_segments(old_bf[1], t32, j0, ids[i0:i1], 64, columns=True)
            t1 = time.perf_counter()
            push_bf16_tile(bf.view(torch.int16).numpy(), i0, j0, *new_bf)
            t2 = time.perf_counter()
            add_rows(old_32[0], tile, i0, ids[j0:j1])
            add_rows(old_32[1], tile.T, j0, ids[i0:i1])
            t3 = time.perf_counter()
            push_f32_tile(tile.numpy(), i0, j0, *new_32)
            t4 = time.perf_counter()
            secs["old_bf16"] += t1 - t0
            secs["new_bf16"] += t2 - t1
            secs["old_fp32"] += t3 - t2
            secs["new_fp32"] += t4 - t3
    gemm = secs["gemm"]
    print(f"\n== {n:,} x {n:,}, d = {args.d}, tiles {ts} x {tt}, bf16 K = {width}, fp32 k = {args.k} ==")
    print(f"  fp32 GEMM, tile by tile (yardstick): {gemm:8.2f} s ({2 * n * n * args.d / gemm / 1e9:.0f} GFLOP/s)")
    for kind in ("bf16", "fp32"):
        old, new = secs[f"old_{kind}"], secs[f"new_{kind}"]
        print(
            f"  {kind} tiles: faiss heaps {old:7.2f} s = {old / gemm:.3f} x the GEMM; compiled pass {new:7.2f} s ="
            f" {new / gemm:.3f} x the GEMM ({old / new:.1f}x faster)"
        )
    for kind, (a, b) in (("bf16", (old_bf, new_bf)), ("fp32", (old_32, new_32))):
        for side in (0, 1):
            same = np.array_equal(a[side].result()[0], b[side].result()[0])
            print(f"  {kind} {('rows', 'columns')[side]}: top-k values identical to the faiss path: {same}")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
