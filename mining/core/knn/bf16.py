"""Exact kNN both ways from bfloat16 similarity tiles, re-scored in fp32: the fp32 answer at bf16 speed.

1. **Candidates.** One pass of (ts, tt) similarity tiles as bf16 matrix products (bf16 inputs, fp32
   accumulation, bf16 output: the CPU's bf16 units, 3.7x the fp32 rate here), with one compiled pass per tile
   (``topk.push_bf16_tile``) keeping the running top-K, K = k + ``margin``, of every row and every column.
2. **Re-score.** The exact fp32 inner product of each row with its K candidates; the best k of those.
3. **Proof.** A bf16 tile value v of a pair whose real inner product is s obeys, for the row a and column b,
   |s - v| <= E(a) + 2^-8 |s|, with E(a) = |a| max|e_b| + |e_a| max|b~| + gamma_d |a~| max|b~| (e = x - bf16(x),
   Cauchy-Schwarz on the rounding of the inputs, gamma_d = d 2^-24 / (1 - d 2^-24) the accumulation error, 2^-8
   the rounding of the output). Every non-candidate of a row has v <= c, the row's K-th candidate value, so its
   real similarity is at most h(c) + E with h(c) = c + |c| 2^-8 / (1 - 2^-8). When the k-th re-scored similarity
   (less its own fp32 error) exceeds that, no non-candidate can belong in the top k: the row's k neighbours are
   the fp32 ones. That holds for nearly every row (the bound is about 0.005 at cosine 0.5).
4. **Rescue.** Any other row is searched again: one bf16 product against the whole other side, keeping every
   column whose bf16 value could hide a real similarity >= its k-th re-scored one, all re-scored in fp32 (rows
   with a pathological number of such columns, e.g. thousands of duplicates, fall back to fp32 tiles).

The margin: K = k + 8 by default. Wider lists cost heap work on every tile; narrower ones send more rows to the
rescue pass. On the benchmark's clustered 100k data (k = 4) margin 8 proved all but ~0.1 % of rows (see
bench/mining_speed.py --margins).

Inputs may be float32 or float16 (stored embeddings): the tiles use a bf16 copy of each side (2 bytes a value) and
the re-score reads the given arrays, so nothing is ever held in fp32 whole.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import torch

from mining.core.hw import Compute, Device
from mining.core.knn.common import Progress, empty_result
from mining.core.knn.rescore import candidate_dots
from mining.core.knn.tiles import merge_heaps, run_workers
from mining.core.knn.topk import TopK, push_bf16_tile
from mining.core.types import KnnInfo, KnnResult

logger = logging.getLogger(__name__)

DEFAULT_MARGIN = 8
# (source rows, target rows) per bf16 tile: 2048 x 1024 (8 MB as fp32 with its bf16 twin) runs the bf16 GEMM at a
# better rate than 512 x 2048 and halves the fwd heap calls per value; 0.44 against 0.47-0.50 of the fp32 GEMM at 50k,
# 1 thread (bench/mining_speed.py).
DEFAULT_TILE = (2048, 1024)
# Output rounding of a bf16 value, relative (2^-9 for round-to-nearest; 2^-8 also covers truncation).
_OUT_REL = 2.0**-8
# Absolute slack on top of the bounds (their own float64 evaluation and the fp32 re-score's summation order).
_SLACK = 1e-6
# The rescue pass: query rows per bf16 product, base rows per tile, and the most in-band pairs per query row
# before a chunk falls back to fp32 tiles.
_RESCUE_ROWS = 64
_RESCUE_TILE = 8192
_RESCUE_CAP = 2048
_CHUNK = 4096


def knn_both_ways_bf16(
    src: np.ndarray,
    tgt: np.ndarray,
    k: int,
    *,
    margin: int = DEFAULT_MARGIN,
    tile: tuple[int, int] = DEFAULT_TILE,
    workers: int | None = None,
    progress: Progress | None = None,
) -> KnnResult:
    """Exact top-k in both directions from bf16 tiles, fp32 re-score and a proved candidate list.

    Args:
        src: (n_src, d) float32 or float16, rows L2-normalised (any norm works; the bound uses the norms).
        tgt: (n_tgt, d) float32 or float16, rows L2-normalised.
        k: neighbours per row; clipped to the other side's size.
        margin: extra candidates per row and column in the bf16 pass (K = k + margin).
        tile: (source rows, target rows) per tile; any positive sizes work.
        workers: parallel workers (threads, one core each); default ``torch.get_num_threads()``.
        progress: optional ``progress(done, total)`` callback, in source rows of the bf16 pass.

    Returns:
        KnnResult with fwd (n_src, min(k, n_tgt)) and bwd (n_tgt, min(k, n_src)), similarities in fp32 (those
        of the fp32 path to summation order), ``info`` naming bf16, K and the rescued rows.
    """
    s, t = _check_pair(src, tgt, k)
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    ts, tt = (int(v) for v in tile)
    if ts < 1 or tt < 1:
        raise ValueError(f"tile sizes must be positive, got {tile}")
    n_s, n_t = s.shape[0], t.shape[0]
    kf, kb = min(k, n_t), min(k, n_s)
    width_f, width_b = min(k + margin, n_t), min(k + margin, n_s)
    info = KnnInfo(compute=Compute.BF16, device=Device.CPU, candidates=k + margin)
    if n_s == 0 or n_t == 0:
        (fs, fi), (bs, bi) = empty_result(n_s, kf), empty_result(n_t, kb)
        return KnnResult(fwd_sims=fs, fwd_ids=fi, bwd_sims=bs, bwd_ids=bi, info=info)
    s_side, t_side = _Side.of(s), _Side.of(t)
    (cf, cf_ids), (cb, cb_ids) = _candidates(s_side.bf, t_side.bf, width_f, width_b, ts, tt, workers, progress)
    fwd_sims, fwd_ids, n_f = _finish(s_side, t_side, cf, cf_ids, kf)
    bwd_sims, bwd_ids, n_b = _finish(t_side, s_side, cb, cb_ids, kb)
    if n_f or n_b:
        logger.info("bf16 kNN: %d source and %d target rows rescued (K = %d)", n_f, n_b, k + margin)
    info = KnnInfo(compute=Compute.BF16, device=Device.CPU, candidates=k + margin, rescued=n_f + n_b)
    return KnnResult(fwd_sims=fwd_sims, fwd_ids=fwd_ids, bwd_sims=bwd_sims, bwd_ids=bwd_ids, info=info)


def knn_exact_bf16(
    queries: np.ndarray,
    base: np.ndarray,
    k: int,
    *,
    margin: int = DEFAULT_MARGIN,
    tile: tuple[int, int] = DEFAULT_TILE,
    workers: int | None = None,
    progress: Progress | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k of each query row among the base rows (one direction) from bf16 tiles with the proved re-score.

    The one-direction twin of ``knn_both_ways_bf16`` (same candidates, proof and rescue; only the queries' lists
    are kept): the neighbours and similarities of ``knn_exact`` (fp32 flat search) to 1e-6.

    Args:
        queries: (nq, d) float32 or float16, rows L2-normalised.
        base: (nb, d) float32 or float16, rows L2-normalised.
        k: neighbours per query; clipped to nb.
        margin, tile, workers, progress: as ``knn_both_ways_bf16`` (progress in query rows).

    Returns:
        sims (nq, min(k, nb)) float32 descending and ids (nq, min(k, nb)) int64.
    """
    q, b = _check_pair(queries, base, k)
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    ts, tt = (int(v) for v in tile)
    if ts < 1 or tt < 1:
        raise ValueError(f"tile sizes must be positive, got {tile}")
    kq = min(k, b.shape[0])
    if q.shape[0] == 0 or b.shape[0] == 0:
        return empty_result(q.shape[0], kq)
    q_side, b_side = _Side.of(q), _Side.of(b)
    (cand, cand_ids), _ = _candidates(q_side.bf, b_side.bf, min(k + margin, b.shape[0]), 0, ts, tt, workers, progress)
    sims, ids, rescued = _finish(q_side, b_side, cand, cand_ids, kq)
    if rescued:
        logger.info("bf16 kNN: %d query rows rescued (K = %d)", rescued, k + margin)
    return sims, ids


def _check_pair(src: np.ndarray, tgt: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Validate two (n, d) float16/float32 matrices of one width and k >= 1; C-contiguous (float64 -> float32)."""
    out = []
    for x, name in ((src, "src"), (tgt, "tgt")):
        if not isinstance(x, np.ndarray) or x.ndim != 2:
            raise ValueError(f"{name} must be a 2-d numpy array, got {type(x).__name__} {getattr(x, 'shape', None)}")
        dtype = x.dtype if x.dtype in (np.float16, np.float32) else np.float32
        out.append(np.ascontiguousarray(x, dtype=dtype))
    if out[0].shape[1] != out[1].shape[1]:
        raise ValueError(f"dimension mismatch: {out[0].shape[1]} vs {out[1].shape[1]}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return out[0], out[1]


class _Side:
    """One side: its given rows, their bf16 copy, and the norms the error bound needs (float64)."""

    def __init__(self, x: np.ndarray, bf: torch.Tensor, norm: np.ndarray, err: np.ndarray, bf_norm: np.ndarray):
        self.x, self.bf, self.norm, self.err, self.bf_norm = x, bf, norm, err, bf_norm

    @classmethod
    def of(cls, x: np.ndarray) -> _Side:
        xt = torch.from_numpy(x)
        bf = torch.empty(x.shape, dtype=torch.bfloat16)
        norm, err, bf_norm = (np.empty(x.shape[0]) for _ in range(3))
        # fp32 norms rounded up: a d-term fp32 sum of squares and its square root are within (d + 2) 2^-24 of the
        # real norm (relative), so the bound stays rigorous without converting every value to float64.
        up = 1.0 + (x.shape[1] + 2) * 2.0**-23
        for i0 in range(0, x.shape[0], _CHUNK):
            i1 = min(i0 + _CHUNK, x.shape[0])
            f = xt[i0:i1].to(torch.float32)
            bf[i0:i1] = f.to(torch.bfloat16)
            b = bf[i0:i1].to(torch.float32)
            norm[i0:i1] = torch.linalg.vector_norm(f, dim=1).numpy() * up
            err[i0:i1] = torch.linalg.vector_norm(f - b, dim=1).numpy() * up  # f - b is exact: b is f rounded
            bf_norm[i0:i1] = torch.linalg.vector_norm(b, dim=1).numpy() * up
        return cls(x, bf, norm, err, bf_norm)

    @property
    def d(self) -> int:
        return int(self.x.shape[1])


def _candidates(
    s: torch.Tensor,
    t: torch.Tensor,
    width_f: int,
    width_b: int,
    ts: int,
    tt: int,
    workers: int | None,
    progress: Progress | None,
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Top-K bf16 values and ids of every source row (K = width_f) and target row (width_b), descending.

    Each tile is one bf16 GEMM and one compiled pass over its values (``topk.push_bf16_tile``). With width_b == 0
    only the source rows' lists are kept (one direction; the backward result is then empty).
    """
    n_s, n_t = s.shape[0], t.shape[0]
    n_blocks = -(-n_s // ts)
    workers = max(1, min(int(workers or torch.get_num_threads()), n_blocks))
    fwd = TopK(n_s, width_f)
    bwds = [TopK(n_t, width_b) for _ in range(workers)] if width_b else []

    def run(worker: int, report: Callable[[int], None]) -> None:
        bwd = bwds[worker] if bwds else None
        buf = torch.empty(min(ts, n_s) * min(tt, n_t), dtype=torch.bfloat16)
        for block in range(worker, n_blocks, workers):
            i0, i1 = block * ts, min(block * ts + ts, n_s)
            for j0 in range(0, n_t, tt):
                j1 = min(j0 + tt, n_t)
                tile_t = buf[: (i1 - i0) * (j1 - j0)].view(i1 - i0, j1 - j0)
                torch.mm(s[i0:i1], t[j0:j1].T, out=tile_t)
                push_bf16_tile(tile_t.view(torch.int16).numpy(), i0, j0, fwd, bwd)
            report(i1 - i0)

    run_workers(run, workers, n_s, progress)
    if not bwds:
        return fwd.result(), empty_result(n_t, 0)
    return fwd.result(), merge_heaps([h.result() for h in bwds], width_b)


def _gamma(d: int) -> float:
    """The fp32 accumulation error factor of a d-term inner product, d u / (1 - d u) with u = 2^-24."""
    du = d * 2.0**-24
    return du / (1.0 - du)


def _finish(q: _Side, b: _Side, cand: np.ndarray, cand_ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Re-score each query row's candidates exactly, keep the proved rows' top k, rescue the others.

    Returns sims (nq, k) float32 descending, ids (nq, k) int64 and the number of rescued rows.
    """
    width = cand.shape[1]
    exact = candidate_dots(q.x, b.x, cand_ids)
    order = np.argsort(-exact, axis=1, kind="stable")[:, :k]
    sims, ids = np.take_along_axis(exact, order, 1), np.take_along_axis(cand_ids, order, 1)
    if width >= b.x.shape[0]:
        return sims.astype(np.float32), ids, 0  # every base row is a candidate
    # E(a): the bf16 product's error against the real inner product (the float64 re-score's is below _SLACK).
    gamma = _gamma(q.d)
    err = q.norm * b.err.max() + q.err * b.bf_norm.max() + gamma * q.bf_norm * b.bf_norm.max() + _SLACK
    low_k = sims[:, k - 1] - _SLACK  # the k-th neighbour's real similarity is >= this
    c = cand[:, width - 1].astype(np.float64)
    high_out = c + np.abs(c) * (_OUT_REL / (1.0 - _OUT_REL)) + err  # any non-candidate's is <= this
    rescue = np.flatnonzero(~(low_k > high_out))
    if rescue.size:
        x = low_k[rescue] - err[rescue]
        threshold = x - np.abs(x) * _OUT_REL  # a bf16 value below this cannot hide a similarity >= low_k
        sims[rescue], ids[rescue] = _rescue(q, b, rescue, threshold, k)
    return sims.astype(np.float32), ids, int(rescue.size)


def _rescue(q: _Side, b: _Side, rows: np.ndarray, threshold: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of q's ``rows`` over all of b: every base row whose bf16 value reaches the row's threshold, in fp32."""
    sims, ids = np.empty((rows.size, k), dtype=np.float64), np.empty((rows.size, k), dtype=np.int64)
    bx = torch.from_numpy(b.x)
    for r0 in range(0, rows.size, _RESCUE_ROWS):
        r1 = min(r0 + _RESCUE_ROWS, rows.size)
        chunk = torch.from_numpy(rows[r0:r1])
        qbf = q.bf.index_select(0, chunk)
        thr = torch.from_numpy(threshold[r0:r1].astype(np.float32) - np.float32(1e-7)).unsqueeze(1)
        pr, pc, found = [], [], 0
        for j0 in range(0, b.x.shape[0], _RESCUE_TILE):
            j1 = min(j0 + _RESCUE_TILE, b.x.shape[0])
            v = torch.mm(qbf, b.bf[j0:j1].T).to(torch.float32)
            r, c = torch.nonzero(v >= thr, as_tuple=True)
            pr.append(r)
            pc.append(c + j0)
            found += int(r.numel())
            if found > _RESCUE_CAP * (r1 - r0):
                break
        qx = torch.from_numpy(q.x).index_select(0, chunk).to(torch.float64)
        if found > _RESCUE_CAP * (r1 - r0):
            sims[r0:r1], ids[r0:r1] = _exact_rows(qx, bx, k)
            continue
        r, c = torch.cat(pr), torch.cat(pc)
        exact = (qx.index_select(0, r) * bx.index_select(0, c).to(torch.float64)).sum(1).numpy()
        rn, cn = r.numpy(), c.numpy()
        order = np.lexsort((cn, -exact, rn))  # by row, then similarity descending, then id
        counts = np.bincount(rn, minlength=r1 - r0)
        if counts.min() < k:  # cannot happen (the row's own candidates are in band); be safe, not wrong
            sims[r0:r1], ids[r0:r1] = _exact_rows(qx, bx, k)
            continue
        take = order[(np.cumsum(counts) - counts)[:, None] + np.arange(k)]
        sims[r0:r1], ids[r0:r1] = exact[take], cn[take]
    return sims, ids


def _exact_rows(q: torch.Tensor, b: torch.Tensor, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of the (m, d) float64 rows q over all of b by float64 tiles (the rescue's fallback: rare, small)."""
    best_v = torch.full((q.shape[0], 0), -torch.inf)
    best_i = torch.empty((q.shape[0], 0), dtype=torch.int64)
    for j0 in range(0, b.shape[0], _RESCUE_TILE):
        j1 = min(j0 + _RESCUE_TILE, b.shape[0])
        v = torch.cat([best_v, q @ b[j0:j1].to(torch.float64).T], dim=1)
        i = torch.cat([best_i, torch.arange(j0, j1).expand(q.shape[0], -1)], dim=1)
        best_v, pos = torch.topk(v, min(k, v.shape[1]), dim=1)
        best_i = torch.gather(i, 1, pos)
    return best_v.numpy(), best_i.numpy()
