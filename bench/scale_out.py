"""Scale-out of a sentence run's index and search stages over worker processes (never in the test suite).

Synthetic unit embeddings (planted pairs plus noise) are cut into row shards as a run cuts them and written as
float16 shard files. Then the IVF stages run as shard tasks taken from a shared queue by W worker processes (one
compute thread each), exactly the core functions the shard tasks call (mining.core.knn.shards):

    train (1 task: quantizer on a seeded sample of both sides)
    index (one task per base shard, each side: fill an IVF shard from the shared quantizer, write it)
    search (one task per query shard, both directions: search every index shard of the other side, merge top-k)

Printed: wall time per stage and in all for W = 1 and 2 (or --workers), the speed-up, peak RSS per worker, the
per-shard costs (mean seconds per shard and per million rows), and recall@1 of the planted pairs. Celery, Postgres
and the embedding/encoding stage are not in it (embedding is measured by bench/encode_speed.py).

    OMP_NUM_THREADS=1 ./run bench scale_out.py --n 200000 --dim 256 --shard-rows 50000 --workers 1,2
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def make_sides(folder: Path, n: int, dim: int, shard_rows: int, seed: int = 0) -> None:
    """Write src/tgt shard files (float16): 60 % of target rows are noisy copies of source row i (row i)."""
    rng = np.random.default_rng(seed)
    for start in range(0, n, shard_rows):
        stop = min(n, start + shard_rows)
        src = _unit(rng.standard_normal((stop - start, dim)))
        noise = _unit(rng.standard_normal((stop - start, dim)))
        planted = rng.random(stop - start) < 0.6
        tgt = np.where(planted[:, None], _unit(src + 0.5 * noise), noise)
        j = start // shard_rows
        np.save(folder / f"src-{j:05d}.npy", src.astype(np.float16))
        np.save(folder / f"tgt-{j:05d}.npy", tgt.astype(np.float16))
        np.save(folder / f"planted-{j:05d}.npy", planted)


def _load(folder: Path, side: str, j: int) -> np.ndarray:
    return np.load(folder / f"{side}-{j:05d}.npy").astype(np.float32)


def _task(folder: Path, n_shards: int, shard_rows: int, k: int, nprobe: int, stage: str, arg: tuple) -> float:
    import faiss

    from mining.core.knn.shards import ivf_assign, ivf_fill_shard, ivf_nlist, ivf_search_shard, ivf_train, merge_topk

    t0 = time.perf_counter()
    if stage == "train":
        (n,) = arg
        nlist = ivf_nlist(n)
        rng = np.random.default_rng(0)
        want = 64 * nlist
        rows = np.sort(rng.choice(n, min(n, want), replace=False))
        parts = []
        for side in ("src", "tgt"):
            for j in range(n_shards):
                sel = rows[(rows >= j * shard_rows) & (rows < (j + 1) * shard_rows)] - j * shard_rows
                sel = sel[: len(sel) // 2 + 1]
                parts.append(_load(folder, side, j)[sel])
        index = ivf_train(np.concatenate(parts), nlist, seed=0)
        faiss.write_index(index, str(folder / "trained.index"))
    elif stage == "index":
        side, j = arg
        trained = faiss.read_index(str(folder / "trained.index"))
        index = ivf_fill_shard(trained, _load(folder, side, j), j * shard_rows)
        tmp = folder / f".{side}-{j:05d}.index.tmp"
        faiss.write_index(index, str(tmp))
        os.replace(tmp, folder / f"{side}-{j:05d}.index")
    else:
        q_side, j = arg
        b_side = "tgt" if q_side == "src" else "src"
        q = _load(folder, q_side, j)
        assign = ivf_assign(faiss.read_index(str(folder / "trained.index")), q, nprobe)  # once for all shards
        parts = []
        for b in range(n_shards):
            index = faiss.read_index(str(folder / f"{b_side}-{b:05d}.index"))
            parts.append(ivf_search_shard(index, q, k, nprobe, assign=assign))
            del index
        sims, ids = merge_topk(parts, k)
        np.savez(folder / f"knn-{q_side}-{j:05d}.npz", sims=sims, ids=ids)
    return time.perf_counter() - t0


def _worker(folder, n_shards, shard_rows, k, nprobe, tasks, results) -> None:
    import faiss
    import torch

    faiss.omp_set_num_threads(1)
    torch.set_num_threads(1)
    while True:
        item = tasks.get()
        if item is None:
            break
        stage, arg = item
        try:
            seconds = _task(folder, n_shards, shard_rows, k, nprobe, stage, arg)
        except Exception:
            results.put((stage, arg, 0.0, traceback.format_exc()))
            continue
        results.put((stage, arg, seconds, None))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # MiB (Linux reports KiB)
    results.put(("rss", os.getpid(), rss, None))


def run_stages(folder: Path, n: int, shard_rows: int, k: int, nprobe: int, workers: int) -> dict:
    """Run train, index, search with `workers` processes; each stage waits for the previous (as a run's join)."""
    n_shards = -(-n // shard_rows)
    ctx = mp.get_context("spawn")
    tasks, results = ctx.Queue(), ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(folder, n_shards, shard_rows, k, nprobe, tasks, results))
        for _ in range(workers)
    ]
    for p in procs:
        p.start()
    plan = {
        "train": [(n,)],
        "index": [(side, j) for side in ("tgt", "src") for j in range(n_shards)],
        "search": [(side, j) for side in ("src", "tgt") for j in range(n_shards)],
    }
    out: dict = {"stages": {}, "shard_seconds": {}}
    t_all = time.perf_counter()
    for stage, args in plan.items():
        t0 = time.perf_counter()
        for arg in args:
            tasks.put((stage, arg))
        secs = []
        for _ in args:
            _, arg, seconds, error = results.get(timeout=3600)
            if error:
                raise RuntimeError(f"{stage} {arg} failed in a worker:\n{error}")
            secs.append(seconds)
        out["stages"][stage] = time.perf_counter() - t0
        out["shard_seconds"][stage] = secs
    out["wall"] = time.perf_counter() - t_all
    for _ in procs:
        tasks.put(None)
    out["rss_mib"] = sorted(results.get()[2] for _ in procs)
    for p in procs:
        p.join()
    return out


def recall_at_1(folder: Path, n_shards: int, shard_rows: int) -> float:
    hits = total = 0
    for j in range(n_shards):
        planted = np.load(folder / f"planted-{j:05d}.npy")
        ids = np.load(folder / f"knn-src-{j:05d}.npz")["ids"][:, 0]
        rows = np.arange(j * shard_rows, j * shard_rows + len(planted))
        hits += int(np.sum(ids[planted] == rows[planted]))
        total += int(planted.sum())
    return hits / max(1, total)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200_000, help="sentences per side")
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--shard-rows", type=int, default=50_000)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--nprobe", type=int, default=16)
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    args = ap.parse_args()
    counts = [int(w) for w in args.workers.split(",")]
    n_shards = -(-args.n // args.shard_rows)
    print(f"# scale_out: {args.n:,} x {args.n:,}, d={args.dim}, {n_shards} shards a side of {args.shard_rows:,} rows,")
    print(f"# IVF nprobe={args.nprobe}, k={args.k}; load: {open('/proc/loadavg').read().split()[:3]}")
    with tempfile.TemporaryDirectory(prefix="scale-out-") as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        make_sides(folder, args.n, args.dim, args.shard_rows)
        print(f"# synthetic shards written in {time.perf_counter() - t0:.1f} s")
        base = None
        for w in counts:
            res = run_stages(folder, args.n, args.shard_rows, args.k, args.nprobe, w)
            base = base or res["wall"]
            stages = ", ".join(f"{s} {t:.1f} s" for s, t in res["stages"].items())
            print(f"workers={w}: wall {res['wall']:.1f} s ({stages}); speed-up {base / res['wall']:.2f}x; "
                  f"peak RSS per worker {', '.join(f'{r:.0f}' for r in res['rss_mib'])} MiB")  # fmt: skip
            for stage, secs in res["shard_seconds"].items():
                per_m = np.mean(secs) / (args.shard_rows / 1e6)
                print(f"  {stage:6s} {len(secs):3d} shards, mean {np.mean(secs):.2f} s/shard "
                      f"({per_m:.1f} s per 1M rows), max {np.max(secs):.2f} s")  # fmt: skip
        print(f"recall@1 of the planted pairs: {recall_at_1(folder, n_shards, args.shard_rows):.4f}")


if __name__ == "__main__":
    main()
