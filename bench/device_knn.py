"""Exact kNN both ways on a GPU: the app's device path (bf16 tiles and top-K on the device, the proved exact
re-score on the CPU) at n x n, against one bf16 matrix product of the same shape on the same device.

Synthetic data of ``mining_speed.py``. The check: for ``--sample`` random rows a side, the exact top-k computed
directly (fp32 products on the device, the neighbours' similarities in float64 on the CPU) must equal the path's
(ids, and similarities to 1e-6). Issue 18's target: 1M x 1M x 512, k = 4, both ways in under 10 s on one H100.
Not part of the test suite; needs a CUDA device (``--device cpu`` runs it small for a smoke test).

    .venv/bin/python bench/device_knn.py --n 1000000            # on a GPU machine
    .venv/bin/python bench/device_knn.py --n 20000 --device cpu  # smoke test
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.mining_speed import make_data  # noqa: E402
from mining.core.knn.device import DEFAULT_DEVICE_TILE, knn_both_ways_device  # noqa: E402


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--d", type=int, default=512)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--device", default="cuda")
    p.add_argument("--tile", type=int, nargs=2, default=DEFAULT_DEVICE_TILE)
    p.add_argument("--sample", type=int, default=500, help="rows a side checked against a direct exact search")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def bf16_gemm_seconds(src: np.ndarray, tgt: np.ndarray, dev: torch.device, tile: tuple[int, int]) -> float:
    """One bf16 product of the whole shape in the path's tiles on the device (the yardstick)."""
    s = torch.from_numpy(src).to(dev, torch.bfloat16)
    t = torch.from_numpy(tgt).to(dev, torch.bfloat16)
    torch.mm(s[:256], t[:256].T)
    _sync(dev)
    t0 = time.perf_counter()
    for i0 in range(0, len(src), tile[0]):
        for j0 in range(0, len(tgt), tile[1]):
            torch.mm(s[i0 : i0 + tile[0]], t[j0 : j0 + tile[1]].T)
    _sync(dev)
    return time.perf_counter() - t0


def direct_topk(q: np.ndarray, b: np.ndarray, k: int, dev: torch.device) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k of the rows q over b: fp32 products on the device, the chosen similarities in float64."""
    qt, bt = torch.from_numpy(q).to(dev), torch.from_numpy(b).to(dev)
    best_v = torch.full((len(q), 0), -torch.inf, device=dev)
    best_i = torch.empty((len(q), 0), dtype=torch.int64, device=dev)
    for j0 in range(0, len(b), 65536):
        v = torch.cat([best_v, qt @ bt[j0 : j0 + 65536].T], dim=1)
        i = torch.cat([best_i, torch.arange(j0, min(j0 + 65536, len(b)), device=dev).expand(len(q), -1)], dim=1)
        best_v, pos = torch.topk(v, k + 4, dim=1)
        best_i = torch.gather(i, 1, pos)
    ids = best_i.cpu().numpy()
    sims = np.einsum("id,ijd->ij", q.astype(np.float64), b[ids].astype(np.float64))
    order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(sims, order, 1), np.take_along_axis(ids, order, 1)


def main() -> None:
    args = _parse()
    dev = torch.device(args.device)
    print(
        f"torch {torch.__version__}, device {dev}"
        + (f" ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else "")
    )
    src, tgt = make_data(args.n, args.d, max(1, args.n // 100), args.seed)
    knn_both_ways_device(src[:2000], tgt[:2000], args.k, device=dev)  # warm up
    t0 = time.perf_counter()
    res = knn_both_ways_device(src, tgt, args.k, device=dev, tile=tuple(args.tile))
    wall = time.perf_counter() - t0
    gemm = bf16_gemm_seconds(src, tgt, dev, tuple(args.tile))
    print(
        f"{args.n:,} x {args.n:,} x {args.d}, k = {args.k}: exact kNN both ways {wall:.2f} s "
        "(target < 10 s on one H100)"
    )
    print(f"  bf16 products alone on the device: {gemm:.2f} s; the path is {wall / gemm:.2f} x that")
    print(f"  info {res.info.as_dict()}")
    rng = np.random.default_rng(args.seed + 1)
    for name, q, b, sims, ids in (
        ("fwd", src, tgt, res.fwd_sims, res.fwd_ids),
        ("bwd", tgt, src, res.bwd_sims, res.bwd_ids),
    ):
        rows = rng.choice(len(q), min(args.sample, len(q)), replace=False)
        d_sims, d_ids = direct_topk(q[rows], b, args.k, dev)
        same = float(np.mean(np.all(d_ids == ids[rows], axis=1)))
        diff = float(np.abs(d_sims - sims[rows]).max())
        print(f"  {name}: {len(rows)} sampled rows, lists identical {same:.4f}, max |sim diff| {diff:.1e}")


if __name__ == "__main__":
    main()
