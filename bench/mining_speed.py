"""Mining speed benchmark: exact and IVF mining against a same-run fp32 GEMM yardstick.

Synthetic data: L2-normalised d-dim embeddings around random cluster centres, with half of the
target rows noisy copies of source rows (so mining has true pairs to find). Every stage prints
its wall time and its peak resident memory (Linux VmHWM, reset at the start of each stage).

    .venv/bin/python bench/mining_speed.py                  # 100k x 100k, 2 threads
    .venv/bin/python bench/mining_speed.py --n 20000        # smoke run
    .venv/bin/python bench/mining_speed.py --big            # adds 1M x 1M with IVF
    .venv/bin/python bench/mining_speed.py --copy-dsn postgresql://...   # COPY into that database instead
    .venv/bin/python bench/mining_speed.py --no-copy        # leave COPY out

The candidates are COPYed (binary) into a temporary table of a scratch database (default pcapp_bench on the local
server, created when missing): exact mining's figure is kNN both ways + margin + max-score + COPY.

Targets (issues): exact mining (kNN both ways + margin + max-score + COPY) <= 1.2 x one fp32
matrix product of the same shape in fp32, and <= 0.4 x with bf16 or int8 similarity tiles (issue 18: neighbour
lists identical to the fp32 path for >= 99.9 % of rows, every similarity within 1e-6); IVF end to end
< 60 s with recall@1 >= 0.95 against exact; 1M x 1M IVF peak memory < 8 GB. Not part of the test suite.

    .venv/bin/python bench/mining_speed.py --compute int8 --margins 16 24 32   # int8 only, margin sweep
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100_000, help="sentences per side")
    p.add_argument("--d", type=int, default=512, help="embedding dimension")
    p.add_argument("--k", type=int, default=4, help="neighbours (margin k)")
    p.add_argument("--threads", type=int, default=2, help="compute threads (torch, faiss, BLAS)")
    p.add_argument("--clusters", type=int, default=1000, help="cluster centres in the synthetic data")
    p.add_argument("--spread", type=float, default=2.0, help="within-cluster noise (2.0: cos to centre ~0.45)")
    p.add_argument("--pair-noise", type=float, default=1.0, help="noise of target copies (1.0: pair cos ~0.71)")
    p.add_argument("--tile", type=int, nargs=2, default=(512, 2048), help="fp32 exact-search tile (src rows, tgt rows)")
    p.add_argument(
        "--lowp-tile", type=int, nargs=2, default=None, help="bf16 / int8 tile (default: the library's for each)"
    )
    p.add_argument(
        "--gemm-tile", type=int, nargs=2, default=(2048, 4096), help="second tiling tried for the GEMM yardstick"
    )
    p.add_argument("--nprobe", type=int, default=16)
    p.add_argument("--nlist", type=int, default=None, help="IVF lists (default about 4 sqrt(n))")
    p.add_argument("--sample", type=int, default=2000, help="queries per side for recall against exact")
    p.add_argument("--skip-exact", action="store_true", help="skip the exact mining stage")
    p.add_argument("--big", action="store_true", help="also run 1M x 1M (or --big-n) with IVF")
    p.add_argument("--big-n", type=int, default=1_000_000)
    p.add_argument(
        "--copy-dsn",
        default="postgresql://postgres@127.0.0.1:5432/pcapp_bench",
        help="Postgres DSN the exact candidates are COPYed into (a temp table; the database is created if missing)",
    )
    p.add_argument("--no-copy", action="store_true", help="leave the COPY out of the exact figure")
    p.add_argument(
        "--compute",
        nargs="+",
        choices=("fp32", "bf16", "int8"),
        default=("fp32", "bf16", "int8"),
        help="exact path(s) to run: fp32 tiles, bf16 or int8 tiles + exact re-score (each compared with the first)",
    )
    p.add_argument("--margin", type=int, default=None, help="bf16 / int8 candidate margin (default: the library's)")
    p.add_argument(
        "--margins", type=int, nargs="*", default=(), help="also time the low-precision kNN at these margins"
    )
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None:
    # Thread counts must be fixed before numpy / torch / faiss load their BLAS and OpenMP runtimes.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(ARGS.threads)
    sys.path.insert(0, str(ROOT))

import faiss  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from bench._proc import reset_peak, status_kb  # noqa: E402
from mining.core.candidates import Strategy, mine_candidates  # noqa: E402
from mining.core.hw import Compute, bf16_supported, int8_supported  # noqa: E402
from mining.core.knn import knn_both_ways, knn_both_ways_approx, knn_both_ways_lowp, knn_exact  # noqa: E402
from mining.core.knn.lowp import DEFAULT_MARGIN, DEFAULT_TILE  # noqa: E402
from mining.core.margin import Margin  # noqa: E402
from mining.core.types import Candidates, KnnResult  # noqa: E402


@dataclass
class Report:
    rows: list[tuple[str, float, float]] = field(default_factory=list)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time a stage and record its peak RSS (GB)."""
        exact_peak = reset_peak()
        peak = [status_kb("VmRSS")]
        stop = threading.Event()

        def sample() -> None:  # fallback when VmHWM cannot be reset
            while not stop.wait(0.02):
                peak[0] = max(peak[0], status_kb("VmRSS"))

        sampler = None if exact_peak else threading.Thread(target=sample, daemon=True)
        if sampler:
            sampler.start()
        t0 = time.perf_counter()
        try:
            yield
        finally:
            dt = time.perf_counter() - t0
            stop.set()
            peak_kb = status_kb("VmHWM") if exact_peak else max(peak[0], status_kb("VmRSS"))
            self.rows.append((name, dt, peak_kb / 2**20))
            print(f"  {name:<52s} {dt:9.2f} s   peak RSS {peak_kb / 2**20:6.2f} GB", flush=True)

    def seconds(self, name: str) -> float:
        return next(dt for n, dt, _ in self.rows if n == name)


def make_data(
    n: int, d: int, clusters: int, seed: int, spread: float = 2.0, pair_noise: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """(n, d) float32 source and target rows; target i < n/2 is a noisy copy of source perm[i].

    Rows are centre + spread * g / sqrt(d) (g standard normal), normalised; copies add
    pair_noise * g / sqrt(d) to their source row before normalising.
    """
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, d), dtype=np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)

    def side(m: int) -> np.ndarray:
        x = np.empty((m, d), dtype=np.float32)
        for i0 in range(0, m, 65536):
            i1 = min(i0 + 65536, m)
            block = centres[rng.integers(0, clusters, i1 - i0)]
            block += rng.standard_normal((i1 - i0, d), dtype=np.float32) * np.float32(spread / np.sqrt(d))
            x[i0:i1] = block / np.linalg.norm(block, axis=1, keepdims=True)
        return x

    src, tgt = side(n), side(n)
    half = n // 2
    perm = rng.permutation(n)[:half]
    noisy = src[perm] + rng.standard_normal((half, d), dtype=np.float32) * np.float32(pair_noise / np.sqrt(d))
    tgt[:half] = noisy / np.linalg.norm(noisy, axis=1, keepdims=True)
    return src, tgt


def gemm_yardstick(src: np.ndarray, tgt: np.ndarray, tile: tuple[int, int]) -> None:
    """One fp32 product src @ tgt.T in the same tiles as the exact search (results discarded)."""
    s, t = torch.from_numpy(src), torch.from_numpy(tgt)
    ts, tt = tile
    buf = torch.empty(min(ts, len(src)) * min(tt, len(tgt)), dtype=torch.float32)
    for i0 in range(0, len(src), ts):
        i1 = min(i0 + ts, len(src))
        for j0 in range(0, len(tgt), tt):
            j1 = min(j0 + tt, len(tgt))
            torch.mm(s[i0:i1], t[j0:j1].T, out=buf[: (i1 - i0) * (j1 - j0)].view(i1 - i0, j1 - j0))


def ensure_database(dsn: str) -> None:
    """Create the DSN's database when it does not exist (connecting to the server's ``postgres`` database)."""
    import psycopg
    from psycopg import sql

    try:
        psycopg.connect(dsn).close()
        return
    except psycopg.OperationalError as exc:
        if "does not exist" not in str(exc):
            raise
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    name = info.pop("dbname")
    with psycopg.connect(psycopg.conninfo.make_conninfo(**info, dbname="postgres"), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def copy_candidates(dsn: str, cand: Candidates) -> int:
    """COPY the candidates (binary) into a temporary table; the app's hook for persistence cost."""
    import psycopg

    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute(
            "CREATE TEMP TABLE bench_candidates (src int8, tgt int8, cosine float4, score float4, "
            "fwd_mean float4, bwd_mean float4, rank int8, direction int2)"
        )
        cols = (cand.src_idx, cand.tgt_idx, cand.cosine, cand.score, cand.fwd_mean, cand.bwd_mean, cand.rank)
        rows = zip(*(c.tolist() for c in cols), cand.direction.astype(np.int16).tolist(), strict=True)
        with cur.copy("COPY bench_candidates FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "int8", "float4", "float4", "float4", "float4", "int8", "int2"])
            for row in rows:
                copy.write_row(row)
        cur.execute("SELECT count(*) FROM bench_candidates")
        return int(cur.fetchone()[0])


def recall_at_1(
    src: np.ndarray, tgt: np.ndarray, approx: KnnResult, exact: KnnResult | None, sample: int, seed: int
) -> tuple[float, float]:
    """Top-1 agreement of approx with exact, forward and backward, on a seeded query sample."""
    rng = np.random.default_rng(seed + 1)
    out = []
    for q, b, a_ids, e_ids in (
        (src, tgt, approx.fwd_ids, None if exact is None else exact.fwd_ids),
        (tgt, src, approx.bwd_ids, None if exact is None else exact.bwd_ids),
    ):
        idx = np.sort(rng.choice(len(q), size=min(sample, len(q)), replace=False))
        truth = e_ids[idx, 0] if e_ids is not None else knn_exact(q[idx], b, 1)[1][:, 0]
        out.append(float(np.mean(a_ids[idx, 0] == truth)))
    return out[0], out[1]


def pair_recall(approx: Candidates, exact: Candidates) -> float:
    """Share of the exact miner's pairs that the approximate miner also returns."""
    base = np.int64(max(int(exact.tgt_idx.max(initial=0)), int(approx.tgt_idx.max(initial=0))) + 1)
    e = exact.src_idx * base + exact.tgt_idx
    a = approx.src_idx * base + approx.tgt_idx
    return float(np.isin(e, a).mean()) if e.size else float("nan")


def run_size(n: int, args: argparse.Namespace, report: Report, with_exact: bool) -> None:
    tile = tuple(args.tile)
    print(f"\n== {n:,} x {n:,}, d={args.d}, k={args.k}, threads={args.threads}, tile={tile} ==", flush=True)
    with report.stage(f"{n}: make data"):
        src, tgt = make_data(n, args.d, args.clusters, args.seed, args.spread, args.pair_noise)
    exact_knn = exact_cand = None
    if with_exact:
        exact_knn, exact_cand = run_exact(n, src, tgt, args, report)

    with report.stage(f"{n}: IVF kNN both ways (train+add+search)"):
        approx_knn = knn_both_ways_approx(src, tgt, args.k, nlist=args.nlist, nprobe=args.nprobe, seed=args.seed)
    with report.stage(f"{n}: margin + max-score (IVF)"):
        approx_cand = mine_candidates(approx_knn, margin=Margin.RATIO, k=args.k, strategy=Strategy.MAX_SCORE)
    ivf_total = report.seconds(f"{n}: IVF kNN both ways (train+add+search)") + report.seconds(
        f"{n}: margin + max-score (IVF)"
    )
    with report.stage(f"{n}: recall sample (exact ground truth)"):
        r_fwd, r_bwd = recall_at_1(src, tgt, approx_knn, exact_knn, args.sample, args.seed)
    print(f"  IVF mining end to end: {ivf_total:.2f} s (target < 60 s at 100k), nprobe={args.nprobe}")
    print(f"  recall@1 vs exact on {args.sample} sampled queries per side: fwd {r_fwd:.4f}, bwd {r_bwd:.4f}")
    if exact_cand is not None:
        found = pair_recall(approx_cand, exact_cand)
        print(f"  IVF candidates: {len(approx_cand):,}; exact pairs also found by IVF: {found:.4f}")


def run_exact(
    n: int, src: np.ndarray, tgt: np.ndarray, args: argparse.Namespace, report: Report
) -> tuple[KnnResult, Candidates]:
    """Exact mining in fp32, bf16 and/or int8 tiles against the fp32 GEMM yardstick; returns the last path's
    output. The low-precision paths are compared row by row with the first path run."""
    tile = tuple(args.tile)
    paths = list(dict.fromkeys(args.compute))
    lowp = {p: (tuple(args.lowp_tile or DEFAULT_TILE[Compute(p)]), _margin(args, p)) for p in paths if p != "fp32"}
    copy = None if args.no_copy else args.copy_dsn
    if copy:
        ensure_database(copy)
    names = {"fp32": "exact kNN both ways"}
    names.update({p: f"exact kNN both ways, {p} tiles {t} (margin {m})" for p, (t, m) in lowp.items()})
    # The yardstick is the faster of two GEMM runs, one before the exact search in its tiling and
    # one after in a large tiling: the stricter bar, and robust to a co-tenant's burst.
    with report.stage(f"{n}: yardstick fp32 GEMM, tiles {tile}"):
        gemm_yardstick(src, tgt, tile)
    knns: dict[str, KnnResult] = {}
    cands: dict[str, Candidates] = {}
    for path in paths:
        with report.stage(f"{n}: {names[path]}"):
            if path == "fp32":
                knns[path] = knn_both_ways(src, tgt, args.k, tile=tile)
            else:
                t, m = lowp[path]
                knns[path] = knn_both_ways_lowp(src, tgt, args.k, compute=path, tile=t, margin=m)
        with report.stage(f"{n}: margin + max-score ({path})"):
            cands[path] = mine_candidates(knns[path], margin=Margin.RATIO, k=args.k, strategy=Strategy.MAX_SCORE)
        if copy:
            with report.stage(f"{n}: COPY candidates ({path})"):
                n_rows = copy_candidates(copy, cands[path])
            print(f"  COPY wrote {n_rows:,} rows")
    for path, (t, _) in lowp.items():
        for extra in args.margins:
            with report.stage(f"{n}: exact kNN both ways, {path} tiles (margin {extra}), sweep"):
                info = knn_both_ways_lowp(src, tgt, args.k, compute=path, tile=t, margin=extra).info
            print(f"    {path} margin {extra}: K = {info.candidates}, rows rescued {info.rescued:,} of {2 * n:,}")
    gemm_tiles = [tile] + ([tuple(args.gemm_tile)] if tuple(args.gemm_tile) != tile else [])
    if len(gemm_tiles) > 1:
        with report.stage(f"{n}: yardstick fp32 GEMM, tiles {gemm_tiles[1]}"):
            gemm_yardstick(src, tgt, gemm_tiles[1])
    gemm = min(report.seconds(f"{n}: yardstick fp32 GEMM, tiles {gt}") for gt in gemm_tiles)
    gflops = 2 * n * n * args.d / gemm / 1e9
    print(f"  yardstick GEMM (best tiling): {gemm:.2f} s ({gflops:.0f} GFLOP/s)")
    what = "kNN + margin + max-score" + (" + COPY" if copy else " (no COPY)")
    for path in paths:
        total = report.seconds(f"{n}: {names[path]}") + report.seconds(f"{n}: margin + max-score ({path})")
        total += report.seconds(f"{n}: COPY candidates ({path})") if copy else 0.0
        target = "1.2" if path == "fp32" else "0.4"
        print(f"  exact mining, {path} ({what}): {total:.2f} s = {total / gemm:.3f} x the GEMM (target <= {target})")
        print(f"  exact candidates ({path}): {len(cands[path]):,}")
    print(f"  units detected: bf16 {bf16_supported()}, int8 {int8_supported()}")
    first = paths[0]
    for path in lowp:
        print(f"  {path} path: {knns[path].info.as_dict()}")
        if path == first:
            continue
        a, b = knns[first], knns[path]
        for side, ia, ib, sa, sb in (
            ("fwd", a.fwd_ids, b.fwd_ids, a.fwd_sims, b.fwd_sims),
            ("bwd", a.bwd_ids, b.bwd_ids, a.bwd_sims, b.bwd_sims),
        ):
            same = float(np.mean(np.all(ia == ib, axis=1)))
            diff = float(np.max(np.abs(sa - sb)))
            print(f"  {path} vs {first} {side}: lists identical {same:.5f} of rows, max |sim diff| {diff:.1e}")
        print(f"  candidate pairs identical: {pair_recall(cands[path], cands[first]):.5f} of the {first} pairs")
    return knns[paths[-1]], cands[paths[-1]]


def _margin(args: argparse.Namespace, path: str) -> int:
    """The candidate margin of a low-precision path: --margin, else the library's default for its arithmetic."""
    return DEFAULT_MARGIN[Compute(path)] if args.margin is None else int(args.margin)


def main() -> None:
    args = ARGS
    assert args is not None
    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    print(f"torch {torch.__version__}, faiss {faiss.__version__}, numpy {np.__version__}, {os.cpu_count()} CPUs")
    print(f"load average at start: {os.getloadavg()}")
    report = Report()
    run_size(args.n, args, report, with_exact=not args.skip_exact)
    if args.big:
        run_size(args.big_n, args, report, with_exact=False)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
