"""Margin scoring against hand-computed values."""

import numpy as np
import pytest

from mining.core.margin import Margin, margin_score, neighbourhood_means


def test_neighbourhood_means_uses_first_k_columns() -> None:
    sims = np.array([[0.9, 0.7, 0.5, 0.1], [0.4, 0.2, 0.0, -0.2]], dtype=np.float32)
    np.testing.assert_allclose(neighbourhood_means(sims, 2), [0.8, 0.3], rtol=1e-6)
    np.testing.assert_allclose(neighbourhood_means(sims, 4), [0.55, 0.1], rtol=1e-6)


def test_neighbourhood_means_clips_k_and_skips_missing() -> None:
    sims = np.array([[0.6, -np.inf], [-np.inf, -np.inf]], dtype=np.float32)
    means = neighbourhood_means(sims, 10)
    assert means[0] == pytest.approx(0.6)
    assert np.isnan(means[1])


def test_neighbourhood_means_does_not_mutate() -> None:
    sims = np.array([[0.6, -np.inf]], dtype=np.float32)
    before = sims.copy()
    neighbourhood_means(sims, 2)
    np.testing.assert_array_equal(sims, before)


@pytest.mark.parametrize(
    ("margin", "expected"),
    [
        (Margin.ABSOLUTE, [0.8, 0.3]),
        # denominators: 0.6/2 + 0.4/2 = 0.5 and 0.2/2 + 0.4/2 = 0.3
        (Margin.DISTANCE, [0.8 - 0.5, 0.3 - 0.3]),
        (Margin.RATIO, [0.8 / 0.5, 0.3 / 0.3]),
    ],
)
def test_margin_score_values(margin: Margin, expected: list[float]) -> None:
    cos = np.array([0.8, 0.3], dtype=np.float32)
    fwd = np.array([0.6, 0.2], dtype=np.float32)
    bwd = np.array([0.4, 0.4], dtype=np.float32)
    out = margin_score(cos, fwd, bwd, margin)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-7)


def test_margin_score_broadcasts_over_neighbours() -> None:
    cos = np.array([[0.9, 0.5], [0.7, 0.6]], dtype=np.float32)
    fwd = np.array([[0.7], [0.65]], dtype=np.float32)
    bwd = np.array([[0.5, 0.3], [0.1, 0.5]], dtype=np.float32)
    out = margin_score(cos, fwd, bwd, Margin.RATIO)
    np.testing.assert_allclose(out, cos / (fwd / 2 + bwd / 2), rtol=1e-6)


def test_ratio_prefers_pairs_in_sparse_neighbourhoods() -> None:
    # Same cosine, but the second pair lives in a denser (hub-like) neighbourhood.
    out = margin_score(np.array([0.7, 0.7]), np.array([0.5, 0.8]), np.array([0.5, 0.8]), Margin.RATIO)
    assert out[0] > out[1]
