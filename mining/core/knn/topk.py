"""Running top-k of every row and column of similarity tiles, pushed by one compiled pass per tile (numba).

The exact searches' bookkeeping used to be: per tile, row (or segment) maxima, a gather of the hot parts and faiss
heap calls; for bf16 tiles also a conversion to fp32. At the bf16 GEMM's rate that cost about twice the GEMM. Here
one compiled loop reads each tile value once: a vectorised pass per row compares the values (for bf16, order-
preserving int16 keys of their bit patterns) with the row's heap top and with every column's heap top, making a
mask; then only the flagged values are pushed (binary min-heaps). ``bench/tile_bookkeeping.py`` measures it against
the faiss-heap bookkeeping it replaced.

A flag uses the thresholds as they were when the row's mask was made, which can only be lower than the current ones
(heap tops only rise), so a flag may be stale but a value that belongs in a heap is never missed; the push re-checks
against the current top. A value equal to a heap's top is not pushed: a list's K-th value c then bounds every value
left out (v <= c), which is what the bf16 path's proof needs.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Values per mask word (the mask is scanned 8 flags at a time as one uint64).
_WORD = 8


class TopK:
    """Running top-k (largest) of ``n`` rows: min-heaps over (n, k) float32 values and int64 ids (-1 = empty).

    Used as the columns' heaps of a tile, the heap tops are mirrored in a contiguous array the mask pass reads:
    ``keys`` (int16 order keys, for bf16 tiles) or ``tops`` (float32, for fp32 tiles). Feed one TopK from one kind
    of tile: the other mirror is not kept up to date (it would only be low, flagging more values, never fewer).
    """

    def __init__(self, n: int, k: int) -> None:
        if n < 0 or k < 0:
            raise ValueError(f"need n >= 0 and k >= 0, got n={n}, k={k}")
        self.vals = np.full((n, k), -np.inf, dtype=np.float32)
        self.ids = np.full((n, k), -1, dtype=np.int64)
        self.keys = _keys_of(self.vals[:, 0]) if k else np.zeros(n, dtype=np.int16)
        self.tops = self.vals[:, 0].copy() if k else np.zeros(n, dtype=np.float32)

    @property
    def k(self) -> int:
        return int(self.vals.shape[1])

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """(n, k) values descending, equal values in id order (-inf / -1 where empty, last); heaps left intact."""
        order = np.lexsort((self.ids, -self.vals), axis=1)
        return np.take_along_axis(self.vals, order, 1), np.take_along_axis(self.ids, order, 1)


def push_bf16_tile(tile_bits: np.ndarray, i0: int, j0: int, rows: TopK, cols: TopK | None) -> None:
    """Offer every value of a bf16 tile to the heaps of its rows and (if given) of its columns.

    Args:
        tile_bits: (r, c) int16, C-contiguous: the bit patterns of a bf16 tile (``tensor.view(torch.int16)``);
            value [a, b] is the similarity of row i0 + a and column j0 + b.
        i0, j0: the first row's and column's number (heap row in ``rows`` / ``cols``, id in the other).
        rows: heaps of the tile's rows (ids are column numbers).
        cols: heaps of the tile's columns (ids are row numbers), or None for one direction.
    """
    _push(tile_bits, np.int16, i0, j0, rows, cols)


def push_f32_tile(tile: np.ndarray, i0: int, j0: int, rows: TopK, cols: TopK | None) -> None:
    """Offer every value of a float32 tile to the heaps of its rows and (if given) of its columns.

    Args:
        tile: (r, c) float32, C-contiguous; value [a, b] is the similarity of row i0 + a and column j0 + b.
        i0, j0, rows, cols: as ``push_bf16_tile``.
    """
    _push(tile, np.float32, i0, j0, rows, cols)


def _push(tile: np.ndarray, dtype: type, i0: int, j0: int, rows: TopK, cols: TopK | None) -> None:
    if tile.dtype != dtype or tile.ndim != 2 or not tile.flags.c_contiguous:
        raise ValueError(f"the tile must be a C-contiguous 2-d {np.dtype(dtype)} array, got {tile.dtype} {tile.shape}")
    r, c = tile.shape
    if i0 < 0 or i0 + r > rows.vals.shape[0] or (cols is not None and (j0 < 0 or j0 + c > cols.vals.shape[0])):
        raise ValueError(f"tile ({r}, {c}) at ({i0}, {j0}) does not fit the heaps")
    do_rows, do_cols = rows.k > 0, cols is not None and cols.k > 0
    if r == 0 or c == 0 or not (do_rows or do_cols):
        return
    bf16 = dtype is np.int16
    if do_rows and do_cols:
        assert cols is not None
        both = _push_both_bf16 if bf16 else _push_both_f32
        both(tile, i0, j0, rows.vals, rows.ids, cols.vals, cols.ids, cols.keys if bf16 else cols.tops)
        return
    one = _push_rows_bf16 if bf16 else _push_rows_f32
    if do_rows:
        one(tile, i0, j0, rows.vals, rows.ids)
        return
    assert cols is not None
    one(np.ascontiguousarray(tile.T), j0, i0, cols.vals, cols.ids)
    if bf16:
        cols.keys[j0 : j0 + c] = _keys_of(cols.vals[j0 : j0 + c, 0])
    else:
        cols.tops[j0 : j0 + c] = cols.vals[j0 : j0 + c, 0]


def _keys_of(tops: np.ndarray) -> np.ndarray:
    """(n,) int16 order keys of bf16-exact float32 values (vectorised twin of the compiled ``_top_key``)."""
    s = (np.ascontiguousarray(tops, dtype=np.float32).view(np.int32) >> 16).astype(np.int16)
    return s ^ ((s >> 15) & np.int16(0x7FFF))


@njit(nogil=True, cache=True, inline="always", boundscheck=False)
def _replace_top(vals: np.ndarray, ids: np.ndarray, row: int, v: float, idx: int) -> None:  # pragma: no cover
    """Replace the top (smallest) of min-heap ``row`` by (v, idx) and sift it down."""
    k = vals.shape[1]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= k:
            break
        if child + 1 < k and vals[row, child + 1] < vals[row, child]:
            child += 1
        if v <= vals[row, child]:
            break
        vals[row, i] = vals[row, child]
        ids[row, i] = ids[row, child]
        i = child
    vals[row, i] = v
    ids[row, i] = idx


@njit(nogil=True, cache=True, inline="always")
def _top_key(vals: np.ndarray, row: int, fbuf: np.ndarray, ibuf: np.ndarray) -> np.int16:  # pragma: no cover
    """The int16 order key of heap ``row``'s top (a bf16-exact float32: its upper 16 bits are its bf16 bits)."""
    fbuf[0] = vals[row, 0]
    s = np.int16(ibuf[0] >> 16)
    return np.int16(s ^ ((s >> np.int16(15)) & np.int16(0x7FFF)))


@njit(nogil=True, cache=True, boundscheck=False)
def _push_both_bf16(
    tile: np.ndarray,
    i0: int,
    j0: int,
    fv: np.ndarray,
    fi: np.ndarray,
    bv: np.ndarray,
    bi: np.ndarray,
    bkeys: np.ndarray,
) -> None:  # pragma: no cover - compiled; tested through the push_* functions
    rows, cols = tile.shape
    padded = (cols + _WORD - 1) // _WORD * _WORD
    mask = np.zeros(padded, np.uint8)
    words = mask.view(np.uint64)
    colkey = bkeys[j0 : j0 + cols]
    ibuf = np.zeros(1, np.int32)
    fbuf = ibuf.view(np.float32)
    for r in range(rows):
        row = i0 + r
        line = tile[r]
        rk = _top_key(fv, row, fbuf, ibuf)
        for c in range(cols):
            s = line[c]
            key = np.int16(s ^ ((s >> np.int16(15)) & np.int16(0x7FFF)))
            mask[c] = (key > rk) | (key > colkey[c])
        for w in range(padded // _WORD):
            if words[w] == 0:
                continue
            for c in range(w * _WORD, min(w * _WORD + _WORD, cols)):
                if mask[c] == 0:
                    continue
                ibuf[0] = np.int32(line[c]) << 16
                v = fbuf[0]
                if v > fv[row, 0]:
                    _replace_top(fv, fi, row, v, j0 + c)
                col = j0 + c
                if v > bv[col, 0]:
                    _replace_top(bv, bi, col, v, row)
                    colkey[c] = _top_key(bv, col, fbuf, ibuf)


@njit(nogil=True, cache=True, boundscheck=False)
def _push_rows_bf16(tile: np.ndarray, i0: int, j0: int, fv: np.ndarray, fi: np.ndarray) -> None:  # pragma: no cover
    rows, cols = tile.shape
    padded = (cols + _WORD - 1) // _WORD * _WORD
    mask = np.zeros(padded, np.uint8)
    words = mask.view(np.uint64)
    ibuf = np.zeros(1, np.int32)
    fbuf = ibuf.view(np.float32)
    for r in range(rows):
        row = i0 + r
        line = tile[r]
        rk = _top_key(fv, row, fbuf, ibuf)
        for c in range(cols):
            s = line[c]
            mask[c] = np.int16(s ^ ((s >> np.int16(15)) & np.int16(0x7FFF))) > rk
        for w in range(padded // _WORD):
            if words[w] == 0:
                continue
            for c in range(w * _WORD, min(w * _WORD + _WORD, cols)):
                if mask[c] == 0:
                    continue
                ibuf[0] = np.int32(line[c]) << 16
                v = fbuf[0]
                if v > fv[row, 0]:
                    _replace_top(fv, fi, row, v, j0 + c)


@njit(nogil=True, cache=True, boundscheck=False)
def _push_both_f32(
    tile: np.ndarray,
    i0: int,
    j0: int,
    fv: np.ndarray,
    fi: np.ndarray,
    bv: np.ndarray,
    bi: np.ndarray,
    btops: np.ndarray,
) -> None:  # pragma: no cover
    rows, cols = tile.shape
    padded = (cols + _WORD - 1) // _WORD * _WORD
    mask = np.zeros(padded, np.uint8)
    words = mask.view(np.uint64)
    coltop = btops[j0 : j0 + cols]
    for r in range(rows):
        row = i0 + r
        line = tile[r]
        rt = fv[row, 0]
        for c in range(cols):
            mask[c] = (line[c] > rt) | (line[c] > coltop[c])
        for w in range(padded // _WORD):
            if words[w] == 0:
                continue
            for c in range(w * _WORD, min(w * _WORD + _WORD, cols)):
                if mask[c] == 0:
                    continue
                v = line[c]
                if v > fv[row, 0]:
                    _replace_top(fv, fi, row, v, j0 + c)
                col = j0 + c
                if v > bv[col, 0]:
                    _replace_top(bv, bi, col, v, row)
                    coltop[c] = bv[col, 0]


@njit(nogil=True, cache=True, boundscheck=False)
def _push_rows_f32(tile: np.ndarray, i0: int, j0: int, fv: np.ndarray, fi: np.ndarray) -> None:  # pragma: no cover
    rows, cols = tile.shape
    padded = (cols + _WORD - 1) // _WORD * _WORD
    mask = np.zeros(padded, np.uint8)
    words = mask.view(np.uint64)
    for r in range(rows):
        row = i0 + r
        line = tile[r]
        rt = fv[row, 0]
        for c in range(cols):
            mask[c] = line[c] > rt
        for w in range(padded // _WORD):
            if words[w] == 0:
                continue
            for c in range(w * _WORD, min(w * _WORD + _WORD, cols)):
                if mask[c] == 0:
                    continue
                v = line[c]
                if v > fv[row, 0]:
                    _replace_top(fv, fi, row, v, j0 + c)
