"""kNN over index shards: the merged top-k equals one index (exact), and IVF shards over one quantizer keep recall."""

from __future__ import annotations

import numpy as np
import pytest

from mining.core.knn import knn_exact
from mining.core.knn.shards import (
    ivf_assign,
    ivf_fill_shard,
    ivf_nlist,
    ivf_search_shard,
    ivf_train,
    merge_topk,
    row_shards,
    search_exact_shard,
)


def _unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_row_shards_cover_every_row_once() -> None:
    assert row_shards(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert row_shards(0, 4) == []
    with pytest.raises(ValueError, match="rows >= 1"):
        row_shards(5, 0)


def test_merge_topk_equals_the_top_k_of_the_whole_matrix() -> None:
    rng = np.random.default_rng(0)
    sims = rng.random((7, 30)).astype(np.float32)
    sims[0, 3] = sims[0, 17] = 2.0  # a tie: the smaller id first
    parts = []
    for start, stop in row_shards(30, 8):
        block = sims[:, start:stop]
        order = np.argsort(-block, axis=1, kind="stable")[:, :3]
        parts.append((np.take_along_axis(block, order, axis=1), order + start))
    got_s, got_i = merge_topk(parts, 3)
    want_i = np.lexsort((np.broadcast_to(np.arange(30), sims.shape), -sims), axis=1)[:, :3]
    np.testing.assert_array_equal(got_i, want_i)
    np.testing.assert_array_equal(got_s, np.take_along_axis(sims, want_i, axis=1))
    assert got_i[0, :2].tolist() == [3, 17]


def test_merge_topk_puts_missing_neighbours_last_and_pads() -> None:
    parts = [
        (np.array([[0.5, -np.inf]], np.float32), np.array([[4, -1]])),
        (np.array([[0.7]], np.float32), np.array([[9]])),
    ]
    sims, ids = merge_topk(parts, 4)
    assert ids.tolist() == [[9, 4, -1, -1]]
    assert sims[0, :2].tolist() == pytest.approx([0.7, 0.5]) and np.isneginf(sims[0, 2:]).all()
    with pytest.raises(ValueError, match="n = 1 rows"):
        merge_topk([parts[0], (np.zeros((2, 1), np.float32), np.zeros((2, 1), np.int64))], 2)


def test_exact_search_over_index_shards_equals_one_index() -> None:
    rng = np.random.default_rng(1)
    q, b = _unit(rng, 300, 32), _unit(rng, 1000, 32)
    one_s, one_i = knn_exact(q, b, 5)
    parts = [search_exact_shard(q, b[start:stop], 5, start) for start, stop in row_shards(len(b), 350)]
    got_s, got_i = merge_topk(parts, 5)
    np.testing.assert_array_equal(got_i, one_i)
    np.testing.assert_allclose(got_s, one_s, atol=1e-6)


def test_ivf_index_shards_keep_recall_against_one_index() -> None:
    rng = np.random.default_rng(2)
    base = _unit(rng, 6000, 32)
    q = base[rng.choice(6000, 500, replace=False)] + 0.05 * rng.standard_normal((500, 32)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    trained = ivf_train(base[rng.choice(6000, 3000, replace=False)], ivf_nlist(6000), seed=0)
    one = ivf_fill_shard(trained, base, 0)
    _, one_i = ivf_search_shard(one, q, 4, nprobe=8)
    parts = [
        ivf_search_shard(ivf_fill_shard(trained, base[start:stop], start), q, 4, nprobe=8)
        for start, stop in row_shards(len(base), 2000)
    ]
    _, got_i = merge_topk(parts, 4)
    assert float(np.mean(got_i[:, 0] == one_i[:, 0])) >= 0.99
    # the queries assigned to lists once (shared quantizer) search each shard as if assigned there
    _, pre_i = ivf_search_shard(one, q, 4, nprobe=8, assign=ivf_assign(trained, q, 8))
    np.testing.assert_array_equal(pre_i, one_i)
    _, exact_i = knn_exact(q, base, 1)
    assert float(np.mean(got_i[:, 0] == exact_i[:, 0])) >= 0.95
    with pytest.raises(ValueError, match="must be empty"):
        ivf_fill_shard(one, base, 0)


def test_an_index_shard_searched_in_bf16_gives_the_fp32_neighbours() -> None:
    from mining.core.hw import Compute

    rng = np.random.default_rng(11)
    centres = rng.normal(size=(20, 48))
    q = centres[rng.integers(0, 20, 700)] + 0.3 * rng.normal(size=(700, 48))
    b = centres[rng.integers(0, 20, 900)] + 0.3 * rng.normal(size=(900, 48))
    q = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float16)
    b = (b / np.linalg.norm(b, axis=1, keepdims=True)).astype(np.float16)
    fp32_sims, fp32_ids = search_exact_shard(q, b, 5, 1000, compute=Compute.FP32)
    bf16_sims, bf16_ids = search_exact_shard(q, b, 5, 1000, compute=Compute.BF16)
    np.testing.assert_array_equal(bf16_ids, fp32_ids)
    np.testing.assert_allclose(bf16_sims, fp32_sims, atol=1e-6)
    assert bf16_ids.min() >= 1000
