"""kNN paths against a brute-force numpy oracle, with odd batch and tile sizes."""

import threading

import numpy as np
import pytest
import torch

from mining.core.knn import (
    KnnMethod,
    build_ivf,
    knn_approx,
    knn_both,
    knn_both_ways,
    knn_both_ways_approx,
    knn_exact,
    knn_method_for,
    knn_search,
)


def _unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _clustered(rng: np.random.Generator, n: int, d: int, n_clusters: int) -> np.ndarray:
    centres = _unit(rng, n_clusters, d)
    x = centres[rng.integers(0, n_clusters, n)] + 0.6 * _unit(rng, n, d)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _oracle(q: np.ndarray, b: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    sims = q.astype(np.float64) @ b.astype(np.float64).T
    ids = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(sims, ids, 1), ids


def _assert_same_knn(sims: np.ndarray, ids: np.ndarray, q: np.ndarray, b: np.ndarray, k: int) -> None:
    o_sims, o_ids = _oracle(q, b, k)
    assert sims.shape == ids.shape == o_ids.shape
    assert sims.dtype == np.float32 and ids.dtype == np.int64
    np.testing.assert_allclose(sims, o_sims, atol=1e-5)
    # Ids must agree except where two similarities tie (to float32 precision).
    differ = ids != o_ids
    assert np.all(np.abs(np.take_along_axis(q @ b.T, ids, 1) - o_sims)[differ] < 1e-5)
    assert differ.mean() < 0.01


@pytest.mark.parametrize(("batch_size", "k"), [(1, 3), (7, 5), (1000, 4)])
def test_knn_exact_matches_oracle(batch_size: int, k: int) -> None:
    rng = np.random.default_rng(0)
    q, b = _unit(rng, 53, 16), _unit(rng, 41, 16)
    sims, ids = knn_exact(q, b, k, batch_size=batch_size)
    _assert_same_knn(sims, ids, q, b, k)


@pytest.mark.parametrize("tile", [(1, 1), (7, 13), (64, 5), (1000, 1000), (3, 1000)])
@pytest.mark.parametrize("k", [1, 4])
def test_knn_both_ways_matches_oracle(tile: tuple[int, int], k: int) -> None:
    rng = np.random.default_rng(1)
    src, tgt = _clustered(rng, 67, 12, 5), _clustered(rng, 45, 12, 5)
    res = knn_both_ways(src, tgt, k, tile=tile)
    _assert_same_knn(res.fwd_sims, res.fwd_ids, src, tgt, k)
    _assert_same_knn(res.bwd_sims, res.bwd_ids, tgt, src, k)


def test_exact_similarities_do_not_depend_on_tiles_or_path() -> None:
    """fp32 GEMMs round differently per tile shape; the listed similarities are the float64 products (as float32)."""
    rng = np.random.default_rng(4)
    src, tgt = _clustered(rng, 300, 96, 7), _clustered(rng, 250, 96, 7)
    runs = [knn_both_ways(src, tgt, 4, tile=tile) for tile in ((1, 1), (17, 33), (512, 2048))]
    flat = knn_exact(src, tgt, 4, batch_size=11)
    want = np.take_along_axis(src.astype(np.float64) @ tgt.astype(np.float64).T, runs[0].fwd_ids, 1)
    np.testing.assert_array_equal(runs[0].fwd_sims, want.astype(np.float32))
    for res in (*runs[1:], flat):
        fwd = (res.fwd_sims, res.fwd_ids) if not isinstance(res, tuple) else res
        np.testing.assert_array_equal(fwd[0], runs[0].fwd_sims)
        np.testing.assert_array_equal(fwd[1], runs[0].fwd_ids)
    for res in runs[1:]:
        np.testing.assert_array_equal(res.bwd_sims, runs[0].bwd_sims)


@pytest.mark.parametrize(("workers", "tile"), [(2, (5, 7)), (3, (4, 1000)), (8, (16, 9))])
def test_knn_both_ways_parallel_workers_match_oracle(workers: int, tile: tuple[int, int]) -> None:
    rng = np.random.default_rng(11)
    src, tgt = _clustered(rng, 71, 12, 6), _clustered(rng, 38, 12, 6)
    main = threading.get_ident()
    calls: list[tuple[int, int, int]] = []
    threads_before = torch.get_num_threads()
    res = knn_both_ways(
        src, tgt, 4, tile=tile, workers=workers, progress=lambda d, t: calls.append((d, t, threading.get_ident()))
    )
    _assert_same_knn(res.fwd_sims, res.fwd_ids, src, tgt, 4)
    _assert_same_knn(res.bwd_sims, res.bwd_ids, tgt, src, 4)
    assert [c[0] for c in calls] == sorted(c[0] for c in calls) and calls[-1][:2] == (71, 71)
    assert all(c[2] == main for c in calls), "progress must be called from the calling thread"
    assert torch.get_num_threads() == threads_before


def test_knn_both_ways_clips_k_and_reports_progress() -> None:
    rng = np.random.default_rng(2)
    src, tgt = _unit(rng, 9, 8), _unit(rng, 3, 8)
    seen: list[tuple[int, int]] = []
    res = knn_both_ways(src, tgt, 5, tile=(4, 2), workers=1, progress=lambda done, total: seen.append((done, total)))
    assert res.fwd_ids.shape == (9, 3) and res.bwd_ids.shape == (3, 5)
    assert sorted(res.fwd_ids[0].tolist()) == [0, 1, 2]
    _assert_same_knn(res.bwd_sims, res.bwd_ids, tgt, src, 5)
    assert seen == [(4, 9), (8, 9), (9, 9)]


def test_knn_both_ways_does_not_mutate_inputs() -> None:
    rng = np.random.default_rng(3)
    src, tgt = _unit(rng, 10, 4), _unit(rng, 11, 4)
    before = (src.copy(), tgt.copy())
    knn_both_ways(src, tgt, 2, tile=(3, 3))
    np.testing.assert_array_equal(src, before[0])
    np.testing.assert_array_equal(tgt, before[1])


def test_rejects_bad_input() -> None:
    rng = np.random.default_rng(4)
    with pytest.raises(ValueError):
        knn_both_ways(_unit(rng, 3, 4), _unit(rng, 3, 5), 1)
    with pytest.raises(ValueError):
        knn_exact(_unit(rng, 3, 4), _unit(rng, 3, 4), 0)
    with pytest.raises(TypeError):
        knn_search(_unit(rng, 3, 4), _unit(rng, 3, 4), 1, method="exact")  # type: ignore[arg-type]


@pytest.mark.parametrize("big_batch", [True, False])
def test_ivf_recall_on_clustered_data(big_batch: bool) -> None:
    rng = np.random.default_rng(5)
    base = _clustered(rng, 3000, 32, 40)
    q = _clustered(rng, 300, 32, 40)
    sims, ids = knn_approx(q, base, 4, nlist=32, nprobe=12, seed=0, big_batch=big_batch)
    _, o_ids = _oracle(q, base, 4)
    recall_at_1 = np.mean(ids[:, 0] == o_ids[:, 0])
    assert recall_at_1 >= 0.95
    assert np.all(np.diff(sims, axis=1) <= 1e-6)


def test_ivf_with_all_lists_probed_is_exact() -> None:
    rng = np.random.default_rng(6)
    base, q = _unit(rng, 500, 16), _unit(rng, 37, 16)
    sims, ids = knn_approx(q, base, 3, nlist=8, nprobe=8, big_batch=False)
    _assert_same_knn(sims, ids, q, base, 3)


def test_ivf_is_seeded() -> None:
    rng = np.random.default_rng(7)
    base, q = _clustered(rng, 2000, 16, 20), _clustered(rng, 200, 16, 20)
    a = knn_approx(q, base, 2, nlist=16, nprobe=1, seed=3)
    b = knn_approx(q, base, 2, nlist=16, nprobe=1, seed=3)
    np.testing.assert_array_equal(a[1], b[1])


def test_both_ways_approx_query_by_query_path() -> None:
    rng = np.random.default_rng(10)
    src, tgt = _clustered(rng, 400, 16, 8), _clustered(rng, 300, 16, 8)
    res = knn_both_ways_approx(src, tgt, 3, nlist=4, nprobe=4, big_batch=False)
    _assert_same_knn(res.fwd_sims, res.fwd_ids, src, tgt, 3)
    _assert_same_knn(res.bwd_sims, res.bwd_ids, tgt, src, 3)


def test_both_ways_approx_and_dispatch() -> None:
    rng = np.random.default_rng(8)
    src, tgt = _clustered(rng, 1500, 16, 20), _clustered(rng, 1200, 16, 20)
    approx = knn_both(src, tgt, 4, method=KnnMethod.IVF, nlist=16, nprobe=16)
    exact = knn_both(src, tgt, 4, method=KnnMethod.EXACT, tile=(100, 333))
    np.testing.assert_array_equal(approx.fwd_ids, exact.fwd_ids)  # all lists probed: exact
    np.testing.assert_array_equal(approx.bwd_ids, exact.bwd_ids)
    few = knn_both_ways_approx(src, tgt, 4, nlist=16, nprobe=8)
    one = knn_both_ways_approx(src, tgt, 4, nlist=16, nprobe=1)
    # Recall grows with nprobe; one list of 16 misses many true neighbours.
    assert np.mean(few.bwd_ids[:, 0] == exact.bwd_ids[:, 0]) > 0.9
    assert np.mean(one.bwd_ids[:, 0] == exact.bwd_ids[:, 0]) < 0.8


def test_build_ivf_reusable_index() -> None:
    rng = np.random.default_rng(9)
    x = _unit(rng, 800, 8)
    index = build_ivf(x, nlist=4, seed=1)
    assert index.is_trained and index.ntotal == 0
    knn_approx(x[:10], x, 1, nprobe=4, index=index)
    assert index.ntotal == 0  # emptied again for the other direction
    sims, ids = knn_search(x[:10], x, 1, method=KnnMethod.EXACT)
    np.testing.assert_array_equal(ids[:, 0], np.arange(10))


def test_empty_sides() -> None:
    rng = np.random.default_rng(12)
    res = knn_both_ways(np.zeros((0, 4), dtype=np.float32), _unit(rng, 5, 4), 3)
    assert res.fwd_ids.shape == (0, 3) and res.bwd_ids.shape == (5, 0)
    sims, ids = knn_exact(_unit(rng, 2, 4), np.zeros((0, 4), dtype=np.float32), 3)
    assert sims.shape == ids.shape == (2, 0)


def test_knn_method_for_switches_to_ivf_by_size() -> None:
    assert knn_method_for(50_000, 50_000) is KnnMethod.EXACT
    assert knn_method_for(10_000, 10_000) is KnnMethod.EXACT
    assert knn_method_for(300_000, 300_000) is KnnMethod.IVF
    assert knn_method_for(50_001, 50_000) is KnnMethod.IVF
    assert knn_method_for(4, 5, exact_max_pairs=20) is KnnMethod.EXACT
    assert knn_method_for(4, 6, exact_max_pairs=20) is KnnMethod.IVF
