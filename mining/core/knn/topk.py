"""Running top-k of every row and column of similarity tiles, pushed by one compiled pass per tile (numba).

The exact searches' bookkeeping used to be: per tile, row (or segment) maxima, a gather of the hot parts and faiss
heap calls; for bf16 tiles also a conversion to fp32. At the bf16 GEMM's rate that cost about twice the GEMM. Here
one compiled loop reads each tile value once: a vectorised pass per row compares the values (for bf16, order-
preserving int16 keys of their bit patterns; int8 products' int32 values as float32) with the row's heap top and
with every column's heap top, making a mask; then only the flagged values are pushed (binary min-heaps).
``bench/tile_bookkeeping.py`` measures it against the faiss-heap bookkeeping it replaced.

A flag uses the thresholds as they were when the row's mask was made, which can only be lower than the current ones
(heap tops only rise), so a flag may be stale but a value that belongs in a heap is never missed; the push re-checks
against the current top. A value equal to a heap's top is not pushed: a list's K-th value c then bounds every value
left out (v <= c), which is what the bf16 path's proof needs.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

# Values per mask word (the mask is scanned 8 flags at a time as one uint64).
_WORD = 8


class TopK:
    """Running top-k (largest) of ``n`` rows: min-heaps over (n, k) float32 values and int64 ids (-1 = empty).

    Used as the columns' heaps of a tile, the heap tops are mirrored in a contiguous array the mask pass reads:
    ``keys`` (int16 order keys, for bf16 tiles) or ``tops`` (float32, for fp32 and int32 tiles). Feed one TopK from
    one kind of tile: the other mirror is not kept up to date (it would only be low, flagging more values, never
    fewer).
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


def push_int32_tile(tile: np.ndarray, i0: int, j0: int, rows: TopK, cols: TopK | None) -> None:
    """Offer every value of an int32 tile (int8 products) to the heaps of its rows and (if given) of its columns.

    The values are kept as float32, exact while |value| < 2^24 (the int8 path keeps d * qmax^2 below that).

    Args:
        tile: (r, c) int32, C-contiguous; value [a, b] is the product of row i0 + a and column j0 + b.
        i0, j0, rows, cols: as ``push_bf16_tile``.
    """
    _push(tile, np.int32, i0, j0, rows, cols)


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
    if do_rows:
        # The columns' heaps and top mirror, or (one direction) the rows' own as unused stand-ins of the right types.
        other = cols if do_cols and cols is not None else rows
        mirror = other.keys if bf16 else other.tops
        _push_tile(tile, i0, j0, rows.vals, rows.ids, other.vals, other.ids, mirror, other is not rows)
        return
    assert cols is not None  # columns only: push the transposed tile as rows
    mirror = cols.keys if bf16 else cols.tops
    _push_tile(np.ascontiguousarray(tile.T), j0, i0, cols.vals, cols.ids, cols.vals, cols.ids, mirror, False)
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


def _key(x):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled only
    """A tile value's order key: for a bf16 bit pattern (int16) an int16 that sorts as the value; else the value."""
    raise NotImplementedError


def _value(x, ibuf, fbuf):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled only
    """A tile value as float32 (a bf16 bit pattern's upper-half float32 through the scratch buffers)."""
    raise NotImplementedError


def _top(mirror, vals, row, ibuf, fbuf):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled only
    """Heap ``row``'s top in the mirror's terms: its int16 key (int16 mirror) or its value (float32 mirror)."""
    raise NotImplementedError


def _is_bf16_bits(x) -> bool:  # type: ignore[no-untyped-def]  # pragma: no cover - compiled only
    """Whether a numba type is a bf16 bit pattern (int16); int32 tile values are integers to compare as floats."""
    return isinstance(x, types.Integer) and x.bitwidth == 16


@overload(_key, inline="always")
def _key_impl(x):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled only
    if isinstance(x, types.Integer) and x.bitwidth == 32:
        return lambda x: np.float32(x)
    if _is_bf16_bits(x):
        return lambda x: np.int16(x ^ ((x >> np.int16(15)) & np.int16(0x7FFF)))
    return lambda x: x


@overload(_value, inline="always")
def _value_impl(x, ibuf, fbuf):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled only
    if isinstance(x, types.Integer) and x.bitwidth == 32:
        return lambda x, ibuf, fbuf: np.float32(x)
    if _is_bf16_bits(x):

        def bits(x, ibuf, fbuf):  # type: ignore[no-untyped-def]
            ibuf[0] = np.int32(x) << 16
            return fbuf[0]

        return bits
    return lambda x, ibuf, fbuf: x


@overload(_top, inline="always")
def _top_impl(mirror, vals, row, ibuf, fbuf):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled only
    if isinstance(mirror.dtype, types.Integer):

        def key(mirror, vals, row, ibuf, fbuf):  # type: ignore[no-untyped-def]
            fbuf[0] = vals[row, 0]  # bf16-exact: its upper 16 bits are its bf16 bits
            s = np.int16(ibuf[0] >> 16)
            return np.int16(s ^ ((s >> np.int16(15)) & np.int16(0x7FFF)))

        return key
    return lambda mirror, vals, row, ibuf, fbuf: vals[row, 0]


@njit(nogil=True, cache=True, boundscheck=False)
def _push_tile(
    tile: np.ndarray,
    i0: int,
    j0: int,
    fv: np.ndarray,
    fi: np.ndarray,
    bv: np.ndarray,
    bi: np.ndarray,
    mirror: np.ndarray,
    both: bool,
) -> None:  # pragma: no cover - compiled; tested through the push_* functions
    """Offer a tile (int16 bf16 bit patterns, int32 or float32) to its rows' heaps (fv, fi) and, with ``both``, to its
    columns' heaps (bv, bi) whose tops ``mirror`` holds (int16 keys for bf16 tiles, else float32 values)."""
    rows, cols = tile.shape
    padded = (cols + _WORD - 1) // _WORD * _WORD
    mask = np.zeros(padded, np.uint8)
    words = mask.view(np.uint64)
    colm = mirror[j0 : j0 + cols] if both else mirror[:0]
    ibuf = np.zeros(1, np.int32)
    fbuf = ibuf.view(np.float32)
    for r in range(rows):
        row = i0 + r
        line = tile[r]
        rk = _top(mirror, fv, row, ibuf, fbuf)
        if both:
            for c in range(cols):
                key = _key(line[c])
                mask[c] = (key > rk) | (key > colm[c])
        else:
            for c in range(cols):
                mask[c] = _key(line[c]) > rk
        for w in range(padded // _WORD):
            if words[w] == 0:
                continue
            for c in range(w * _WORD, min(w * _WORD + _WORD, cols)):
                if mask[c] == 0:
                    continue
                v = _value(line[c], ibuf, fbuf)
                if v > fv[row, 0]:
                    _replace_top(fv, fi, row, v, j0 + c)
                if both:
                    col = j0 + c
                    if v > bv[col, 0]:
                        _replace_top(bv, bi, col, v, row)
                        colm[c] = _top(mirror, bv, col, ibuf, fbuf)
