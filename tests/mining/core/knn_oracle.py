"""Data and checks the exact-kNN path tests share: unit and clustered rows, and "equals the fp32 path"."""

import numpy as np

from mining.core.types import KnnResult


def unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """(n, d) float32 random rows of norm 1."""
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def clustered(rng: np.random.Generator, n: int, d: int, n_clusters: int, spread: float) -> np.ndarray:
    """(n, d) float32 unit rows around n_clusters random centres (small spread: many near-ties)."""
    centres = unit(rng, n_clusters, d)
    x = centres[rng.integers(0, n_clusters, n)] + spread * unit(rng, n, d)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def assert_same_one_way(sims, ids, r_sims, r_ids, q: np.ndarray, b: np.ndarray) -> None:
    """One direction: ids equal the fp32 path's except between tied similarities; similarities within 1e-6 of
    the reference's and of float64 dot products."""
    assert sims.shape == r_sims.shape and sims.dtype == np.float32 and ids.dtype == np.int64
    np.testing.assert_allclose(sims, r_sims, rtol=0, atol=1e-6)
    exact = np.take_along_axis(q.astype(np.float64) @ b.astype(np.float64).T, ids, 1)
    np.testing.assert_allclose(sims, exact, rtol=0, atol=1e-6)
    assert np.all(np.abs(sims - r_sims)[ids != r_ids] < 1e-6), "ids differ where similarities do not tie"


def assert_same(res: KnnResult, ref: KnnResult, src: np.ndarray, tgt: np.ndarray) -> None:
    """Both directions as ``assert_same_one_way``, and at most 2 % of rows with a different set of neighbours."""
    for sims, ids, r_sims, r_ids, q, b in (
        (res.fwd_sims, res.fwd_ids, ref.fwd_sims, ref.fwd_ids, src, tgt),
        (res.bwd_sims, res.bwd_ids, ref.bwd_sims, ref.bwd_ids, tgt, src),
    ):
        assert_same_one_way(sims, ids, r_sims, r_ids, q, b)
        assert (np.sort(ids, axis=1) != np.sort(r_ids, axis=1)).any(axis=1).mean() <= 0.02
