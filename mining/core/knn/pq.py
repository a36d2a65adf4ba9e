"""Compressed index shards: IVF + PQ codes (faiss), searched for candidates that are re-scored exactly.

A run past some ten million sentences a side cannot keep float32 index shards (d x 4 bytes a row) where its searches
run. As the field's large mining runs do (CCMatrix, stopes for NLLB: ``OPQ64,IVF65536,PQ64``), one coarse quantizer
and one set of PQ codebooks are trained once on a seeded sample of both sides; every index shard is a copy of that
trained, empty index filled with its rows (``m`` bytes a row, 64 by default, plus the 8-byte id), so shards are
filled in parallel, a query visits the same lists in every shard as in one index, and shards merge into one.

A search returns each query's ``k_cand`` best candidates by the compressed scores; ``rescore_topk`` then computes
their inner products exactly (float64 accumulation of the stored float16-valued rows, as the exact path's re-score
does) and keeps the top k. So every listed similarity, and every neighbourhood mean made of them, is exact; what the
compression can lose is a true neighbour that is not among the ``k_cand`` candidates (an IVF miss: its list was not
among the ``nprobe`` visited; or a PQ miss: its compressed score ranked below ``k_cand`` others). A missed neighbour
can only lower a neighbourhood mean (the k best of fewer rows). Both are measured against exact search (tests and
``bench/scale_pq.py``).

The choice of library: faiss' ``index_factory`` builds and trains the chain (k-means coarse quantizer, residual
PQ; an OPQ rotation where a factory string asks for one) in one tested piece, the library the exact and IVF-Flat
paths already use; only the pre-assignment (the queries' lists computed once for every shard) and the exact
re-score are ours.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import faiss
import numpy as np

from mining.core.enums import IndexStore  # noqa: F401  (re-exported: its old home)
from mining.core.knn.common import BLAS_DATABASE_BS, blas_block, check_matrix, empty_result, missing_to_neg_inf
from mining.core.knn.rescore import candidate_dots

__all__ = [
    "IndexStore",
    "PQ_DEFAULT_M",
    "PQ_TRAIN_PER_LIST",
    "PqAssign",
    "pq_assign",
    "pq_code_bytes",
    "pq_factory",
    "pq_fit_m",
    "pq_fill_shard",
    "pq_merge",
    "pq_search_shard",
    "RowGather",
    "gather_rows",
    "pq_train",
    "rescore_topk",
]


# Bytes of PQ code a row (64 sub-quantizers of 8 bits), as CCMatrix and stopes use at d = 1024.
PQ_DEFAULT_M = 64
# k-means points per inverted list for the coarse quantizer (as the IVF-Flat path); the PQ codebooks and the OPQ
# rotation train on (a part of) the same sample.
PQ_TRAIN_PER_LIST = 64
# OPQ rotation: trained on at most this many points (faiss' own default is 256 x 256).
_OPQ_TRAIN = 65536
_QUERY_BATCH = 16384


def pq_factory(d: int, nlist: int, m: int = PQ_DEFAULT_M) -> str:
    """The faiss index_factory string of a compressed index: ``IVF{nlist},PQ{m}`` (m bytes a row).

    No OPQ rotation: trained on one thread it took over 5 minutes on a 20k sample at d = 512 (load 10, 2 cores),
    and the exact re-score of the candidates recovers what the rotation would add to the compressed scores."""
    if m < 1 or d % m:
        raise ValueError(f"the PQ code size m = {m} must divide the dimension d = {d}")
    if nlist < 1:
        raise ValueError(f"nlist must be >= 1, got {nlist}")
    return f"IVF{nlist},PQ{m}"


def pq_fit_m(d: int, m: int) -> int:
    """The largest PQ code size <= m that divides d (64 at d = 512 or 1024; 48 at d = 96 for m = 64)."""
    if d < 1 or m < 1:
        raise ValueError(f"need d >= 1 and m >= 1, got d={d}, m={m}")
    return max(c for c in range(1, min(m, d) + 1) if d % c == 0)


def pq_code_bytes(index: faiss.Index) -> int:
    """Bytes an index shard stores per row: the PQ code plus the 8-byte id of the inverted lists."""
    return int(faiss.extract_index_ivf(index).code_size) + 8


def pq_train(sample: np.ndarray, nlist: int, *, m: int = PQ_DEFAULT_M, seed: int = 0) -> faiss.Index:
    """A trained, EMPTY inner-product OPQ + IVF + PQ index (what every index shard of a run is a copy of).

    Args:
        sample: (n, d) float32 rows L2-normalised, a seeded sample of both sides (at least 39 rows a list and
            256 rows for the PQ codebooks).
        nlist: inverted lists; lowered to n // 39 when the sample is small.
        m: bytes of PQ code a row; must divide d.
        seed: seeds k-means (quantizer, codebooks) and the OPQ rotation.
    """
    x = check_matrix(sample, "sample")
    n, d = x.shape
    if n < 256:
        raise ValueError(f"a compressed index needs at least 256 training rows (the PQ codebooks), got {n}")
    nlist = max(1, min(int(nlist), n // 39 or 1))
    index = faiss.index_factory(d, pq_factory(d, nlist, m), faiss.METRIC_INNER_PRODUCT)
    pre = faiss.downcast_index(index)  # a view: `index` keeps the object alive
    if isinstance(pre, faiss.IndexPreTransform):  # an OPQ rotation, where a factory string asks for one
        for i in range(pre.chain.size()):
            vt = faiss.downcast_VectorTransform(pre.chain.at(i))
            if isinstance(vt, faiss.OPQMatrix):
                vt.max_train_points = _OPQ_TRAIN
    ivf = faiss.downcast_index(faiss.extract_index_ivf(index))
    ivf.cp.seed = int(seed) + 1
    ivf.pq.cp.seed = int(seed) + 2
    ivf.do_polysemous_training = False  # the factory's default: minutes at M = 64, and only Hamming search uses it
    with blas_block(BLAS_DATABASE_BS):
        index.train(x)
    return index


def pq_fill_shard(trained: faiss.Index, base: np.ndarray, offset: int) -> faiss.Index:
    """A copy of the trained, empty `trained` index holding `base` (nb, d) under global ids offset..offset+nb-1."""
    if trained.ntotal:
        raise ValueError("the trained index must be empty")
    b = check_matrix(base, "base")
    if b.shape[1] != trained.d:
        raise ValueError(f"dimension mismatch: {b.shape[1]} vs {trained.d}")
    index = faiss.clone_index(trained)
    with blas_block(BLAS_DATABASE_BS):
        index.add_with_ids(b, np.arange(offset, offset + b.shape[0], dtype=np.int64))
    return index


def pq_merge(shards: Sequence[faiss.Index]) -> faiss.Index:
    """One index holding every row of `shards` (copies of one trained index): a group of shards searched at once."""
    if not shards:
        raise ValueError("no index shards to merge")
    out = faiss.clone_index(shards[0])
    ivf = faiss.extract_index_ivf(out)
    for other in shards[1:]:
        ivf.merge_from(faiss.clone_index(faiss.extract_index_ivf(other)), 0)
    out.ntotal = ivf.ntotal
    return out


class PqAssign:
    """Queries in the index's rotated space and their `nprobe` nearest lists: computed once, searched in every
    shard (every shard shares the rotation and the quantizer)."""

    def __init__(self, rotated: np.ndarray, dis: np.ndarray, lists: np.ndarray) -> None:
        self.rotated, self.dis, self.lists = rotated, dis, lists


def pq_assign(index: faiss.Index, queries: np.ndarray, nprobe: int) -> PqAssign:
    """Rotate the queries (OPQ) and find their `nprobe` nearest inverted lists under the shared quantizer."""
    q = check_matrix(queries, "queries")
    if q.shape[1] != index.d:
        raise ValueError(f"dimension mismatch: {q.shape[1]} vs {index.d}")
    rotated = q
    pre = faiss.downcast_index(index)
    if isinstance(pre, faiss.IndexPreTransform):  # a rotation (OPQ), as the index applies it when it searches
        for i in range(pre.chain.size()):
            rotated = faiss.downcast_VectorTransform(pre.chain.at(i)).apply(rotated)
    ivf = faiss.extract_index_ivf(index)
    p = max(1, min(int(nprobe), ivf.nlist))
    xt = np.ascontiguousarray(rotated, dtype=np.float32)
    if not len(xt):
        return PqAssign(xt, np.zeros((0, p), np.float32), np.zeros((0, p), np.int64))
    with blas_block(BLAS_DATABASE_BS):
        dis, lists = ivf.quantizer.search(xt, p)
    return PqAssign(xt, dis, lists)


def pq_search_shard(
    index: faiss.Index, queries: np.ndarray, k_cand: int, nprobe: int, *, assign: PqAssign | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Each query's `k_cand` best candidates in one filled compressed index (shard or group) by compressed score.

    Returns:
        approximate sims (nq, k_cand) float32 (-inf where missing) and global ids (nq, k_cand) int64 (-1 there).
    """
    if k_cand < 1:
        raise ValueError(f"k_cand must be >= 1, got {k_cand}")
    if assign is None:
        assign = pq_assign(index, queries, nprobe)
    ivf = faiss.extract_index_ivf(index)
    p = max(1, min(int(nprobe), ivf.nlist, assign.lists.shape[1]))
    ivf.nprobe = p
    n = assign.rotated.shape[0]
    sims, ids = empty_result(n, k_cand)
    for i0 in range(0, n, _QUERY_BATCH):
        i1 = min(i0 + _QUERY_BATCH, n)
        sims[i0:i1], ids[i0:i1] = ivf.search_preassigned(
            np.ascontiguousarray(assign.rotated[i0:i1]),
            k_cand,
            np.ascontiguousarray(assign.lists[i0:i1, :p]),
            np.ascontiguousarray(assign.dis[i0:i1, :p]),
        )
    return missing_to_neg_inf(sims, ids), ids


RowGather = Callable[[np.ndarray], np.ndarray]


def gather_rows(parts: Sequence[tuple[int, np.ndarray]]) -> RowGather:
    """A `RowGather` over row blocks [(offset, rows (n_i, d)), ...] holding global rows offset..offset+n_i-1 each
    (e.g. read-only memory maps of stored float16 shards: only the rows asked for are read)."""
    offsets = np.array([int(o) for o, _ in parts], dtype=np.int64)
    ends = offsets + np.array([len(r) for _, r in parts], dtype=np.int64)
    order = np.argsort(offsets)
    dims = {int(r.shape[1]) for _, r in parts}
    if len(dims) > 1:
        raise ValueError(f"row blocks of different widths: {sorted(dims)}")
    width = dims.pop() if dims else 0

    def gather(ids: np.ndarray) -> np.ndarray:
        out = np.empty((len(ids), width), dtype=np.float32)
        found = np.zeros(len(ids), dtype=bool)
        for i in order:
            sel = (ids >= offsets[i]) & (ids < ends[i])
            if sel.any():
                out[sel] = np.asarray(parts[i][1][ids[sel] - offsets[i]], dtype=np.float32)
                found |= sel
        if not found.all():
            raise ValueError(f"candidate id {int(ids[~found][0])} is in none of the row blocks")
        return out

    return gather


def rescore_topk(queries: np.ndarray, cand_ids: np.ndarray, k: int, rows: RowGather) -> tuple[np.ndarray, np.ndarray]:
    """The exact top-k of each query among its candidates: their inner products computed exactly from the rows.

    Args:
        queries: (nq, d) float32 or float16 rows.
        cand_ids: (nq, K) int64 global ids of candidates, -1 where missing (duplicates are counted once).
        k: neighbours to keep.
        rows: gives the (m, d) rows of m sorted, distinct global ids (``gather_rows``); each is read once.

    Returns:
        sims (nq, k) float32 descending, equal similarities in the smaller id first, and global ids (nq, k) int64;
        (-inf, -1) where fewer than k candidates were given. The similarities equal exact search's (to 1e-6).
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if cand_ids.ndim != 2 or cand_ids.shape[0] != queries.shape[0]:
        raise ValueError(f"cand_ids must be (nq, K) with nq = {queries.shape[0]}, got {cand_ids.shape}")
    nq, width = cand_ids.shape
    # drop duplicate candidates of a row (merged lists may name one row twice)
    ids = np.sort(np.asarray(cand_ids, dtype=np.int64), axis=1)
    dup = np.zeros(ids.shape, dtype=bool)
    dup[:, 1:] = (ids[:, 1:] == ids[:, :-1]) & (ids[:, 1:] >= 0)
    ids = np.where(dup, -1, ids)
    valid = ids >= 0
    sims = np.full((nq, width), -np.inf, dtype=np.float32)
    if valid.any():
        uniq, inverse = np.unique(ids[valid], return_inverse=True)
        block = np.ascontiguousarray(rows(uniq), dtype=np.float32)
        if block.shape != (len(uniq), queries.shape[1]):
            raise ValueError(f"rows gave {block.shape} for {len(uniq)} ids of width {queries.shape[1]}")
        pos = np.zeros(ids.shape, dtype=np.int64)
        pos[valid] = inverse
        q = np.ascontiguousarray(np.asarray(queries, dtype=np.float32))
        sims = np.where(valid, candidate_dots(q, block, pos), -np.inf).astype(np.float32)
    tie = np.where(valid, ids, np.iinfo(np.int64).max)
    order = np.lexsort((tie, -sims), axis=1)[:, :k]
    out_s = np.take_along_axis(sims, order, axis=1)
    out_i = np.where(np.isfinite(out_s), np.take_along_axis(ids, order, axis=1), -1)
    if out_s.shape[1] < k:
        pad_s, pad_i = empty_result(nq, k - out_s.shape[1])
        out_s, out_i = np.hstack([out_s, pad_s]), np.hstack([out_i, pad_i])
    return np.ascontiguousarray(out_s), np.ascontiguousarray(out_i)
