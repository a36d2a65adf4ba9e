"""One-thread cost of a compressed run's train task and of filling one index shard, at list counts larger than
bench/scale_pq.py reaches (its train sample is 64 rows a list, as a run's; never in the test suite). The figures feed
bench/pq_projection.py's --train and --fill.

    OMP_NUM_THREADS=1 ./run python bench/pq_train_cost.py --nlist 1024,2048,4096
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mining.core.knn.pq import pq_assign, pq_fill_shard, pq_fit_m, pq_train  # noqa: E402


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nlist", default="1024,2048,4096")
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--m", type=int, default=64)
    ap.add_argument("--per-list", type=int, default=64, help="training rows a list (a run's PQ_TRAIN_PER_LIST)")
    ap.add_argument("--fill-rows", type=int, default=100_000)
    ap.add_argument("--nprobe", type=int, default=16)
    args = ap.parse_args()
    import faiss

    faiss.omp_set_num_threads(1)
    rng = np.random.default_rng(0)
    base = _unit(rng.standard_normal((args.fill_rows, args.dim), dtype=np.float32))
    load = open("/proc/loadavg").read().split()[:3]
    print(f"# pq_train_cost: d={args.dim}, PQ{args.m}, {args.per_list} training rows a list, 1 thread; load {load}")
    for nlist in (int(x) for x in args.nlist.split(",")):
        sample = _unit(rng.standard_normal((args.per_list * nlist, args.dim), dtype=np.float32))
        c0, t0 = time.process_time(), time.perf_counter()
        trained = pq_train(sample, nlist, m=pq_fit_m(args.dim, args.m), seed=0)
        train_cpu, train_wall = time.process_time() - c0, time.perf_counter() - t0
        c0 = time.process_time()
        assign = pq_assign(trained, base, args.nprobe)
        pq_fill_shard(trained, base, 0, assign=assign)
        fill_cpu = time.process_time() - c0
        print(
            f"nlist {nlist}: train {train_cpu:.1f} s CPU ({train_wall:.1f} s wall, {len(sample):,} rows); fill "
            f"{fill_cpu:.2f} s CPU a {args.fill_rows:,}-row shard (assign to {args.nprobe} lists + add)",
            flush=True,
        )


if __name__ == "__main__":
    main()
