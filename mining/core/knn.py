"""k nearest neighbours by inner product over L2-normalised float32 rows, in both directions.

Three paths:

* ``knn_exact``: one direction with faiss ``IndexFlatIP`` (BLAS block size tuned).
* ``knn_both_ways``: exact, both directions from the SAME similarity tiles: one GEMM per tile,
  then faiss heaps keep the running top-k of the tile's rows and of its columns, so exact
  mining costs about one matrix product instead of two flat searches.
* ``knn_approx`` / ``knn_both_ways_approx``: an IVF-Flat index (one coarse quantizer trained on a
  seeded sample of both sides), searched list by list in big batches (GEMMs) or query by query.

``knn_search`` and ``knn_both`` dispatch on ``KnnMethod``.
"""

from __future__ import annotations

import contextlib
import enum
import io
import logging
import math
from collections.abc import Callable, Iterator

import faiss
import numpy as np
import torch

from mining.core.types import KnnResult

logger = logging.getLogger(__name__)

Progress = Callable[[int, int], None]

# faiss' default database block (1024) leaves ~20 % of the GEMM rate on the table at d = 512.
_BLAS_DATABASE_BS = 16384


class KnnMethod(enum.Enum):
    """Which kNN engine to use."""

    EXACT = "exact"
    IVF = "ivf"


def _check(x: np.ndarray, name: str) -> np.ndarray:
    """Validate a (n, d) matrix and return it as C-contiguous float32 (no copy if already so)."""
    if not isinstance(x, np.ndarray) or x.ndim != 2:
        raise ValueError(f"{name} must be a 2-d numpy array, got {type(x).__name__} {getattr(x, 'shape', None)}")
    return np.ascontiguousarray(x, dtype=np.float32)


def _check_pair(queries: np.ndarray, base: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    q, b = _check(queries, "queries"), _check(base, "base")
    if q.shape[1] != b.shape[1]:
        raise ValueError(f"dimension mismatch: {q.shape[1]} vs {b.shape[1]}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return q, b


def _empty(n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full((n, k), -np.inf, dtype=np.float32), np.full((n, k), -1, dtype=np.int64)


@contextlib.contextmanager
def _blas_block(bs: int) -> Iterator[None]:
    """Temporarily set faiss' BLAS database block size (a process-wide knob)."""
    old = faiss.cvar.distance_compute_blas_database_bs
    faiss.cvar.distance_compute_blas_database_bs = bs
    try:
        yield
    finally:
        faiss.cvar.distance_compute_blas_database_bs = old


def _missing_to_neg_inf(sims: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """faiss marks missing neighbours with id -1 and a sentinel value; make the value -inf."""
    return np.where(ids >= 0, sims, -np.inf).astype(np.float32)


def knn_exact(
    queries: np.ndarray, base: np.ndarray, k: int, *, batch_size: int = 16384, progress: Progress | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Exact k nearest neighbours of each query row among the base rows, by inner product.

    Args:
        queries: (nq, d) float32, rows L2-normalised.
        base: (nb, d) float32, rows L2-normalised.
        k: neighbours per query; clipped to nb.
        batch_size: queries per faiss call (bounds the temporary memory and paces ``progress``).
        progress: optional ``progress(done, total)`` callback, in queries.

    Returns:
        sims (nq, k') float32 descending and ids (nq, k') int64, with k' = min(k, nb).
    """
    q, b = _check_pair(queries, base, k)
    k = min(k, b.shape[0])
    if k == 0 or q.shape[0] == 0:
        return _empty(q.shape[0], k)
    index = faiss.IndexFlatIP(b.shape[1])
    index.add(b)
    sims, ids = _empty(q.shape[0], k)
    with _blas_block(_BLAS_DATABASE_BS):
        for i0 in range(0, q.shape[0], batch_size):
            i1 = min(i0 + batch_size, q.shape[0])
            sims[i0:i1], ids[i0:i1] = index.search(q[i0:i1], k)
            if progress is not None:
                progress(i1, q.shape[0])
    return _missing_to_neg_inf(sims, ids), ids


class _Heaps:
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

    def add_rows(self, rows: np.ndarray, block: np.ndarray, j0: int) -> None:
        """Offer block[r, c] as value of id j0 + c to row rows[r] (rows: sorted unique int64)."""
        vals, ids = self.vals[rows], self.ids[rows]
        self._wrap(vals, ids).addn(block.shape[1], faiss.swig_ptr(block), j0, 0, block.shape[0])
        self.vals[rows], self.ids[rows] = vals, ids

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """Sort every heap (descending) and return (vals, ids)."""
        self._ha.reorder()
        return _missing_to_neg_inf(self.vals, self.ids), self.ids


def knn_both_ways(
    src: np.ndarray,
    tgt: np.ndarray,
    k: int,
    *,
    tile: tuple[int, int] = (512, 2048),
    progress: Progress | None = None,
) -> KnnResult:
    """Exact top-k in both directions from one pass of similarity tiles.

    Each (ts, tt) tile S = src_i @ tgt_j.T is computed once (torch GEMM); its rows go into the
    source heaps (faiss ``addn``, which skips values below the heap top), and its columns into
    the target heaps. Columns whose tile maximum cannot enter their heap are skipped before the
    (transposing) gather, so after the first row blocks the column side costs little.
    Memory: the two heaps plus one tile (ts * tt * 4 bytes, twice).

    Args:
        src: (n_src, d) float32, rows L2-normalised.
        tgt: (n_tgt, d) float32, rows L2-normalised.
        k: neighbours per row; clipped to the other side's size.
        tile: (source rows, target rows) per tile; any positive sizes work.
        progress: optional ``progress(done, total)`` callback, in source rows.

    Returns:
        KnnResult with fwd (n_src, min(k, n_tgt)) and bwd (n_tgt, min(k, n_src)) arrays.
    """
    s, t = _check_pair(src, tgt, k)
    ts, tt = (int(v) for v in tile)
    if ts < 1 or tt < 1:
        raise ValueError(f"tile sizes must be positive, got {tile}")
    n_s, n_t = s.shape[0], t.shape[0]
    fwd = _Heaps(n_s, min(k, n_t))
    bwd = _Heaps(n_t, min(k, n_s))
    if n_s and n_t:
        s_t, t_t = torch.from_numpy(s), torch.from_numpy(t)
        buf = torch.empty(min(ts, n_s) * min(tt, n_t), dtype=torch.float32)
        for i0 in range(0, n_s, ts):
            i1 = min(i0 + ts, n_s)
            for j0 in range(0, n_t, tt):
                j1 = min(j0 + tt, n_t)
                tile_t = buf[: (i1 - i0) * (j1 - j0)].view(i1 - i0, j1 - j0)
                torch.mm(s_t[i0:i1], t_t[j0:j1].T, out=tile_t)
                fwd.add_block(tile_t.numpy(), i0, j0)
                _add_columns(bwd, tile_t, i0, j0)
            if progress is not None:
                progress(i1, n_s)
    fwd_sims, fwd_ids = fwd.result()
    bwd_sims, bwd_ids = bwd.result()
    return KnnResult(fwd_sims=fwd_sims, fwd_ids=fwd_ids, bwd_sims=bwd_sims, bwd_ids=bwd_ids)


def _add_columns(heaps: _Heaps, tile: torch.Tensor, i0: int, j0: int) -> None:
    """Offer the columns of a (rows, cols) tile to target heaps j0:j0+cols (ids i0 + row)."""
    j1 = j0 + tile.shape[1]
    col_max = tile.amax(dim=0).numpy()
    hot = np.flatnonzero(col_max > heaps.kth(j0, j1))
    if hot.size == 0:
        return
    if hot.size > 0.75 * tile.shape[1]:
        heaps.add_block(tile.T.contiguous().numpy(), j0, i0)
        return
    cols = torch.from_numpy(hot)
    block = tile.T.index_select(0, cols).numpy()
    heaps.add_rows(hot + j0, block, i0)


def _nlist_for(n: int) -> int:
    """Default IVF list count: about 4 sqrt(n), a power of two, with >= 39 training points per list."""
    target = 2 ** round(math.log2(max(1.0, 4 * math.sqrt(n))))
    return int(max(1, min(target, n // 39)))


def build_ivf(
    train: np.ndarray, *, nlist: int | None = None, seed: int = 0, max_train: int | None = None
) -> faiss.IndexIVFFlat:
    """Train an empty inner-product IVF-Flat index on a seeded sample of ``train``.

    Args:
        train: (n, d) float32 rows L2-normalised (e.g. both sides stacked).
        nlist: number of inverted lists; default about 4 sqrt(n).
        seed: seeds the training sample and k-means.
        max_train: training sample size; default 64 * nlist.

    Returns:
        A trained, empty ``faiss.IndexIVFFlat`` (METRIC_INNER_PRODUCT).
    """
    x = _check(train, "train")
    nlist = nlist or _nlist_for(x.shape[0])
    max_train = max_train or 64 * nlist
    rng = np.random.default_rng(seed)
    if x.shape[0] > max_train:
        x = x[np.sort(rng.choice(x.shape[0], size=max_train, replace=False))]
    quantizer = faiss.IndexFlatIP(x.shape[1])
    index = faiss.IndexIVFFlat(quantizer, x.shape[1], nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = int(rng.integers(0, 2**31 - 1))
    index.train(x)
    return index


def _search_ivf(
    index: faiss.IndexIVFFlat, q: np.ndarray, k: int, nprobe: int, big_batch: bool, batch_size: int
) -> tuple[np.ndarray, np.ndarray]:
    index.nprobe = nprobe
    if big_batch:
        from faiss.contrib.big_batch_search import big_batch_search

        # big_batch_search prints progress to stdout whatever its verbosity; core code must not print.
        with contextlib.redirect_stdout(io.StringIO()):
            sims, ids = big_batch_search(index, q, k, method="knn_function", verbose=0)
    else:
        sims, ids = _empty(q.shape[0], k)
        for i0 in range(0, q.shape[0], batch_size):
            i1 = min(i0 + batch_size, q.shape[0])
            sims[i0:i1], ids[i0:i1] = index.search(q[i0:i1], k)
    return _missing_to_neg_inf(sims, ids), ids.astype(np.int64)


def knn_approx(
    queries: np.ndarray,
    base: np.ndarray,
    k: int,
    *,
    nlist: int | None = None,
    nprobe: int = 16,
    seed: int = 0,
    big_batch: bool = True,
    batch_size: int = 16384,
    index: faiss.IndexIVFFlat | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Approximate kNN with IVF-Flat: train on a seeded sample of base, add base, search.

    Args:
        queries: (nq, d) float32, rows L2-normalised.
        base: (nb, d) float32, rows L2-normalised.
        k: neighbours per query; clipped to nb.
        nlist: inverted lists (default about 4 sqrt(nb)); ignored when ``index`` is given.
        nprobe: lists visited per query.
        seed: seeds the training sample and k-means.
        big_batch: search list-major with ``faiss.contrib.big_batch_search`` (GEMMs per list).
        batch_size: queries per call when ``big_batch`` is False.
        index: optional trained, EMPTY IVF index to reuse (its quantizer); base is added to it.

    Returns:
        sims (nq, k') float32 descending (-inf where fewer than k' were found), ids (nq, k') int64 (-1 there).
    """
    q, b = _check_pair(queries, base, k)
    k = min(k, b.shape[0])
    if k == 0 or q.shape[0] == 0:
        return _empty(q.shape[0], k)
    if index is None:
        index = build_ivf(b, nlist=nlist, seed=seed)
    elif index.ntotal:
        raise ValueError("index must be empty: base is added to it")
    index.add(b)
    try:
        return _search_ivf(index, q, k, nprobe, big_batch, batch_size)
    finally:
        index.reset()


def knn_both_ways_approx(
    src: np.ndarray,
    tgt: np.ndarray,
    k: int,
    *,
    nlist: int | None = None,
    nprobe: int = 16,
    seed: int = 0,
    big_batch: bool = True,
    progress: Progress | None = None,
) -> KnnResult:
    """Approximate kNN both ways with one IVF quantizer trained on a seeded sample of both sides.

    Only one side's vectors sit in the index at a time, so peak memory is about
    src + tgt + the larger side once more.

    Args:
        src: (n_src, d) float32, rows L2-normalised.
        tgt: (n_tgt, d) float32, rows L2-normalised.
        k, nlist, nprobe, seed, big_batch: as in ``knn_approx`` (nlist default from the smaller side).
        progress: optional ``progress(done, total)`` callback, in directions (out of 2).

    Returns:
        KnnResult (missing neighbours have id -1 and similarity -inf).
    """
    s, t = _check_pair(src, tgt, k)
    rng = np.random.default_rng(seed)
    nlist = nlist or _nlist_for(max(1, min(s.shape[0], t.shape[0])))
    want = 64 * nlist
    take_s = min(s.shape[0], want // 2)
    take_t = min(t.shape[0], want - take_s)
    sample = np.concatenate(
        [
            s[np.sort(rng.choice(s.shape[0], take_s, replace=False))],
            t[np.sort(rng.choice(t.shape[0], take_t, replace=False))],
        ]
    )
    index = build_ivf(sample, nlist=min(nlist, max(1, sample.shape[0] // 39)), seed=seed)
    fwd = knn_approx(s, t, k, nprobe=nprobe, big_batch=big_batch, index=index)
    if progress is not None:
        progress(1, 2)
    bwd = knn_approx(t, s, k, nprobe=nprobe, big_batch=big_batch, index=index)
    if progress is not None:
        progress(2, 2)
    return KnnResult(fwd_sims=fwd[0], fwd_ids=fwd[1], bwd_sims=bwd[0], bwd_ids=bwd[1])


def knn_search(
    queries: np.ndarray, base: np.ndarray, k: int, method: KnnMethod = KnnMethod.EXACT, **params: object
) -> tuple[np.ndarray, np.ndarray]:
    """One-direction kNN by ``method`` (params go to ``knn_exact`` or ``knn_approx``)."""
    if method is KnnMethod.EXACT:
        return knn_exact(queries, base, k, **params)  # type: ignore[arg-type]
    if method is KnnMethod.IVF:
        return knn_approx(queries, base, k, **params)  # type: ignore[arg-type]
    raise TypeError(f"method must be a KnnMethod, got {method!r}")


def knn_both(
    src: np.ndarray, tgt: np.ndarray, k: int, method: KnnMethod = KnnMethod.EXACT, **params: object
) -> KnnResult:
    """Both-direction kNN by ``method`` (params go to ``knn_both_ways`` or ``knn_both_ways_approx``)."""
    if method is KnnMethod.EXACT:
        return knn_both_ways(src, tgt, k, **params)  # type: ignore[arg-type]
    if method is KnnMethod.IVF:
        return knn_both_ways_approx(src, tgt, k, **params)  # type: ignore[arg-type]
    raise TypeError(f"method must be a KnnMethod, got {method!r}")
