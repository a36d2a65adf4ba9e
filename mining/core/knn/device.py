"""Exact kNN on a torch device (a CUDA GPU): bf16 similarity tiles and the running top-K of every row and column
kept on the device, then the exact re-score, proof and rescue of ``lowp`` on the CPU.

The candidate pass is plain torch, so it runs on any device; the app takes it where a GPU is visible
(``hw.default_device()``) and the tests run it on the CPU against the fp32 path. Per tile: one bf16 matrix product
(fp32 accumulation; cuBLAS's reduced-precision bf16 reductions are switched off meanwhile, so the error bound of
``lowp`` holds), then ``topk`` of the tile's rows and columns merged into the running lists. The lists hold bf16
values, so a row's K-th value bounds every value left out, as the proof needs; the CPU then re-scores each row's K
candidates exactly and searches again (bf16 on the CPU) any row the proof cannot settle.

Not measured on a GPU yet (no session has been lent one with this path); ``bench/device_knn.py`` measures it
where there is one.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import numpy as np
import torch

from mining.core.hw import Compute, Device
from mining.core.knn.common import Progress, empty_result
from mining.core.knn.lowp import _arith, _check_pair, _check_params, _finish, _Side
from mining.core.types import KnnInfo, KnnResult

logger = logging.getLogger(__name__)

# (source rows, target rows) per device tile: 8192 x 8192 (128 MB of bf16), a guess made without a GPU to tune on
# (larger tiles mean fewer top-k merges; bench/device_knn.py --tile measures others).
DEFAULT_DEVICE_TILE = (8192, 8192)


def knn_both_ways_device(
    src: np.ndarray,
    tgt: np.ndarray,
    k: int,
    *,
    device: str | torch.device = "cuda",
    margin: int | None = None,
    tile: tuple[int, int] = DEFAULT_DEVICE_TILE,
    progress: Progress | None = None,
) -> KnnResult:
    """Exact top-k both ways: the candidate pass in bf16 on ``device``, the proved exact re-score on the CPU.

    Args:
        src: (n_src, d) float32 or float16, rows L2-normalised; tgt: (n_tgt, d) likewise.
        k: neighbours per row; clipped to the other side's size.
        device: the torch device of the candidate pass ("cuda", "cuda:1", "cpu").
        margin: extra candidates per row and column (K = k + margin); default the bf16 path's.
        tile: (source rows, target rows) per tile.
        progress: optional ``progress(done, total)`` callback, in source rows of the candidate pass.

    Returns:
        KnnResult as ``lowp.knn_both_ways_lowp`` (the fp32 neighbours and similarities), ``info`` naming the device.
    """
    return _run(src, tgt, k, device, margin, tile, progress, both=True)


def knn_exact_device(
    queries: np.ndarray,
    base: np.ndarray,
    k: int,
    *,
    device: str | torch.device = "cuda",
    margin: int | None = None,
    tile: tuple[int, int] = DEFAULT_DEVICE_TILE,
    progress: Progress | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k of each query among the base rows, the candidate pass on ``device`` (one direction).

    Returns sims (nq, min(k, nb)) float32 descending and ids (nq, min(k, nb)) int64, as ``knn_exact``.
    """
    res = _run(queries, base, k, device, margin, tile, progress, both=False)
    return res.fwd_sims, res.fwd_ids


def _run(
    src: np.ndarray,
    tgt: np.ndarray,
    k: int,
    device: str | torch.device,
    margin: int | None,
    tile: tuple[int, int],
    progress: Progress | None,
    *,
    both: bool,
) -> KnnResult:
    arith = _arith(Compute.BF16)
    s, t = _check_pair(src, tgt, k)
    margin, (ts, tt) = _check_params(arith, margin, tile)
    dev = torch.device(device)
    where = Device.CUDA if dev.type == "cuda" else Device.CPU
    n_s, n_t = s.shape[0], t.shape[0]
    kf, kb = min(k, n_t), min(k, n_s)
    info = KnnInfo(compute=Compute.BF16, device=where, candidates=k + margin)
    if n_s == 0 or n_t == 0:
        (fs, fi), (bs, bi) = empty_result(n_s, kf), empty_result(n_t, kb if both else 0)
        return KnnResult(fwd_sims=fs, fwd_ids=fi, bwd_sims=bs, bwd_ids=bi, info=info)
    s_side, t_side = _Side.of(s, arith), _Side.of(t, arith)
    width_f, width_b = min(k + margin, n_t), (min(k + margin, n_s) if both else 0)
    with _exact_bf16_sums(dev):
        (cf, cf_ids), (cb, cb_ids) = _candidates(
            s_side.lp.to(dev), t_side.lp.to(dev), width_f, width_b, ts, tt, progress
        )
    fwd_sims, fwd_ids, n_f = _finish(s_side, t_side, cf, cf_ids, kf)
    if both:
        bwd_sims, bwd_ids, n_b = _finish(t_side, s_side, cb, cb_ids, kb)
    else:
        (bwd_sims, bwd_ids), n_b = empty_result(n_t, 0), 0
    if n_f or n_b:
        logger.info("bf16 kNN on %s: %d + %d rows rescued (K = %d)", dev, n_f, n_b, k + margin)
    info = KnnInfo(compute=Compute.BF16, device=where, candidates=k + margin, rescued=n_f + n_b)
    return KnnResult(fwd_sims=fwd_sims, fwd_ids=fwd_ids, bwd_sims=bwd_sims, bwd_ids=bwd_ids, info=info)


@contextlib.contextmanager
def _exact_bf16_sums(dev: torch.device) -> Iterator[None]:
    """On CUDA, bf16 products accumulate in fp32 only (no reduced-precision split-K reductions) meanwhile."""
    if dev.type != "cuda":
        yield
        return
    flags = torch.backends.cuda.matmul
    old = flags.allow_bf16_reduced_precision_reduction
    flags.allow_bf16_reduced_precision_reduction = False
    try:
        yield
    finally:
        flags.allow_bf16_reduced_precision_reduction = old


def _candidates(
    s: torch.Tensor, t: torch.Tensor, width_f: int, width_b: int, ts: int, tt: int, progress: Progress | None
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Top-K bf16 values (as float32) and ids of every source row (width_f) and target row (width_b; 0: none),
    descending, from device tiles; returned as CPU numpy arrays."""
    n_s, n_t, dev = s.shape[0], t.shape[0], s.device
    fwd_v = torch.full((n_s, width_f), -torch.inf, device=dev)
    fwd_i = torch.full((n_s, width_f), -1, dtype=torch.int64, device=dev)
    bwd_v = torch.full((n_t, width_b), -torch.inf, device=dev)
    bwd_i = torch.full((n_t, width_b), -1, dtype=torch.int64, device=dev)
    for i0 in range(0, n_s, ts):
        i1 = min(i0 + ts, n_s)
        for j0 in range(0, n_t, tt):
            j1 = min(j0 + tt, n_t)
            tile = torch.mm(s[i0:i1], t[j0:j1].T).float()  # bf16 values, exact in float32
            fwd_v[i0:i1], fwd_i[i0:i1] = _merge(fwd_v[i0:i1], fwd_i[i0:i1], tile, j0, width_f)
            if width_b:
                bwd_v[j0:j1], bwd_i[j0:j1] = _merge(bwd_v[j0:j1], bwd_i[j0:j1], tile.T, i0, width_b)
        if progress is not None:
            progress(i1, n_s)
    return (fwd_v.cpu().numpy(), fwd_i.cpu().numpy()), (bwd_v.cpu().numpy(), bwd_i.cpu().numpy())


def _merge(
    vals: torch.Tensor, ids: torch.Tensor, tile: torch.Tensor, offset: int, width: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The running top-``width`` of each row merged with the row's values in ``tile`` (ids offset by ``offset``)."""
    tv, ti = torch.topk(tile, min(width, tile.shape[1]), dim=1)
    v, pos = torch.topk(torch.cat([vals, tv], dim=1), width, dim=1)
    return v, torch.gather(torch.cat([ids, ti + offset], dim=1), 1, pos)
