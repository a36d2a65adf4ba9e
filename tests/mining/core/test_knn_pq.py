"""Compressed (IVF-PQ) index shards: the exact re-score gives exact search's similarities, shards filled from one
trained index and merged equal one index, and recall@1 of planted pairs against exact search stays >= 0.95."""

from __future__ import annotations

import faiss
import numpy as np
import pytest

from mining.core.knn import knn_exact
from mining.core.knn.pq import (
    gather_rows,
    pq_assign,
    pq_code_bytes,
    pq_factory,
    pq_fill_shard,
    pq_fit_m,
    pq_merge,
    pq_search_shard,
    pq_train,
    rescore_topk,
)
from mining.core.margin import neighbourhood_means


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _planted(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source rows, target rows (60 % noisy copies of the source row of the same number), the planted mask; both
    as float16 values (what the embedding cache stores)."""
    rng = np.random.default_rng(seed)
    src = _unit(rng.standard_normal((n, d)))
    noise = _unit(rng.standard_normal((n, d)))
    planted = rng.random(n) < 0.6
    tgt = np.where(planted[:, None], _unit(src + 0.5 * noise), noise)
    return src.astype(np.float16).astype(np.float32), tgt.astype(np.float16).astype(np.float32), planted


def test_rescore_gives_exact_search_similarities_and_order() -> None:
    rng = np.random.default_rng(1)
    q = _unit(rng.standard_normal((50, 32)))
    base = _unit(rng.standard_normal((400, 32))).astype(np.float16)
    want_s, want_i = knn_exact(q, base.astype(np.float32), 5)
    # candidates: the true top-5 (shifted to global ids 1000..), some others, a duplicate and missing slots
    cand = np.hstack([want_i + 1000, rng.integers(1000, 1400, (50, 6)), want_i[:, :1] + 1000, np.full((50, 2), -1)])
    rows = gather_rows([(1000, base[:150]), (1150, base[150:])])
    sims, ids = rescore_topk(q, cand, 5, rows)
    np.testing.assert_array_equal(ids, want_i + 1000)
    np.testing.assert_allclose(sims, want_s, atol=1e-6)
    # fewer candidates than k: the rest missing
    sims2, ids2 = rescore_topk(q, np.full((50, 3), -1, dtype=np.int64), 2, rows)
    assert (ids2 == -1).all() and np.isneginf(sims2).all()
    with pytest.raises(ValueError, match="none of the row blocks"):
        rescore_topk(q, np.full((50, 1), 5, dtype=np.int64), 1, rows)


def test_compressed_shards_recall_planted_pairs_and_equal_one_index() -> None:
    n, d = 6000, 64
    src, tgt, planted = _planted(n, d)
    sample = np.concatenate([src[::2], tgt[::2]])
    trained = pq_train(sample, 64, m=16, seed=0)
    assert pq_factory(d, 64, 16) == "IVF64,PQ16" and pq_code_bytes(trained) == 16 + 8
    halves = [pq_fill_shard(trained, tgt[:2500], 0), pq_fill_shard(trained, tgt[2500:], 2500)]
    group = pq_merge(halves)
    one = pq_fill_shard(trained, tgt, 0)
    assign = pq_assign(trained, src, 8)
    s_group, i_group = pq_search_shard(group, src, 16, 8, assign=assign)
    s_one, i_one = pq_search_shard(one, src, 16, 8, assign=assign)
    np.testing.assert_array_equal(i_group, i_one)  # a merged group of shards is the one index
    np.testing.assert_allclose(s_group, s_one, atol=1e-5)
    sims, ids = rescore_topk(src, i_group, 4, gather_rows([(0, tgt.astype(np.float16))]))
    ex_s, ex_i = knn_exact(src, tgt, 4)
    rows = np.flatnonzero(planted)
    assert (ex_i[rows, 0] == rows).all()  # the planted pair is exact search's top-1
    recall = float(np.mean(ids[rows, 0] == ex_i[rows, 0]))
    assert recall >= 0.95, recall
    same = ids == ex_i
    np.testing.assert_allclose(sims[same], ex_s[same], atol=1e-6)  # every listed similarity is exact
    # the neighbourhood means of the planted queries: exact where every neighbour was found
    means, ex_means = neighbourhood_means(sims, 4), neighbourhood_means(ex_s, 4)
    full = same.all(axis=1)
    np.testing.assert_allclose(means[full], ex_means[full], atol=1e-6)
    assert (means <= ex_means + 1e-6).all()  # a missed neighbour can only lower a mean


def test_training_refuses_too_few_rows_and_a_code_size_that_does_not_divide_d() -> None:
    with pytest.raises(ValueError, match="at least 256 training rows"):
        pq_train(np.ones((100, 16), np.float32), 4, m=4)
    with pytest.raises(ValueError, match="must divide the dimension"):
        pq_factory(100, 16, 64)
    trained = pq_train(_unit(np.random.default_rng(0).standard_normal((2000, 16))), 8, m=4)
    assert trained.ntotal == 0 and faiss.extract_index_ivf(trained).nlist == 8
    assert (pq_fit_m(512, 64), pq_fit_m(96, 64), pq_fit_m(96, 16)) == (64, 48, 16)
    with pytest.raises(ValueError, match="dimension mismatch"):
        pq_fill_shard(trained, np.ones((5, 8), np.float32), 0)
