"""Compressed (IVF-PQ) index shards at scale: per-stage costs of a sentence run's train, index and search stages on
synthetic embeddings with planted pairs, with W worker processes of one thread each (never in the test suite).

The stages run the core functions the shard tasks call (mining.core.knn.pq, as mining/services/shards/pqstages.py):

    train   (1 task: IVF-PQ on a seeded sample of both sides, 64 points a list)
    index   (one task per side shard: fill a compressed shard from the trained index, write its codes)
    search  (one task per (query shard, group of index shards): compressed candidates, exact re-score from the
             float16 rows through a memory map, top-k) and the merge of a query shard's groups

Every side shard is filled; the search runs a sample of query shards (`--search-shards` a direction, each of
`--query-rows` rows) against every group, since its cost per query is what the projection needs. Printed: seconds
per stage and per task, per 1M rows (train: in all), the bytes of index a search task reads against float32 shards
of the same rows, the rows the re-score gathers, peak RSS per worker, recall@1 of the planted pairs and against
exact search on sampled queries, and the error of the neighbourhood means.

    OMP_NUM_THREADS=1 ./run bench scale_pq.py --n 2000000 --dim 512 --workers 1,2
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
    """src/tgt shard files (float16 .npy, what the re-score memory-maps): 60 % of target rows are noisy copies of
    the source row of the same number."""
    rng = np.random.default_rng(seed)
    for start in range(0, n, shard_rows):
        stop = min(n, start + shard_rows)
        src = _unit(rng.standard_normal((stop - start, dim), dtype=np.float32))
        noise = _unit(rng.standard_normal((stop - start, dim), dtype=np.float32))
        planted = rng.random(stop - start) < 0.6
        tgt = np.where(planted[:, None], _unit(src + 0.5 * noise), noise)
        j = start // shard_rows
        np.save(folder / f"src-{j:05d}.npy", src.astype(np.float16))
        np.save(folder / f"tgt-{j:05d}.npy", tgt.astype(np.float16))
        np.save(folder / f"planted-{j:05d}.npy", planted)


def _task(folder: Path, cfg: dict, stage: str, arg: tuple) -> dict:
    import faiss

    from mining.core.knn.pq import (
        gather_rows,
        pq_assign,
        pq_fill_shard,
        pq_fit_m,
        pq_merge,
        pq_search_shard,
        pq_train,
        rescore_topk,
    )
    from mining.core.knn.shards import merge_topk

    n, rows, groups = cfg["n"], cfg["shard_rows"], cfg["groups"]
    n_shards = -(-n // rows)
    t0, c0 = time.perf_counter(), time.process_time()
    out: dict = {}
    if stage == "train":
        rng = np.random.default_rng(0)
        want = 64 * cfg["nlist"]
        parts = []
        for side in ("src", "tgt"):
            sel = np.sort(rng.choice(n, min(n, want // 2), replace=False))
            for j in range(n_shards):
                s = sel[(sel >= j * rows) & (sel < (j + 1) * rows)] - j * rows
                parts.append(np.load(folder / f"{side}-{j:05d}.npy", mmap_mode="r")[s].astype(np.float32))
        sample = np.concatenate(parts)
        index = pq_train(sample, cfg["nlist"], m=pq_fit_m(sample.shape[1], cfg["m"]), seed=0)
        faiss.write_index(index, str(folder / "trained.index"))
        out["sample"] = len(sample)
    elif stage == "index":
        side, j = arg
        trained = faiss.read_index(str(folder / "trained.index"))
        base = np.load(folder / f"{side}-{j:05d}.npy").astype(np.float32)
        index = pq_fill_shard(trained, base, j * rows)
        tmp = folder / f".{side}-{j:05d}.index.tmp"
        faiss.write_index(index, str(tmp))
        os.replace(tmp, folder / f"{side}-{j:05d}.index")
    else:
        q_side, j, g = arg
        b_side = "tgt" if q_side == "src" else "src"
        members = [b for b in range(n_shards) if b * groups // n_shards == g]
        t = time.perf_counter()
        paths = [folder / f"{b_side}-{b:05d}.index" for b in members]
        group = pq_merge([faiss.read_index(str(p)) for p in paths])
        blocks = [(b * rows, np.load(folder / f"{b_side}-{b:05d}.npy", mmap_mode="r")) for b in members]
        out["load"] = time.perf_counter() - t
        out["index_bytes"] = sum(p.stat().st_size for p in paths)
        out["float32_bytes"] = sum(len(r) for _, r in blocks) * cfg["dim"] * 4
        q = np.load(folder / f"{q_side}-{j:05d}.npy", mmap_mode="r")[: cfg["query_rows"]].astype(np.float32)
        t, c = time.perf_counter(), time.process_time()
        _, cand = pq_search_shard(group, q, cfg["k_cand"], cfg["nprobe"], assign=pq_assign(group, q, cfg["nprobe"]))
        out["search"], out["search_cpu"] = time.perf_counter() - t, time.process_time() - c
        t, c = time.perf_counter(), time.process_time()
        sims, ids = rescore_topk(q, cand, cfg["k"], gather_rows(blocks))
        out["rescore"], out["rescore_cpu"] = time.perf_counter() - t, time.process_time() - c
        out["rescore_rows"] = int(len(np.unique(cand[cand >= 0])))
        t = time.perf_counter()
        np.savez(folder / f"part-{q_side}-{j:05d}-{g:03d}.npz", sims=sims, ids=ids)
        out["write"] = time.perf_counter() - t
        out["queries"] = len(q)
        parts = [folder / f"part-{q_side}-{j:05d}-{h:03d}.npz" for h in range(groups)]
        if all(p.exists() for p in parts):  # the last group of this query shard merges (as the run's shard does)
            t = time.perf_counter()
            loaded = [np.load(p) for p in parts]
            m_s, m_i = merge_topk([(p["sims"], p["ids"]) for p in loaded], cfg["k"])
            np.savez(folder / f"knn-{q_side}-{j:05d}.npz", sims=m_s, ids=m_i)
            out["merge"] = time.perf_counter() - t
    out["seconds"], out["cpu"] = time.perf_counter() - t0, time.process_time() - c0
    return out


def _worker(folder, cfg, tasks, results) -> None:
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
            res = _task(folder, cfg, stage, arg)
        except Exception:
            results.put((stage, arg, {}, traceback.format_exc()))
            continue
        results.put((stage, arg, res, None))
    results.put(("rss", os.getpid(), {"rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}, None))


def run_stages(folder: Path, cfg: dict, workers: int, plan: dict) -> dict:
    ctx = mp.get_context("spawn")
    tasks, results = ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(folder, cfg, tasks, results)) for _ in range(workers)]
    for p in procs:
        p.start()
    out: dict = {"stages": {}, "tasks": {}}
    for stage, args in plan.items():
        for old in folder.glob("part-*.npz") if stage == "search" else []:
            old.unlink()
        t0 = time.perf_counter()
        for arg in args:
            tasks.put((stage, arg))
        got = []
        for _ in args:
            _, arg, res, error = results.get(timeout=4 * 3600)
            if error:
                raise RuntimeError(f"{stage} {arg} failed in a worker:\n{error}")
            got.append(res)
        out["stages"][stage] = time.perf_counter() - t0
        out["tasks"][stage] = got
    for _ in procs:
        tasks.put(None)
    out["rss_mib"] = sorted(results.get()[2]["rss"] for _ in procs)
    for p in procs:
        p.join()
    return out


def quality(folder: Path, cfg: dict, searched: list[tuple[str, int]], n_sample: int) -> dict:
    """Recall@1 of the planted pairs, recall@1 and @k against exact search and the neighbourhood means' error on
    sampled queries of the searched source shards."""
    from mining.core.knn import knn_exact
    from mining.core.margin import neighbourhood_means

    rows, n, k = cfg["shard_rows"], cfg["n"], cfg["k"]
    hits = total = 0
    qs, got_s, got_i = [], [], []
    rng = np.random.default_rng(1)
    for side, j in searched:
        if side != "src":
            continue
        planted = np.load(folder / f"planted-{j:05d}.npy")[: cfg["query_rows"]]
        res = np.load(folder / f"knn-src-{j:05d}.npz")
        ids = res["ids"][:, 0]
        own = np.arange(j * rows, j * rows + len(planted))
        hits += int(np.sum(ids[planted] == own[planted]))
        total += int(planted.sum())
        pick = np.sort(rng.choice(len(planted), min(len(planted), n_sample // 2), replace=False))
        qs.append(np.load(folder / f"src-{j:05d}.npy", mmap_mode="r")[pick].astype(np.float32))
        got_s.append(res["sims"][pick])
        got_i.append(res["ids"][pick])
    q, gs, gi = np.concatenate(qs), np.concatenate(got_s), np.concatenate(got_i)
    parts = []
    for b in range(-(-n // rows)):
        base = np.load(folder / f"tgt-{b:05d}.npy").astype(np.float32)
        s, i = knn_exact(q, base, k)
        parts.append((s, np.where(i >= 0, i + b * rows, -1)))
        del base
    from mining.core.knn.shards import merge_topk

    es, ei = merge_topk(parts, k)
    same = gi == ei
    mean_err = np.abs(neighbourhood_means(gs, k) - neighbourhood_means(es, k))
    return {
        "planted_recall1": hits / max(1, total),
        "exact_recall1": float(np.mean(gi[:, 0] == ei[:, 0])),
        "exact_recallk": float(np.mean([len(set(a) & set(b)) / k for a, b in zip(gi, ei, strict=True)])),
        "sim_err": float(np.abs(np.where(same, gs - es, 0)).max()),
        "mean_err_mean": float(mean_err.mean()),
        "mean_err_max": float(mean_err.max()),
        "sampled": len(q),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2_000_000, help="sentences per side")
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--shard-rows", type=int, default=100_000)
    ap.add_argument("--groups", type=int, default=2, help="groups of index shards a side (one search task each)")
    ap.add_argument("--nlist", type=int, default=0, help="inverted lists (default: the run's, about 4 sqrt(n))")
    ap.add_argument("--m", type=int, default=64, help="bytes of PQ code a row")
    ap.add_argument("--nprobe", type=int, default=16)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--k-cand", type=int, default=32, help="compressed candidates re-scored a query")
    ap.add_argument("--search-shards", type=int, default=2, help="query shards searched a direction")
    ap.add_argument("--query-rows", type=int, default=20_000, help="rows of each searched query shard")
    ap.add_argument("--exact-sample", type=int, default=1000, help="queries checked against exact search")
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    ap.add_argument("--folder", default="", help="work folder (default: a temporary one)")
    args = ap.parse_args()
    from mining.core.knn.shards import ivf_nlist

    counts = [int(w) for w in args.workers.split(",")]
    n_shards = -(-args.n // args.shard_rows)
    cfg = {
        "n": args.n, "dim": args.dim, "shard_rows": args.shard_rows, "groups": min(args.groups, n_shards),
        "nlist": args.nlist or ivf_nlist(args.n), "m": args.m, "nprobe": args.nprobe, "k": args.k,
        "k_cand": args.k_cand, "query_rows": min(args.query_rows, args.shard_rows),
    }  # fmt: skip
    load = open("/proc/loadavg").read().split()[:3]
    print(f"# scale_pq: {args.n:,} x {args.n:,}, d={args.dim}, {n_shards} shards a side of {args.shard_rows:,} rows, "
          f"{cfg['groups']} groups; IVF{cfg['nlist']},PQ{args.m}, nprobe={args.nprobe}, k={args.k}, "
          f"k_cand={args.k_cand}; load {load}")  # fmt: skip
    if args.folder:
        Path(args.folder).mkdir(parents=True, exist_ok=True)  # a work folder that does not exist yet is made
    with tempfile.TemporaryDirectory(prefix="scale-pq-", dir=args.folder or None) as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        make_sides(folder, args.n, args.dim, args.shard_rows)
        print(f"# synthetic shards written in {time.perf_counter() - t0:.1f} s", flush=True)
        picked = np.linspace(0, n_shards - 1, args.search_shards).round().astype(int).tolist()
        searched = [(side, j) for side in ("src", "tgt") for j in picked]
        build = {"train": [()], "index": [(side, j) for side in ("tgt", "src") for j in range(n_shards)]}
        search = {"search": [(side, j, g) for side, j in searched for g in range(cfg["groups"])]}
        for w in counts:
            res = run_stages(folder, cfg, w, {**build, **search} if w == counts[0] else search)
            stages = ", ".join(f"{s} {t:.1f} s" for s, t in res["stages"].items())
            print(f"workers={w}: {stages}; peak RSS per worker {', '.join(f'{r:.0f}' for r in res['rss_mib'])} MiB",
                  flush=True)  # fmt: skip
            for stage, got in res["tasks"].items():
                secs = np.array([r["seconds"] for r in got])
                cpu = np.array([r["cpu"] for r in got])
                if stage == "train":
                    print(f"  train  1 task {secs[0]:.1f} s, CPU {cpu[0]:.1f} s (sample {got[0]['sample']:,} rows)")
                elif stage == "index":
                    per_m = secs.mean() / (args.shard_rows / 1e6)
                    print(f"  index  {len(secs)} shards, mean {secs.mean():.2f} s/shard ({per_m:.1f} s per 1M rows), "
                          f"CPU {cpu.mean():.2f} s/shard")  # fmt: skip
                else:
                    q = np.array([r["queries"] for r in got])
                    base_rows = args.n / cfg["groups"]
                    per = {key: np.array([r[key] for r in got]) for key in ("load", "search", "rescore", "write")}
                    norm = 1e6 / q.mean() * 1e6 / base_rows  # seconds per 1M queries x 1M index rows
                    merges = [r["merge"] for r in got if "merge" in r]
                    print(f"  CPU seconds a search task: {cpu.mean():.2f} (search "
                          f"{np.mean([r['search_cpu'] for r in got]):.2f}, re-score "
                          f"{np.mean([r['rescore_cpu'] for r in got]):.2f})")  # fmt: skip
                    print(f"  search {len(secs)} tasks of {q.mean():,.0f} queries x {base_rows:,.0f} index rows: "
                          f"mean {secs.mean():.2f} s (load {per['load'].mean():.2f}, search {per['search'].mean():.2f}"
                          f", re-score {per['rescore'].mean():.2f}, write {per['write'].mean():.3f}); merge of a "
                          f"query shard's groups {np.mean(merges):.3f} s; per 1M queries x 1M index rows: search "
                          f"{per['search'].mean() * norm:.1f} s, re-score {per['rescore'].mean() * 1e6 / q.mean():.1f}"
                          f" s per 1M queries")  # fmt: skip
                    ib = np.mean([r["index_bytes"] for r in got])
                    fb = np.mean([r["float32_bytes"] for r in got])
                    rr = np.mean([r["rescore_rows"] for r in got])
                    print(f"  bytes of index a search task reads: {ib / 1e6:.1f} MB of codes vs {fb / 1e6:.1f} MB as "
                          f"float32 ({fb / ib:.1f}x less); the re-score gathers {rr:,.0f} float16 rows "
                          f"({rr * args.dim * 2 / 1e6:.1f} MB, from the holder's memory map)")  # fmt: skip
        qual = quality(folder, cfg, searched, args.exact_sample)
        print(f"recall@1 of the planted pairs: {qual['planted_recall1']:.4f}; against exact search on "
              f"{qual['sampled']} sampled queries: recall@1 {qual['exact_recall1']:.4f}, recall@{args.k} "
              f"{qual['exact_recallk']:.4f}; listed similarities vs exact: max error {qual['sim_err']:.1e}; "
              f"neighbourhood means: mean error {qual['mean_err_mean']:.4f}, "
              f"max {qual['mean_err_max']:.4f}")  # fmt: skip


if __name__ == "__main__":
    main()
