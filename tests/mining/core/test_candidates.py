"""Candidate strategies against a slow loop reference on random data."""

import numpy as np
import pytest

from mining.core.candidates import Strategy, greedy_one_to_one, mine_candidates
from mining.core.margin import Margin
from mining.core.types import Direction, KnnResult


def _unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _oracle_knn(src: np.ndarray, tgt: np.ndarray, k: int) -> KnnResult:
    sims = src @ tgt.T
    fi = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    bi = np.argsort(-sims.T, axis=1, kind="stable")[:, :k]
    return KnnResult(
        fwd_sims=np.take_along_axis(sims, fi, 1),
        fwd_ids=fi.astype(np.int64),
        bwd_sims=np.take_along_axis(sims.T, bi, 1),
        bwd_ids=bi.astype(np.int64),
    )


def _reference(
    src: np.ndarray, tgt: np.ndarray, k: int, margin: Margin, strategy: Strategy
) -> list[tuple[int, int, float]]:
    """LASER-style loops over the full similarity matrix (slow, obviously correct)."""
    sims = (src @ tgt.T).astype(np.float64)
    ns, nt = sims.shape
    fmean = [float(np.mean(sorted(sims[i], reverse=True)[:k])) for i in range(ns)]
    bmean = [float(np.mean(sorted(sims[:, j], reverse=True)[:k])) for j in range(nt)]

    def score(i: int, j: int) -> float:
        a, b = sims[i, j], fmean[i] / 2 + bmean[j] / 2
        return {Margin.ABSOLUTE: a, Margin.DISTANCE: a - b, Margin.RATIO: a / b}[margin]

    fwd = {}
    for i in range(ns):
        neigh = sorted(range(nt), key=lambda j: -sims[i, j])[:k]
        j = max(neigh, key=lambda j: score(i, j))
        fwd[(i, j)] = score(i, j)
    bwd = {}
    for j in range(nt):
        neigh = sorted(range(ns), key=lambda i: -sims[i, j])[:k]
        i = max(neigh, key=lambda i: score(i, j))
        bwd[(i, j)] = score(i, j)
    if strategy is Strategy.FORWARD:
        pairs = fwd
    elif strategy is Strategy.BACKWARD:
        pairs = bwd
    elif strategy is Strategy.INTERSECTION:
        pairs = {p: s for p, s in fwd.items() if p in bwd}
    else:
        union = sorted({**fwd, **bwd}.items(), key=lambda kv: -kv[1])
        pairs, used_s, used_t = {}, set(), set()
        for (i, j), s in union:
            if i not in used_s and j not in used_t:
                pairs[(i, j)] = s
                used_s.add(i)
                used_t.add(j)
    return sorted((i, j, s) for (i, j), s in pairs.items())


@pytest.mark.parametrize("strategy", list(Strategy))
@pytest.mark.parametrize("margin", list(Margin))
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_loop_reference(strategy: Strategy, margin: Margin, seed: int) -> None:
    rng = np.random.default_rng(seed)
    src, tgt = _unit(rng, 37, 8), _unit(rng, 29, 8)
    k = 3
    got = mine_candidates(_oracle_knn(src, tgt, 5), margin=margin, k=k, strategy=strategy)
    ref = _reference(src, tgt, k, margin, strategy)
    got_pairs = sorted(zip(got.src_idx.tolist(), got.tgt_idx.tolist(), strict=True))
    assert got_pairs == [(i, j) for i, j, _ in ref]
    ref_score = {(i, j): s for i, j, s in ref}
    np.testing.assert_allclose(
        got.score, [ref_score[p] for p in zip(got.src_idx.tolist(), got.tgt_idx.tolist(), strict=True)], rtol=1e-4
    )
    assert np.all(np.diff(got.score) <= 0), "candidates must be sorted by score descending"


def test_fields_and_threshold() -> None:
    rng = np.random.default_rng(3)
    src = _unit(rng, 40, 16)
    tgt = src[::-1] + 0.05 * _unit(rng, 40, 16)  # target j is a noisy copy of source 39 - j
    tgt /= np.linalg.norm(tgt, axis=1, keepdims=True)
    knn = _oracle_knn(src, tgt, 4)
    cand = mine_candidates(knn, k=4)
    assert sorted(zip(cand.src_idx.tolist(), cand.tgt_idx.tolist(), strict=True)) == [(i, 39 - i) for i in range(40)]
    np.testing.assert_allclose(cand.cosine, np.sum(src[cand.src_idx] * tgt[cand.tgt_idx], axis=1), rtol=1e-5)
    np.testing.assert_allclose(cand.fwd_mean, knn.fwd_sims[cand.src_idx].mean(axis=1), rtol=1e-5)
    np.testing.assert_allclose(cand.bwd_mean, knn.bwd_sims[cand.tgt_idx].mean(axis=1), rtol=1e-5)
    assert np.all(cand.rank == 0)
    assert np.all(cand.direction == Direction.FORWARD | Direction.BACKWARD)
    cut = float(np.median(cand.score))
    kept = mine_candidates(knn, k=4, threshold=cut)
    assert len(kept) == int(np.sum(cand.score >= cut))
    assert np.all(kept.score >= cut)


def test_missing_neighbours_are_ignored() -> None:
    knn = KnnResult(
        fwd_sims=np.array([[0.9, -np.inf], [0.5, 0.4]], dtype=np.float32),
        fwd_ids=np.array([[1, -1], [1, 0]], dtype=np.int64),
        bwd_sims=np.array([[0.4, -np.inf], [0.9, 0.5]], dtype=np.float32),
        bwd_ids=np.array([[1, -1], [0, 1]], dtype=np.int64),
    )
    cand = mine_candidates(knn, margin=Margin.ABSOLUTE, k=2)
    assert list(zip(cand.src_idx.tolist(), cand.tgt_idx.tolist(), strict=True)) == [(0, 1), (1, 0)]
    assert cand.rank.tolist() == [0, 1]
    # (1, 1) is source 1's forward best but target 1 is taken; (1, 0) comes only from target 0.
    assert cand.direction.tolist() == [Direction.FORWARD | Direction.BACKWARD, Direction.BACKWARD]


def test_greedy_matches_loop_on_long_chains() -> None:
    rng = np.random.default_rng(7)
    src = rng.integers(0, 30, size=400)
    tgt = rng.integers(0, 30, size=400)
    used_s, used_t, expected = set(), set(), []
    for s, t in zip(src.tolist(), tgt.tolist(), strict=True):
        ok = s not in used_s and t not in used_t
        expected.append(ok)
        if ok:
            used_s.add(s)
            used_t.add(t)
    np.testing.assert_array_equal(greedy_one_to_one(src, tgt), expected)


def test_rejects_string_options() -> None:
    knn = _oracle_knn(np.eye(2, dtype=np.float32), np.eye(2, dtype=np.float32), 2)
    with pytest.raises(TypeError):
        mine_candidates(knn, k=2, strategy="max_score")  # type: ignore[arg-type]


def test_does_not_mutate_knn_arrays() -> None:
    rng = np.random.default_rng(5)
    knn = _oracle_knn(_unit(rng, 20, 6), _unit(rng, 15, 6), 4)
    before = [a.copy() for a in (knn.fwd_sims, knn.fwd_ids, knn.bwd_sims, knn.bwd_ids)]
    for strategy in Strategy:
        mine_candidates(knn, k=3, strategy=strategy, threshold=1.0)
    for a, b in zip(before, (knn.fwd_sims, knn.fwd_ids, knn.bwd_sims, knn.bwd_ids), strict=True):
        np.testing.assert_array_equal(a, b)
