"""Sentence alignment inside a matched document pair: dynamic programming over beads (0:1 ... 3:1) whose cost mixes
the cosine of the merged sentences' embeddings with a Gale-Church length term, in linear memory.

Long documents are aligned coarse to fine, as vecalign does: a first pass on merged groups of sentences finds the
path, then the full-resolution pass only fills a band around it, so memory and time grow with n + m, not n * m.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import log_ndtr
from threadpoolctl import ThreadpoolController

BEADS: tuple[tuple[int, int], ...] = ((1, 1), (1, 2), (2, 1), (2, 2), (1, 3), (3, 1), (0, 1), (1, 0))


@dataclass(frozen=True)
class AlignConfig:
    """Costs and search limits (defaults tuned on real manual pages; see bench/document_quality.py)."""

    beads: tuple[tuple[int, int], ...] = BEADS
    skip_cost: float = 0.45  # per sentence left unaligned (0:1, 1:0)
    length_weight: float = 0.05  # weight of the Gale-Church term
    # Per sentence beyond one a side. The merged vector of a weak pair and a near-identical one scores about as well
    # as the two apart, so with a token penalty (0.02) 2:2 beads swallowed the next heading or section number and
    # crossed paragraph boundaries: strict F1 on blocks 0.66 on GIMP manual pages. 0.2 (picked on the manual's
    # training half: 0.02 / 0.05 / 0.1 / 0.2 / 0.4 gave 0.66 / 0.86 / 0.97 / 0.998 / 1.0) still lets a real 1:2 split
    # win over 1:1 + 0:1, whose skip costs 0.45. vecalign scales the cost by the sentence counts for the same reason.
    merge_penalty: float = 0.2
    max_cells: int = 250_000  # above n * m, align coarse to fine
    band: int = 20  # half-width of the fine band around the coarse path (sentences)
    coarse: int = 8  # sentences merged per coarse unit


@dataclass(frozen=True)
class Bead:
    """Source rows [src_start, src_end) align with target rows [tgt_start, tgt_end); cosine of the merged vectors."""

    src_start: int
    src_end: int
    tgt_start: int
    tgt_end: int
    cosine: float


def _prefix_sums(emb: np.ndarray) -> np.ndarray:
    """(n + 1, d) float64: row j is the sum of emb[:j]."""
    return np.vstack([np.zeros((1, emb.shape[1])), np.cumsum(emb, axis=0, dtype=np.float64)])


def _merged(csum: np.ndarray, k: int) -> np.ndarray:
    """Row j: normalised sum of emb[j-k:j] (rows 0..k-1 are unused); (n + 1, d), from csum = _prefix_sums(emb)."""
    n, d = csum.shape[0] - 1, csum.shape[1]
    out = np.zeros((n + 1, d))
    if k > 0 and n >= k:
        out[k:] = csum[k:] - csum[:-k]
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)


def _lengths(lengths: np.ndarray, k: int) -> np.ndarray:
    c = np.concatenate([[0.0], np.cumsum(lengths, dtype=np.float64)])
    out = np.zeros(len(lengths) + 1)
    if len(lengths) >= k:
        out[k:] = c[k:] - c[:-k]
    return out


def _gale_church(ls: np.ndarray, lt: np.ndarray) -> np.ndarray:
    """-log P(|delta|) of the character-length difference under Gale & Church's model (c = 1, s2 = 6.8)."""
    mean = (ls + lt) / 2.0
    delta = (lt - ls) / np.sqrt(6.8 * np.maximum(mean, 1.0))
    return -(math.log(2.0) + log_ndtr(-np.abs(delta)))


def _band_dots(s: np.ndarray, t: np.ndarray, lo: np.ndarray, width: int, chunk_bytes: int = 1 << 25) -> np.ndarray:
    """(n + 1, width) float64: row i holds s[i] . t[lo[i] + w] (t's row index clipped to its last row)."""
    if not lo.any() and width == len(t):
        return s @ t.T  # the full matrix: one GEMM
    out = np.empty((len(s), width))
    step = max(1, chunk_bytes // (8 * width * s.shape[1]))
    for r0 in range(0, len(s), step):
        cols = np.minimum(lo[r0 : r0 + step, None] + np.arange(width), len(t) - 1)
        out[r0 : r0 + step] = np.einsum("rd,rwd->rw", s[r0 : r0 + step], t[cols])
    return out


def _dp(
    src: np.ndarray,
    tgt: np.ndarray,
    slen: np.ndarray,
    tlen: np.ndarray,
    cfg: AlignConfig,
    lo: np.ndarray,
    hi: np.ndarray,
) -> list[tuple[int, int, int, int, float]]:
    """Banded DP; row i covers target columns lo[i]..hi[i] (inclusive, lo non-decreasing). Returns beads as
    (i0, i1, j0, j1, cos).

    Every bead's step cost over the band is computed up front as an (n + 1, width) array (row i, column lo[i] + w);
    the row loop then only adds shifted slices of earlier rows' costs (kept inf-padded, so a slice needs no mask)
    and takes the cheapest bead, first in `cfg.beads` order on ties.
    """
    n, m = len(src), len(tgt)
    csum_s, csum_t = _prefix_sums(src), _prefix_sums(tgt)
    merged_s = {a: _merged(csum_s, a) for a in {a for a, _ in cfg.beads if a}}
    merged_t = {b: _merged(csum_t, b) for b in {b for _, b in cfg.beads if b}}
    len_s = {a: _lengths(slen, a) for a in merged_s}
    len_t = {b: _lengths(tlen, b) for b in merged_t}
    widths = hi - lo + 1
    width = int(widths.max())
    cols = lo[:, None] + np.arange(width)
    active = [(k, a, b) for k, (a, b) in enumerate(cfg.beads) if a]  # 0:b beads: only 0:1, by the scan below
    steps = np.empty((len(active), n + 1, width))
    for x, (_, a, b) in enumerate(active):
        if b == 0:
            steps[x] = cfg.skip_cost * a
            continue
        cos = _band_dots(merged_s[a], merged_t[b], lo, width)
        steps[x] = (
            (1.0 - cos) * (a + b) / 2.0
            + cfg.length_weight * _gale_church(len_s[a][:, None], len_t[b][np.minimum(cols, m)])
            + cfg.merge_penalty * (a + b - 2)
        )
        steps[x][cols < b] = np.inf
    # Row i's cost sits at cost[i, pad:pad + widths[i]]; inf elsewhere, so shifted reads off the band give inf.
    pad = (
        int(
            max(
                max(b for _, b in cfg.beads),
                max((int(np.max(lo[a:] - lo[:-a])) for _, a, _ in active if a <= n), default=0),
            )
        )
        + 1
    )
    cost = np.full((n + 1, width + 2 * pad), np.inf)
    back = np.full((n + 1, width), -1, dtype=np.int8)
    kinds = np.array([k for k, _, _ in active], dtype=np.int8)
    cand = np.empty((len(active), width))
    k01 = cfg.beads.index((0, 1)) if (0, 1) in cfg.beads else -1
    skip_ramp = cfg.skip_cost * np.arange(width)
    lanes = np.arange(width)
    for i in range(n + 1):
        w = int(widths[i])
        if i == 0:
            best = np.full(width, np.inf)
            best[lo[0] + np.arange(width) == 0] = 0.0
            row_back = np.full(width, -1, dtype=np.int8)
        else:
            for x, (_, a, b) in enumerate(active):
                if i < a:
                    cand[x] = np.inf
                    continue
                off = pad + int(lo[i]) - b - int(lo[i - a])
                np.add(cost[i - a, off : off + width], steps[x, i], out=cand[x])
            choice = cand.argmin(axis=0)
            best = cand[choice, lanes]
            row_back = np.where(np.isfinite(best), kinds[choice], -1).astype(np.int8)
        if k01 >= 0 and w > 1:  # insertions chain along the row: a prefix-min scan
            run = np.minimum.accumulate(best[:w] - skip_ramp[:w]) + skip_ramp[:w]
            better = run < best[:w] - 1e-12
            best[:w] = np.where(better, run, best[:w])
            row_back[:w][better] = k01
        cost[i, pad : pad + w] = best[:w]
        back[i, :w] = row_back[:w]
    return _backtrack(back, lo, cfg, merged_s, merged_t, n, m)


def _backtrack(back_rows, lo, cfg, merged_s, merged_t, n, m) -> list[tuple[int, int, int, int, float]]:
    i, j, out = n, m, []
    while i > 0 or j > 0:
        k = int(back_rows[i][j - lo[i]])
        if k < 0:
            raise RuntimeError(f"alignment path broken at ({i}, {j}); widen the band")
        a, b = cfg.beads[k]
        cos = float(merged_t[b][j] @ merged_s[a][i]) if a and b else 0.0
        out.append((i - a, i, j - b, j, cos))
        i, j = i - a, j - b
    return out[::-1]


def _full_band(n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros(n + 1, dtype=np.int64), np.full(n + 1, m, dtype=np.int64)


def _band_around(
    path: list[tuple[int, int, int, int, float]], factor: int, n: int, m: int, width: int
) -> tuple[np.ndarray, np.ndarray]:
    """Rows' column ranges: the coarse path scaled up, widened by `width` on each side."""
    centre = np.zeros(n + 1)
    pts = [(0, 0)] + [(min(n, p[1] * factor), min(m, p[3] * factor)) for p in path]
    xs, ys = np.array([p[0] for p in pts], float), np.array([p[1] for p in pts], float)
    xs[-1], ys[-1] = n, m
    centre = np.interp(np.arange(n + 1), xs, ys)
    lo = np.clip(np.floor(centre - width - factor), 0, m).astype(np.int64)
    hi = np.clip(np.ceil(centre + width + factor), 0, m).astype(np.int64)
    lo[0], hi[-1] = 0, m
    hi = np.maximum.accumulate(hi)
    lo = np.minimum.accumulate(lo[::-1])[::-1]
    return lo, hi


def _group(emb: np.ndarray, lengths: np.ndarray, f: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(emb)
    idx = np.arange(0, n, f)
    sums = np.add.reduceat(emb, idx, axis=0)
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    return np.divide(sums, norms, out=np.zeros_like(sums), where=norms > 0), np.add.reduceat(lengths, idx)


@functools.cache
def _blas() -> ThreadpoolController:
    return ThreadpoolController()


def align(
    src_emb: np.ndarray,
    tgt_emb: np.ndarray,
    src_len: np.ndarray,
    tgt_len: np.ndarray,
    config: AlignConfig | None = None,
) -> list[Bead]:
    """Align two documents' sentences.

    The matrix products here are small (a 50-sentence pair: 50 x 50 x 512), and handing each to a multi-threaded
    BLAS costs more than the product itself (20x slower with 2 threads on a busy 2-core machine), so they run on
    one BLAS thread: a process-wide setting, restored on return.

    Args:
        src_emb, tgt_emb: (n, d) and (m, d) float32 sentence embeddings, rows L2-normalised.
        src_len, tgt_len: (n,) and (m,) character lengths of the sentences.
        config: costs and limits.

    Returns:
        The beads of the best path in order, including 0:1 and 1:0 (insertions and deletions).
    """
    with _blas().limit(limits=1, user_api="blas"):
        return _align(src_emb, tgt_emb, src_len, tgt_len, config or AlignConfig())


def _align(
    src_emb: np.ndarray, tgt_emb: np.ndarray, src_len: np.ndarray, tgt_len: np.ndarray, cfg: AlignConfig
) -> list[Bead]:
    src, tgt = np.asarray(src_emb, dtype=np.float64), np.asarray(tgt_emb, dtype=np.float64)
    slen, tlen = np.asarray(src_len, dtype=np.float64), np.asarray(tgt_len, dtype=np.float64)
    n, m = len(src), len(tgt)
    if n == 0 or m == 0:
        return [Bead(0, n, 0, m, 0.0)] if n or m else []
    if n * m <= cfg.max_cells:
        lo, hi = _full_band(n, m)
    else:
        f = cfg.coarse
        cs, cl = _group(src, slen, f)
        ts, tl = _group(tgt, tlen, f)
        coarse = _align(cs, ts, cl, tl, cfg)
        path = [(b.src_start, b.src_end, b.tgt_start, b.tgt_end, b.cosine) for b in coarse]
        lo, hi = _band_around(path, f, n, m, cfg.band)
    return [Bead(*p) for p in _dp(src, tgt, slen, tlen, cfg, lo, hi)]


def sentence_pairs(beads: list[Bead]) -> list[Bead]:
    """The beads that pair sentences on both sides (drops insertions and deletions)."""
    return [b for b in beads if b.src_end > b.src_start and b.tgt_end > b.tgt_start]


@dataclass(frozen=True)
class AlignScore:
    precision: float
    recall: float
    f1: float


def _prf(correct_p: float, n_pred: int, correct_r: float, n_gold: int) -> AlignScore:
    p = correct_p / n_pred if n_pred else 0.0
    r = correct_r / n_gold if n_gold else 0.0
    return AlignScore(p, r, 2 * p * r / (p + r) if p + r else 0.0)


def score_alignment(pred: list[tuple[range, range]], gold: list[tuple[range, range]]) -> tuple[AlignScore, AlignScore]:
    """Strict (exact bead) and lax (a bead overlapping a gold bead on both sides) P/R/F1 over non-empty beads."""
    pred = [(tuple(s), tuple(t)) for s, t in pred if len(s) and len(t)]
    gold = [(tuple(s), tuple(t)) for s, t in gold if len(s) and len(t)]
    gold_set = set(gold)
    strict = sum(1 for p in pred if p in gold_set)

    def overlaps(x, ys) -> bool:
        return any(set(x[0]) & set(y[0]) and set(x[1]) & set(y[1]) for y in ys)

    lax_p = sum(1 for p in pred if overlaps(p, gold))
    lax_r = sum(1 for g in gold if overlaps(g, pred))
    return _prf(strict, len(pred), strict, len(gold)), _prf(lax_p, len(pred), lax_r, len(gold))
