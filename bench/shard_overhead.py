"""What a sharded bf16 search pays beyond one pass, without the GEMMs: bookkeeping, bf16 copies, re-score and proof.

A sharded run cuts both sides into row shards and searches every (query shard, index shard) pair on its own: every
pair starts its heaps empty, converts its two sides to bf16, and re-scores and proves its own candidates; the pairs'
lists are then merged. This script times those parts for one pass over n x n and for the pairs of ``--shards``
shards a side, each as a ratio to the fp32 GEMM of the whole shape (timed in the same loop). The similarity tiles
are fp32 products rounded to bf16, so no bf16 units are needed (the bf16 GEMM itself is what this leaves out: see
bench/mining_speed.py on a CPU that has them). Not part of the test suite.

    .venv/bin/python bench/shard_overhead.py                   # 100k x 100k, 2 shards a side, 1 thread
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
    p.add_argument("--d", type=int, default=512)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--shards", type=int, default=2, help="row shards per side")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(ARGS.threads)
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from bench.mining_speed import make_data  # noqa: E402
from mining.core.hw import Compute  # noqa: E402
from mining.core.knn import lowp  # noqa: E402
from mining.core.knn.lowp import DEFAULT_MARGIN, DEFAULT_TILE, _finish, _Side  # noqa: E402
from mining.core.knn.shards import merge_topk, row_shards  # noqa: E402
from mining.core.knn.topk import TopK, push_bf16_tile  # noqa: E402

PARTS = ("gemm", "bookkeeping", "bf16 copies and norms", "re-score and proof", "rescue", "merge")
_RESCUE_SECS = [0.0]
_rescue = lowp._rescue
BF16 = lowp._arith(Compute.BF16)


def _timed_rescue(*args: object, **kwargs: object) -> tuple[np.ndarray, np.ndarray]:
    """lowp._rescue, its time kept apart (it runs bf16 GEMMs: slow where the CPU has no bf16 units)."""
    t0 = time.perf_counter()
    try:
        return _rescue(*args, **kwargs)
    finally:
        _RESCUE_SECS[0] += time.perf_counter() - t0


lowp._rescue = _timed_rescue


def one_pair(src: np.ndarray, tgt: np.ndarray, k: int, secs: dict[str, float]) -> tuple[tuple, tuple, int]:
    """Both ways between src and tgt as the bf16 path does it, the GEMM (fp32, rounded) timed apart."""
    width = k + DEFAULT_MARGIN[Compute.BF16]
    ts, tt = DEFAULT_TILE[Compute.BF16]
    s_t, t_t = torch.from_numpy(src), torch.from_numpy(tgt)
    fwd, bwd = TopK(len(src), min(width, len(tgt))), TopK(len(tgt), min(width, len(src)))
    for i0 in range(0, len(src), ts):
        for j0 in range(0, len(tgt), tt):
            t0 = time.perf_counter()
            tile = (s_t[i0 : i0 + ts] @ t_t[j0 : j0 + tt].T).to(torch.bfloat16)
            t1 = time.perf_counter()
            push_bf16_tile(tile.view(torch.int16).numpy(), i0, j0, fwd, bwd)
            secs["gemm"] += t1 - t0
            secs["bookkeeping"] += time.perf_counter() - t1
    t0 = time.perf_counter()
    s_side, t_side = _Side.of(src, BF16), _Side.of(tgt, BF16)
    t1 = time.perf_counter()
    _RESCUE_SECS[0] = 0.0
    (cf, cf_ids), (cb, cb_ids) = fwd.result(), bwd.result()
    fs, fi, n_f = _finish(s_side, t_side, cf, cf_ids, min(k, len(tgt)))
    bs, bi, n_b = _finish(t_side, s_side, cb, cb_ids, min(k, len(src)))
    secs["bf16 copies and norms"] += t1 - t0
    secs["re-score and proof"] += time.perf_counter() - t1 - _RESCUE_SECS[0]
    secs["rescue"] += _RESCUE_SECS[0]
    return (fs, fi), (bs, bi), n_f + n_b


def main() -> None:
    args = ARGS
    assert args is not None
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, {args.threads} thread(s); load {os.getloadavg()}")
    src, tgt = make_data(args.n, args.d, 1000, args.seed)
    one_pair(src[:64], tgt[:64], args.k, dict.fromkeys(PARTS, 0.0))  # compile / load the kernels
    one = dict.fromkeys(PARTS, 0.0)
    fwd_one, bwd_one, rescued_one = one_pair(src, tgt, args.k, one)
    cut = dict.fromkeys(PARTS, 0.0)
    shards = row_shards(args.n, -(-args.n // args.shards))
    fwd_parts: dict[int, list] = {i: [] for i in range(len(shards))}
    bwd_parts: dict[int, list] = {j: [] for j in range(len(shards))}
    rescued_cut = 0
    for i, (a0, a1) in enumerate(shards):
        for j, (b0, b1) in enumerate(shards):
            (fs, fi), (bs, bi), r = one_pair(src[a0:a1], tgt[b0:b1], args.k, cut)
            fwd_parts[i].append((fs, fi + b0))
            bwd_parts[j].append((bs, bi + a0))
            rescued_cut += r
    t0 = time.perf_counter()
    fwd_cut = [np.concatenate(m) for m in zip(*(merge_topk(fwd_parts[i], args.k) for i in fwd_parts), strict=True)]
    bwd_cut = [np.concatenate(m) for m in zip(*(merge_topk(bwd_parts[j], args.k) for j in bwd_parts), strict=True)]
    cut["merge"] = time.perf_counter() - t0
    gemm = one["gemm"]
    print(f"\n== {args.n:,} x {args.n:,}, d = {args.d}, k = {args.k}, {args.shards} shards a side ==")
    print(f"  fp32 GEMM of the shape (yardstick, one pass's tiles): {gemm:.2f} s")
    for part in PARTS[1:]:
        print(
            f"  {part:<26s} one pass {one[part]:7.2f} s = {one[part] / gemm:.3f} x   "
            f"{len(shards) ** 2} pairs {cut[part]:7.2f} s = {cut[part] / gemm:.3f} x"
        )
    extra = sum(cut[p] for p in PARTS[1:] if p != "rescue") - sum(one[p] for p in PARTS[1:] if p != "rescue")
    print(f"  the pairs' extra cost beyond the GEMMs and the rescue: {extra:.2f} s = {extra / gemm:.3f} x the GEMM")
    print(f"  rows rescued: one pass {rescued_one}, pairs {rescued_cut}")
    for name, cut_res, one_res in (("forward", fwd_cut, fwd_one), ("backward", bwd_cut, bwd_one)):
        differ = np.flatnonzero((cut_res[1] != one_res[1]).any(axis=1))
        diff = np.abs(cut_res[0].astype(np.float64) - one_res[0]).max()
        print(
            f"  {name}: neighbour lists identical to the one pass on {1 - differ.size / len(cut_res[1]):.5f} of rows"
            f" ({differ.size} differ); largest similarity difference {diff:.1e}"
        )
        for r in differ[:3]:
            print(f"    row {r}: pairs {cut_res[1][r].tolist()} {cut_res[0][r].tolist()}")
            print(f"    row {r}: one   {one_res[1][r].tolist()} {np.asarray(one_res[0][r]).tolist()}")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
