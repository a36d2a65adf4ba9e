"""Threshold sweep against a brute-force loop over every candidate threshold."""

import numpy as np
import pytest

from mining.core.threshold import best_f1_threshold, sweep, threshold_for_precision


def _brute(scores: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> list[tuple[float, float, float, float]]:
    out = []
    total = float(np.sum(weights * labels))
    for t in sorted(set(scores.tolist()), reverse=True):
        kept = scores >= t
        tp = float(np.sum(weights[kept] * labels[kept]))
        p = tp / float(np.sum(weights[kept]))
        r = tp / total if total else 0.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        out.append((t, p, r, f))
    return out


def test_hand_example() -> None:
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5])
    labels = np.array([1, 1, 0, 1, 0])
    sw = sweep(scores, labels)
    np.testing.assert_allclose(sw.precision, [1, 1, 2 / 3, 3 / 4, 3 / 5])
    np.testing.assert_allclose(sw.recall, [1 / 3, 2 / 3, 2 / 3, 1, 1])
    best = best_f1_threshold(scores, labels)
    assert best.threshold == 0.6 and best.n_kept == 4
    assert best.f1 == pytest.approx(2 * 0.75 / 1.75)
    assert threshold_for_precision(scores, labels, 1.0).threshold == 0.8
    assert threshold_for_precision(scores, labels, 0.7).threshold == 0.6
    assert threshold_for_precision(np.array([0.2]), np.array([0]), 0.5) is None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_brute_force_with_ties_and_weights(seed: int) -> None:
    rng = np.random.default_rng(seed)
    scores = np.round(rng.random(200), 2)  # many ties
    labels = (rng.random(200) < scores).astype(int)
    weights = rng.integers(1, 5, 200).astype(float)
    sw = sweep(scores, labels, weights)
    ref = np.array(_brute(scores, labels, weights))
    np.testing.assert_allclose(sw.thresholds, ref[:, 0])
    np.testing.assert_allclose(sw.precision, ref[:, 1])
    np.testing.assert_allclose(sw.recall, ref[:, 2])
    np.testing.assert_allclose(sw.f1, ref[:, 3])
    assert sw.n_kept.tolist() == [int(np.sum(scores >= t)) for t in ref[:, 0]]
    best = best_f1_threshold(scores, labels, weights)
    assert best.f1 == pytest.approx(ref[:, 3].max())
    target = threshold_for_precision(scores, labels, 0.8, weights)
    ok = ref[ref[:, 1] >= 0.8]
    assert target is not None and target.threshold == pytest.approx(ok[:, 0].min())


def test_weights_change_the_choice() -> None:
    scores = np.array([0.9, 0.5, 0.4])
    labels = np.array([1, 0, 1])
    assert best_f1_threshold(scores, labels).threshold == 0.4
    # The negative stands for a big stratum: keeping it now costs more than the positive gains.
    assert best_f1_threshold(scores, labels, weights=np.array([1.0, 10.0, 1.0])).threshold == 0.9


def test_n_positive_counts_unscored_gold() -> None:
    sw = sweep(np.array([0.9, 0.1]), np.array([1, 1]), n_positive=4)
    np.testing.assert_allclose(sw.recall, [0.25, 0.5])


def test_input_validation_and_no_mutation() -> None:
    scores = np.array([0.3, 0.1, 0.2])
    before = scores.copy()
    sweep(scores, np.array([1, 0, 1]))
    np.testing.assert_array_equal(scores, before)
    with pytest.raises(ValueError):
        sweep(scores, np.array([1, 0]))
    with pytest.raises(ValueError):
        sweep(scores, np.array([1, 2, 0]))
    with pytest.raises(ValueError):
        best_f1_threshold(np.array([]), np.array([]))
