"""The exact searches' tile bookkeeping before ``mining/core/knn/topk.py``: faiss min-heaps fed per tile.

Kept only as the baseline of ``bench/tile_bookkeeping.py`` (the code of mining/core/knn/tiles.py at 5c410fd):
``add_rows`` was the fp32 path's (row maxima, a gather of the hot rows, faiss ``addn``), ``add_segments`` the bf16
path's (the tile converted to fp32, segment maxima, hot segments gathered into faiss heaps).
"""

from __future__ import annotations

import faiss
import numpy as np
import torch

from mining.core.knn.common import missing_to_neg_inf


class Heaps:
    """Running top-k (largest) of ``n`` rows, stored as faiss min-heaps over numpy arrays."""

    def __init__(self, n: int, k: int) -> None:
        self.vals = np.empty((n, k), dtype=np.float32)
        self.ids = np.empty((n, k), dtype=np.int64)
        self._ha = self._wrap(self.vals, self.ids)
        self._ha.heapify()

    @staticmethod
    def _wrap(vals: np.ndarray, ids: np.ndarray) -> faiss.float_minheap_array_t:
        ha = faiss.float_minheap_array_t()
        ha.nh, ha.k = vals.shape
        ha.val = faiss.swig_ptr(vals)
        ha.ids = faiss.swig_ptr(ids)
        return ha

    def kth(self, i0: int, i1: int) -> np.ndarray:
        """(i1 - i0,) the current k-th best value of rows i0:i1 (the heap tops)."""
        return self.vals[i0:i1, 0]

    def add_block(self, block: np.ndarray, i0: int, j0: int) -> None:
        """Offer block[r, c] (C-contiguous float32) as value of id j0 + c to row i0 + r."""
        self._ha.addn(block.shape[1], faiss.swig_ptr(block), j0, i0, block.shape[0])

    def add_subset(self, rows: np.ndarray, block: np.ndarray, ids: np.ndarray) -> None:
        """Offer block[r, c] (C-contiguous float32) as value of id ids[c] to row rows[r].

        rows: (m,) int64 distinct row numbers; ids: (block.shape[1],) int64 contiguous.
        """
        self._ha.addn_query_subset_with_ids(
            rows.shape[0], faiss.swig_ptr(rows), block.shape[1], faiss.swig_ptr(block), faiss.swig_ptr(ids), 0
        )

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """Sort every heap (descending) and return (vals, ids)."""
        self._ha.reorder()
        return missing_to_neg_inf(self.vals, self.ids), self.ids


def _as_f32(t: torch.Tensor) -> np.ndarray:
    """A C-contiguous float32 numpy copy (or view, if already so) of a tensor."""
    return t.to(torch.float32).contiguous().numpy()


def add_rows(heaps: Heaps, tile: torch.Tensor, i0: int, ids: np.ndarray) -> None:
    """Offer row r of a (rows, cols) tile (or a transposed view) to heap i0 + r, as ids[c].

    The tile may be float32 or bfloat16 (offered as the float32 of its values). Rows whose maximum cannot
    beat their heap's k-th value are skipped: once the heaps have seen a few tiles, most rows are, so the
    top-k costs one max pass plus a small gather.
    """
    i1 = i0 + tile.shape[0]
    row_max = tile.amax(dim=1).to(torch.float32).numpy()
    hot = np.flatnonzero(row_max > heaps.kth(i0, i1))
    if hot.size == 0:
        return
    if hot.size == tile.shape[0]:
        heaps.add_block(_as_f32(tile), i0, int(ids[0]))
        return
    # Gathering along the tile's contiguous axis, then transposing the small result, is 2-3x
    # faster than gathering strided rows of a transposed view.
    rows = torch.from_numpy(hot)
    block = tile.index_select(0, rows) if tile.is_contiguous() else tile.T.index_select(1, rows).T
    heaps.add_subset(hot + i0, _as_f32(block), ids)


def add_segments(heaps: Heaps, tile: torch.Tensor, i0: int, ids: np.ndarray, seg: int, *, columns: bool) -> None:
    """Offer a float32 (rows, cols) tile to the heaps of its rows (``columns`` False) or of its columns (True).

    Like ``add_rows`` but the skip test runs per segment of ``seg`` values: a heap row then only gathers the
    segments whose maximum can enter it, not its whole line of the tile. A line receives about k ln(n / k)
    new entries over a search, each costing one gathered segment, so short segments save most of the gather
    and conversion work once the GEMM itself is cheap (bf16).

    Args:
        heaps: heaps of the tile's rows (i0 + r) or, with ``columns``, of its columns (i0 + c).
        tile: (rows, cols) C-contiguous float32.
        i0: heap row of the first line.
        ids: ids of the other axis (cols, or rows with ``columns``), int64 contiguous.
        seg: segment length along the other axis.
    """
    rows, cols = tile.shape
    n_lines, n = (cols, rows) if columns else (rows, cols)
    full, rest = divmod(n, seg)
    # (segments, lines) maxima in one pass over the tile (a short last segment separately).
    if columns:
        seg_max = [tile[: full * seg].view(full, seg, cols).amax(dim=1)] if full else []
        if rest:
            seg_max.append(tile[full * seg :].amax(dim=0, keepdim=True))
    else:
        seg_max = [tile[:, : full * seg].view(rows, full, seg).amax(dim=2).T] if full else []
        if rest:
            seg_max.append(tile[:, full * seg :].amax(dim=1, keepdim=True).T)
    maxima = torch.cat(seg_max).numpy() if len(seg_max) > 1 else seg_max[0].numpy()
    kth = heaps.kth(i0, i0 + n_lines)  # a live view: sees each segment's updates
    for b in np.flatnonzero((maxima > kth).any(axis=1)):
        c0, c1 = b * seg, min(b * seg + seg, n)
        hot = np.flatnonzero(maxima[b] > kth)
        if hot.size == 0:
            continue
        lines = torch.from_numpy(hot)
        # Columns are gathered along the tile's contiguous axis, then the small result transposed.
        block = tile[c0:c1].index_select(1, lines).T if columns else tile[:, c0:c1].index_select(0, lines)
        heaps.add_subset(hot + i0, block.contiguous().numpy(), ids[c0:c1])
