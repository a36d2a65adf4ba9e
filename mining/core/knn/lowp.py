"""Exact kNN both ways from low-precision similarity tiles (bf16 or int8), re-scored in fp32: the fp32 answer at
the speed of the CPU's bf16 or int8 dot-product units.

1. **Candidates.** One pass of (ts, tt) similarity tiles as low-precision matrix products, with one compiled pass
   per tile (``topk``) keeping the running top-K, K = k + margin, of every row and every column:
   * **bf16**: bf16 inputs, fp32 accumulation, bf16 output (``avx512_bf16`` / ``amx_bf16``: 2.3x the fp32 rate
     on a Zen 4, 3.7x with AMX);
   * **int8**: each side scaled by one factor s (its largest absolute value over qmax, qmax = 127 at d <= 1040)
     and rounded to int8; exact int32 products (``torch._int_mm``: VNNI, 4.7x the fp32 rate and 2x bf16 on a Zen 4).
     One scale per side keeps every tile value comparable with every other (similarity ~ s_a s_b v).
2. **Re-score.** The exact inner product (float64 accumulation) of each row with its K candidates; the best k.
3. **Proof.** With a~, b~ the rounded rows (bf16 values, or s q for int8) and e = x - x~, the real inner product s
   of a and b and the tile value v (in similarity units) obey |s - v| <= E(a) + rel |s| with
   E(a) = |a| max|e_b| + |e_a| max|b~| + gamma |a~| max|b~| (Cauchy-Schwarz on a.e_b + e_a.b~; gamma = d 2^-24 /
   (1 - d 2^-24) the bf16 product's fp32 accumulation, 0 for exact int32 sums; rel = 2^-8 the rounding of a bf16
   output, 0 for int8). Every non-candidate of a row has v <= c, the row's K-th candidate value, so its real
   similarity is at most h(c) + E, h(c) = c + |c| rel / (1 - rel). When the k-th re-scored similarity (less its
   own error) exceeds that, no non-candidate can belong in the top k: the row's k neighbours are the fp32 ones.
   The bound is about 0.005 at cosine 0.5 for bf16 and about 0.03 for int8 at d = 512, so int8 needs the wider
   margin.
4. **Rescue.** Any other row is searched again: one low-precision product against the whole other side, keeping
   every column whose value could hide a real similarity >= its k-th re-scored one, all re-scored exactly (rows
   with a pathological number of such columns, e.g. thousands of duplicates, fall back to float64 tiles).

The margins: K = k + 8 (bf16) or k + 24 (int8) by default. Wider lists cost heap work on every tile; narrower ones
send more rows to the rescue pass (bench/mining_speed.py --margins measures both on clustered 100k data).

Inputs may be float32 or float16 (stored embeddings): the tiles use a bf16 (2 bytes a value) or int8 (1 byte)
copy of each side and the re-score reads the given arrays, so nothing is ever held in fp32 whole.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import torch

from mining.core.hw import Compute, Device
from mining.core.knn.common import Progress, empty_result
from mining.core.knn.rescore import candidate_dots
from mining.core.knn.tiles import tile_pass
from mining.core.knn.topk import TopK, push_bf16_tile, push_int32_tile
from mining.core.types import KnnInfo, KnnResult

logger = logging.getLogger(__name__)

# Absolute slack on top of the bounds (their own float64 evaluation and the re-score's summation order).
_SLACK = 1e-6
# The rescue pass: query rows per product, base rows per tile, and the most in-band pairs per query row before a
# chunk falls back to float64 tiles.
_RESCUE_ROWS = 64
_RESCUE_TILE = 8192
_RESCUE_CAP = 2048
_CHUNK = 4096


@dataclass(frozen=True)
class _Arith:
    """What differs between the bf16 and int8 candidate passes.

    Attributes:
        compute: BF16 or INT8.
        margin: default extra candidates per row and column.
        tile: default (source rows, target rows) per tile.
        out_rel: relative rounding of a tile value (bf16 output) or 0 (exact int32).
        accumulates: whether the product's sum is rounded (bf16: fp32 accumulation) or exact (int8: int32).
        band_slack: subtracted from a rescue threshold in tile units (its own float32 rounding).
    """

    compute: Compute
    margin: int
    tile: tuple[int, int]
    out_rel: float
    accumulates: bool
    band_slack: float


# bf16: 2048 x 1024 tiles (8 MB as fp32 with its bf16 twin) run the bf16 GEMM at a better rate than 512 x 2048 and
# halve the row heap calls per value; margin 8 proves all but ~0.1 % of rows on the benchmark's clustered data.
# int8: the bound is ~6x wider, so the candidate lists are too (margin 24: see bench/mining_speed.py --margins).
_ARITH = {
    Compute.BF16: _Arith(Compute.BF16, 8, (2048, 1024), 2.0**-8, True, 1e-7),
    Compute.INT8: _Arith(Compute.INT8, 24, (2048, 1024), 0.0, False, 1.0),
}
DEFAULT_MARGIN = {c: a.margin for c, a in _ARITH.items()}
DEFAULT_TILE = {c: a.tile for c, a in _ARITH.items()}


def _arith(compute: Compute | str) -> _Arith:
    try:
        return _ARITH[Compute(compute)]
    except (KeyError, ValueError):
        raise ValueError(f"compute must be bf16 or int8 for low-precision tiles, got {compute!r}") from None


def knn_both_ways_lowp(
    src: np.ndarray,
    tgt: np.ndarray,
    k: int,
    *,
    compute: Compute | str = Compute.BF16,
    margin: int | None = None,
    tile: tuple[int, int] | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
) -> KnnResult:
    """Exact top-k in both directions from bf16 or int8 tiles, an exact re-score and a proved candidate list.

    Args:
        src: (n_src, d) float32 or float16, rows L2-normalised (any norm works; the bound uses the norms).
        tgt: (n_tgt, d) float32 or float16, rows L2-normalised.
        k: neighbours per row; clipped to the other side's size.
        compute: the tiles' arithmetic, BF16 or INT8.
        margin: extra candidates per row and column (K = k + margin); default ``DEFAULT_MARGIN[compute]``.
        tile: (source rows, target rows) per tile, any positive sizes; default ``DEFAULT_TILE[compute]``.
        workers: parallel workers (threads, one core each); default ``torch.get_num_threads()``.
        progress: optional ``progress(done, total)`` callback, in source rows of the candidate pass.

    Returns:
        KnnResult with fwd (n_src, min(k, n_tgt)) and bwd (n_tgt, min(k, n_src)), similarities in fp32 (those
        of the fp32 path to summation order), ``info`` naming the arithmetic, K and the rescued rows.
    """
    arith = _arith(compute)
    s, t = _check_pair(src, tgt, k)
    margin, (ts, tt) = _check_params(arith, margin, tile)
    n_s, n_t = s.shape[0], t.shape[0]
    kf, kb = min(k, n_t), min(k, n_s)
    width_f, width_b = min(k + margin, n_t), min(k + margin, n_s)
    if n_s == 0 or n_t == 0:
        (fs, fi), (bs, bi) = empty_result(n_s, kf), empty_result(n_t, kb)
        info = KnnInfo(compute=arith.compute, device=Device.CPU, candidates=k + margin)
        return KnnResult(fwd_sims=fs, fwd_ids=fi, bwd_sims=bs, bwd_ids=bi, info=info)
    s_side, t_side = _Side.of(s, arith), _Side.of(t, arith)
    (cf, cf_ids), (cb, cb_ids) = _candidates(s_side, t_side, width_f, width_b, ts, tt, workers, progress)
    fwd_sims, fwd_ids, n_f = _finish(s_side, t_side, cf, cf_ids, kf)
    bwd_sims, bwd_ids, n_b = _finish(t_side, s_side, cb, cb_ids, kb)
    if n_f or n_b:
        logger.info("%s kNN: %d source and %d target rows rescued (K = %d)", arith.compute.value, n_f, n_b, k + margin)
    info = KnnInfo(compute=arith.compute, device=Device.CPU, candidates=k + margin, rescued=n_f + n_b)
    return KnnResult(fwd_sims=fwd_sims, fwd_ids=fwd_ids, bwd_sims=bwd_sims, bwd_ids=bwd_ids, info=info)


def knn_exact_lowp(
    queries: np.ndarray,
    base: np.ndarray,
    k: int,
    *,
    compute: Compute | str = Compute.BF16,
    margin: int | None = None,
    tile: tuple[int, int] | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k of each query row among the base rows (one direction) from bf16 or int8 tiles, proved.

    The one-direction twin of ``knn_both_ways_lowp`` (same candidates, proof and rescue; only the queries' lists
    are kept): the neighbours and similarities of ``knn_exact`` (fp32 flat search) to 1e-6.

    Args:
        queries: (nq, d) float32 or float16, rows L2-normalised.
        base: (nb, d) float32 or float16, rows L2-normalised.
        k: neighbours per query; clipped to nb.
        compute, margin, tile, workers, progress: as ``knn_both_ways_lowp`` (progress in query rows).

    Returns:
        sims (nq, min(k, nb)) float32 descending and ids (nq, min(k, nb)) int64.
    """
    arith = _arith(compute)
    q, b = _check_pair(queries, base, k)
    margin, (ts, tt) = _check_params(arith, margin, tile)
    kq = min(k, b.shape[0])
    if q.shape[0] == 0 or b.shape[0] == 0:
        return empty_result(q.shape[0], kq)
    q_side, b_side = _Side.of(q, arith), _Side.of(b, arith)
    (cand, cand_ids), _ = _candidates(q_side, b_side, min(k + margin, b.shape[0]), 0, ts, tt, workers, progress)
    sims, ids, rescued = _finish(q_side, b_side, cand, cand_ids, kq)
    if rescued:
        logger.info("%s kNN: %d query rows rescued (K = %d)", arith.compute.value, rescued, k + margin)
    return sims, ids


def _check_params(arith: _Arith, margin: int | None, tile: tuple[int, int] | None) -> tuple[int, tuple[int, int]]:
    """The margin and tile to use (defaults of the arithmetic), validated."""
    margin = arith.margin if margin is None else int(margin)
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    ts, tt = (int(v) for v in (tile or arith.tile))
    if ts < 1 or tt < 1:
        raise ValueError(f"tile sizes must be positive, got {tile}")
    return margin, (ts, tt)


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


def int8_levels(d: int) -> int:
    """The largest int8 magnitude used at dimension d: 127, or less where d * qmax^2 would reach 2^24 (tile values
    are kept as float32 in the heaps, exact only below that)."""
    return max(1, min(127, math.isqrt((2**24 - 1) // max(int(d), 1))))


class _Side:
    """One side: its given rows, their low-precision copy, its scale (similarity = scale_a scale_b tile value), and
    the norms the error bound needs (float64): |x|, |x - x~| and |x~| (x~ the rounded row in similarity units)."""

    def __init__(
        self,
        x: np.ndarray,
        arith: _Arith,
        lp: torch.Tensor,
        scale: float,
        norm: np.ndarray,
        err: np.ndarray,
        lp_norm: np.ndarray,
    ):
        self.x, self.arith, self.lp, self.scale = x, arith, lp, scale
        self.norm, self.err, self.lp_norm = norm, err, lp_norm

    @classmethod
    def of(cls, x: np.ndarray, arith: _Arith) -> _Side:
        xt = torch.from_numpy(x)
        norm, err, lp_norm = (np.empty(x.shape[0]) for _ in range(3))
        if arith.compute is Compute.INT8:
            qmax = int8_levels(x.shape[1])
            # the side's largest |value|, a chunk at a time (no full-size copy)
            chunks = range(0, x.shape[0], _CHUNK) if x.size else range(0)
            top = max((float(xt[i0 : i0 + _CHUNK].abs().max()) for i0 in chunks), default=0.0)
            scale = top / qmax if top > 0 else 1.0
            lp = torch.empty(x.shape, dtype=torch.int8)
            for i0 in range(0, x.shape[0], _CHUNK):
                i1 = min(i0 + _CHUNK, x.shape[0])
                f = xt[i0:i1].to(torch.float64)
                q = torch.round(f / scale).clamp_(-qmax, qmax)
                lp[i0:i1] = q.to(torch.int8)
                back = q * scale
                # float64 norms; their own rounding (~1e-16 relative) is far inside _SLACK
                norm[i0:i1] = torch.linalg.vector_norm(f, dim=1).numpy()
                err[i0:i1] = torch.linalg.vector_norm(f - back, dim=1).numpy()
                lp_norm[i0:i1] = torch.linalg.vector_norm(back, dim=1).numpy()
            return cls(x, arith, lp, scale, norm, err, lp_norm)
        bf = torch.empty(x.shape, dtype=torch.bfloat16)
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
            lp_norm[i0:i1] = torch.linalg.vector_norm(b, dim=1).numpy() * up
        return cls(x, arith, bf, 1.0, norm, err, lp_norm)

    @property
    def d(self) -> int:
        return int(self.x.shape[1])


def _product(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    """out = a b^T in the sides' arithmetic (bf16 with fp32 accumulation, or int8 with exact int32 sums)."""
    if a.dtype == torch.int8:
        torch._int_mm(a, b.T, out=out)
    else:
        torch.mm(a, b.T, out=out)


def _candidates(
    s: _Side,
    t: _Side,
    width_f: int,
    width_b: int,
    ts: int,
    tt: int,
    workers: int | None,
    progress: Progress | None,
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Top-K tile values (in tile units) and ids of every source row (K = width_f) and target row (width_b),
    descending: ``tiles.tile_pass`` with the sides' low-precision product and the matching compiled push.
    With width_b == 0 only the source rows' lists are kept (one direction; the backward result is then empty).
    """
    if s.arith.compute is Compute.INT8:
        out_dtype, push = torch.int32, _push_int32
    else:
        out_dtype, push = torch.bfloat16, _push_bf16
    return tile_pass(
        s.lp, t.lp, width_f, width_b, (ts, tt), workers, progress, out_dtype=out_dtype, product=_product, push=push
    )


def _push_int32(tile: torch.Tensor, i0: int, j0: int, rows: TopK, cols: TopK | None) -> None:
    push_int32_tile(tile.numpy(), i0, j0, rows, cols)


def _push_bf16(tile: torch.Tensor, i0: int, j0: int, rows: TopK, cols: TopK | None) -> None:
    push_bf16_tile(tile.view(torch.int16).numpy(), i0, j0, rows, cols)


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
    arith = q.arith
    # E(a): the tile value's error against the real inner product (the float64 re-score's is below _SLACK).
    gamma = _gamma(q.d) if arith.accumulates else 0.0
    b_lp = b.lp_norm.max()
    err = q.norm * b.err.max() + q.err * b_lp + gamma * q.lp_norm * b_lp + _SLACK
    low_k = sims[:, k - 1] - _SLACK  # the k-th neighbour's real similarity is >= this
    c = cand[:, width - 1].astype(np.float64) * (q.scale * b.scale)
    rel = arith.out_rel
    high_out = c + np.abs(c) * (rel / (1.0 - rel)) + err  # any non-candidate's is <= this
    rescue = np.flatnonzero(~(low_k > high_out))
    if rescue.size:
        x = low_k[rescue] - err[rescue]
        threshold = x - np.abs(x) * rel  # a tile value below this cannot hide a similarity >= low_k
        sims[rescue], ids[rescue] = _rescue(q, b, rescue, threshold, k)
    return sims.astype(np.float32), ids, int(rescue.size)


def _rescue(q: _Side, b: _Side, rows: np.ndarray, threshold: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of q's ``rows`` over all of b: every base row whose tile value reaches the row's threshold (similarity
    units), re-scored in float64."""
    sims, ids = np.empty((rows.size, k), dtype=np.float64), np.empty((rows.size, k), dtype=np.int64)
    bx = torch.from_numpy(b.x)
    units = q.scale * b.scale  # similarity per tile unit
    for r0 in range(0, rows.size, _RESCUE_ROWS):
        r1 = min(r0 + _RESCUE_ROWS, rows.size)
        chunk = torch.from_numpy(rows[r0:r1])
        qlp = q.lp.index_select(0, chunk)
        thr = (threshold[r0:r1] / units).astype(np.float32) - np.float32(q.arith.band_slack)
        thr_t = torch.from_numpy(thr).unsqueeze(1)
        pr, pc, found = [], [], 0
        for j0 in range(0, b.x.shape[0], _RESCUE_TILE):
            j1 = min(j0 + _RESCUE_TILE, b.x.shape[0])
            v = torch.empty((r1 - r0, j1 - j0), dtype=torch.int32 if qlp.dtype == torch.int8 else torch.bfloat16)
            _product(qlp, b.lp[j0:j1], v)
            r, c = torch.nonzero(v.to(torch.float32) >= thr_t, as_tuple=True)
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
