"""What a compressed (IVF-PQ) sentence run costs at 10M, 100M and 1B sentences a side, projected from per-unit costs
measured here (never in the test suite; docs/DEPLOY.md's table is this script's output).

Measured inputs (docs/DEPLOY.md gives the command with the figures of docs/BENCHMARKS.md, "Compressed index shards"):
    --code-ns       CPU ns per PQ code scanned (scale_pq.py: search CPU / (queries x nprobe x rows / nlist))
    --rescore-us    CPU us per candidate re-scored exactly from float16 rows (scale_pq.py: re-score CPU / candidates)
    --train         "nlist:cpu_s,..." one-thread train costs (scale_pq.py's train stage; bench/pq_train_cost.py for
                    larger list counts), fitted as a * nlist + b * nlist^2 (PQ codebooks on a sample of 64 rows a list,
                    capped by faiss; the coarse k-means on that sample: list count squared)
    --fill          "nlist:cpu_s,..." one-thread cost of filling a 100k-row index shard, fitted as a + b * nlist
    --embed-rate    sentences a second a core for the encoder (Encoder speed)
    --copy-rate     candidate rows a second into one Postgres (../shared/PERFORMANCE.md)
Assumed (stated in the output): machines of --cores cores, one worker process a core, --efficiency parallel
efficiency, the train task on one machine's cores, one candidate a source sentence written, every group reading
every query shard once (float16 rows plus the rows' lists), over the network speed of each scenario.

    ./run python bench/pq_projection.py
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mining.core.knn.shards import ivf_nlist  # noqa: E402


@dataclass(frozen=True)
class Scenario:
    n: int  # sentences a side
    machines: int
    groups: int  # index-shard groups a side (one queue each)
    net_gb_s: float  # shared storage's read rate
    net: str


SCENARIOS = (
    Scenario(10_000_000, 8, 2, 1.25, "10 GbE NFS"),
    Scenario(100_000_000, 32, 8, 1.25, "10 GbE NFS"),
    Scenario(1_000_000_000, 256, 32, 20.0, "a parallel file system at 20 GB/s"),
)


def _points(text: str) -> tuple[np.ndarray, np.ndarray]:
    pairs = [p.split(":") for p in text.split(",") if p.strip()]
    if not pairs:
        raise SystemExit(f"no nlist:seconds points in {text!r}")
    x = np.array([float(a) for a, _ in pairs])
    y = np.array([float(b) for _, b in pairs])
    return x, y


def fit_train(text: str) -> tuple[float, float]:
    """Least-squares a, b >= 0 of cpu = a * nlist + b * nlist^2."""
    x, y = _points(text)
    A = np.stack([x, x**2], axis=1)
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    a, b = (max(0.0, float(c)) for c in coef)
    return a, b


def fit_fill(text: str) -> tuple[float, float]:
    """Least-squares a, b of cpu per 100k rows = a + b * nlist (one point: b = 0)."""
    x, y = _points(text)
    if len(x) == 1:
        return float(y[0]), 0.0
    b, a = np.polyfit(x, y, 1)
    return float(a), float(b)


def project(s: Scenario, args: argparse.Namespace, train_ab: tuple[float, float], fill_ab: tuple[float, float]):
    nlist = ivf_nlist(s.n)
    cores = s.machines * args.cores * args.efficiency
    queries = 2 * s.n  # both directions
    rows = {
        "embed": 2 * s.n / args.embed_rate / cores,
        "train": (train_ab[0] * nlist + train_ab[1] * nlist**2) / (args.cores * args.efficiency),
        "index": 2 * s.n / 100_000 * (fill_ab[0] + fill_ab[1] * nlist) / cores,
        "search (scan)": queries * args.nprobe * s.n / nlist * args.code_ns * 1e-9 / cores,
        "re-score": queries * s.groups * args.k_cand * args.rescore_us * 1e-6 / cores,
        "write": s.n / args.copy_rate,
    }
    row_bytes = 2 * args.dim + 8 * args.nprobe  # a query row's float16 vector and its lists
    read_bytes = s.groups * queries * row_bytes
    rows["query shards read"] = read_bytes / (s.net_gb_s * 1e9)
    codes = 2 * s.n / s.groups * (args.m + 8)  # a group's codes + ids, both sides: in each worker process
    vectors = 2 * s.n / s.groups * 2 * args.dim  # its float16 rows, both sides: memory maps, one page cache
    return nlist, rows, read_bytes, (codes, vectors)


def _minutes(sec: float) -> str:
    return f"{sec / 60:.1f} min" if sec < 6000 else f"{sec / 3600:.1f} h"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--code-ns", type=float, required=True)
    ap.add_argument("--rescore-us", type=float, required=True)
    ap.add_argument("--train", required=True, help="nlist:cpu_s,... (one thread)")
    ap.add_argument("--fill", required=True, help="nlist:cpu_s per 100k rows,... (one thread)")
    ap.add_argument("--embed-rate", type=float, default=3700.0)
    ap.add_argument("--copy-rate", type=float, default=144_000.0)
    ap.add_argument("--cores", type=int, default=16)
    ap.add_argument("--efficiency", type=float, default=0.83)
    ap.add_argument("--nprobe", type=int, default=16)
    ap.add_argument("--k-cand", type=int, default=32)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--m", type=int, default=64)
    args = ap.parse_args()
    train_ab, fill_ab = fit_train(args.train), fit_fill(args.fill)
    print(f"# inputs: {args.code_ns} ns a code scanned, {args.rescore_us} us a candidate re-scored; train "
          f"{train_ab[0]:.4g} * nlist + {train_ab[1]:.4g} * nlist^2 CPU s; fill {fill_ab[0]:.3g} + {fill_ab[1]:.3g} "
          f"* nlist CPU s per 100k rows; embed {args.embed_rate:.0f}/s a core; COPY {args.copy_rate:.0f} rows/s; "
          f"{args.cores}-core machines at {args.efficiency:.0%} efficiency; nprobe {args.nprobe}, "
          f"{args.k_cand} candidates, d = {args.dim}, PQ{args.m}")  # fmt: skip
    cols = [project(s, args, train_ab, fill_ab) for s in SCENARIOS]
    head = [f"{s.n / 1e6:,.0f}M x {s.n / 1e6:,.0f}M, {s.machines} machines, {s.groups} groups" for s in SCENARIOS]
    print("| | " + " | ".join(head) + " |")
    print("|---" * (len(head) + 1) + "|")
    print("| lists (nlist) | " + " | ".join(f"{c[0]:,}" for c in cols) + " |")
    for key in cols[0][1]:
        print(f"| {key} | " + " | ".join(_minutes(c[1][key]) for c in cols) + " |")
    print("| bytes the groups read | " + " | ".join(f"{c[2] / 1e12:.2f} TB" for c in cols) + " |")
    print("| network | " + " | ".join(s.net for s in SCENARIOS) + " |")
    print("| a group in memory: codes a worker process, float16 rows a machine | "
          + " | ".join(f"{c[3][0] / 1e9:.1f} GB, {c[3][1] / 1e9:.1f} GB" for c in cols) + " |")  # fmt: skip
    print("| total (stages one after another) | " + " | ".join(f"**{_minutes(sum(c[1].values()))}**" for c in cols)
          + " |")  # fmt: skip


if __name__ == "__main__":
    main()
