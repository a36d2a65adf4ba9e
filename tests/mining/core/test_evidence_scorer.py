"""The no-gold scorer's pieces: negatives, pair margins, logistic regression, expected-F1 count."""

import numpy as np
import pytest

from mining.core.enums import Margin
from mining.core.evidence_scorer import (
    expected_f1_count,
    fit_logistic,
    neighbour_negatives,
    pair_margin,
    shuffled_negatives,
)


def test_shuffled_negatives_never_keep_a_pair():
    src, tgt = np.arange(10), np.arange(100, 110)
    s, t = shuffled_negatives(src, tgt, seed=3)
    assert sorted(s) == list(src) and sorted(t) == list(tgt)
    assert not np.any(t - s == 100)
    assert shuffled_negatives(src[:1], tgt[:1], seed=0)[0].size == 0


def test_neighbour_negatives_take_the_first_other_target():
    fwd_ids = np.array([[5, 7, 8], [9, 9, -1], [4, -1, -1]])
    s, t = neighbour_negatives(np.array([0, 1, 2]), np.array([5, 9, 4]), fwd_ids)
    assert s.tolist() == [0] and t.tolist() == [7]


def test_pair_margin_matches_the_ratio_formula():
    src = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    tgt = np.array([[0.6, 0.8], [1.0, 0.0]], np.float32)
    cos, score = pair_margin(
        src, tgt, np.array([0, 1]), np.array([0, 0]), np.array([0.5, 0.4]), np.array([0.7, 0.2]), Margin.RATIO
    )
    np.testing.assert_allclose(cos, [0.6, 0.8], rtol=1e-6)
    np.testing.assert_allclose(score, [0.6 / 0.6, 0.8 / 0.55], rtol=1e-6)


def test_fit_logistic_separates_and_ranks():
    rng = np.random.default_rng(0)
    x = np.vstack([rng.normal(1.0, 1.0, (200, 2)), rng.normal(-1.0, 1.0, (600, 2))])
    x[:, 1] = 0.0  # a constant column keeps weight 0
    y = np.r_[np.ones(200, bool), np.zeros(600, bool)]
    m = fit_logistic(x, y, l2=1.0, names=("a", "b"))
    assert m.coef[0] > 1.0 and m.coef[1] == pytest.approx(0.0, abs=1e-6)
    # classes weighted equally: the decision boundary sits at the midpoint 0
    assert m.probability(np.array([[0.0, 0.0]]))[0] == pytest.approx(0.5, abs=0.05)
    strong = fit_logistic(x, y, l2=1e4)
    assert abs(strong.coef[0]) < abs(m.coef[0])
    with pytest.raises(ValueError):
        fit_logistic(x, np.ones(800, bool))


def test_expected_f1_count():
    assert expected_f1_count(np.array([0.99, 0.98, 0.97, 0.1, 0.05])) == 3
    assert expected_f1_count(np.array([])) == 0


def test_neighbourhood_features_values():
    from mining.core.evidence_scorer import neighbourhood_features

    fwd_sims = np.array([[0.9, 0.5], [0.8, 0.7]])
    fwd_ids = np.array([[0, 1], [1, -1]])
    bwd_sims = np.array([[0.9, 0.6], [0.8, 0.5]])
    bwd_ids = np.array([[0, 1], [1, 0]])
    out = neighbourhood_features(
        np.array([0.9, 0.8]), np.array([0, 1]), np.array([0, 1]), fwd_sims, fwd_ids, bwd_sims, bwd_ids
    )
    # pair (0, 0): means 0.7 / 0.75 -> ratio 0.9 / 0.725; rival of source 0 is target 1 (0.5), of target 0 source 1
    np.testing.assert_allclose(out[0], [0.9 / 0.725, 0.9 - 0.725, 0.4, 0.3])
    # pair (1, 1): source 1 has only itself valid beside target 1 -> gap 0; target 1's rival is source 0 (0.5)
    np.testing.assert_allclose(out[1], [0.8 / 0.725, 0.8 - 0.725, 0.0, 0.3])
