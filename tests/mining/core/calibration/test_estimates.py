"""Wilson intervals, weighted precision, threshold choice with whole-run yield, stratum weights, uncertain sampling."""

import logging

import numpy as np
import pytest

from mining.core.calibration.estimates import (
    PrecisionCriterion,
    choose_threshold,
    precision_at_threshold,
    stratum_weights,
    uncertain_sample,
    weighted_proportion,
    wilson_interval,
    yield_curve,
)


def _wilson_formula(k: float, n: float, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    centre = p + z * z / (2 * n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)


def test_wilson_matches_formula_and_published_values() -> None:
    low, high = wilson_interval(0.8, 100)
    assert (float(low), float(high)) == pytest.approx(_wilson_formula(80, 100))
    assert float(low) == pytest.approx(0.7112, abs=1e-4) and float(high) == pytest.approx(0.8666, abs=1e-4)
    low0, high0 = wilson_interval(0.0, 10)
    assert float(low0) == 0.0 and float(high0) == pytest.approx(0.2775, abs=1e-4)
    lows, highs = wilson_interval(np.array([0.5, 1.0]), np.array([4, 0]))
    assert (lows[0], highs[0]) == pytest.approx(_wilson_formula(2, 4))
    assert (lows[1], highs[1]) == (0.0, 1.0)


def test_weighted_proportion_uses_effective_sample_size() -> None:
    labels = np.array([1, 1, 0, 1])
    w = np.array([1.0, 1.0, 2.0, 4.0])
    est = weighted_proportion(labels, w)
    assert est.precision == pytest.approx(6 / 8)
    assert est.n_effective == pytest.approx(64 / 22)
    assert (est.low, est.high) == pytest.approx(_wilson_formula(0.75 * 64 / 22, 64 / 22))
    plain = weighted_proportion(labels)
    assert plain.n_effective == pytest.approx(4) and plain.precision == pytest.approx(0.75)


def test_precision_at_threshold() -> None:
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5])
    labels = np.array([1, 1, 0, 1, 0])
    est = precision_at_threshold(scores, labels, 0.6)
    assert est.precision == pytest.approx(0.75) and est.n_labelled == 4
    assert (est.low, est.high) == pytest.approx(_wilson_formula(3, 4))
    none_kept = precision_at_threshold(scores, labels, 2.0)
    assert np.isnan(none_kept.precision) and none_kept.n_labelled == 0


def test_choose_threshold_lowest_meeting_target_with_run_yield() -> None:
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5])
    labels = np.array([1, 1, 0, 1, 0])
    run = np.array([0.95, 0.65, 0.61, 0.6, 0.3, 0.1, 0.59])
    choice = choose_threshold(scores, labels, 0.75, all_scores=run)
    assert choice is not None
    assert choice.threshold == 0.6
    assert choice.estimate.precision == pytest.approx(0.75)
    assert choice.recall == pytest.approx(1.0)
    assert choice.n_kept == 4 and choice.fraction_kept == pytest.approx(4 / 7)
    assert choose_threshold(scores, labels, 0.8).threshold == 0.8
    assert choose_threshold(scores, labels, 0.8).n_kept == 2  # labelled scores when no run given
    assert choose_threshold(np.array([0.3, 0.2]), np.array([0, 0]), 0.5) is None


def test_choose_threshold_matches_brute_force_for_both_criteria() -> None:
    rng = np.random.default_rng(0)
    scores = np.round(rng.random(300), 2)
    labels = rng.random(300) < scores
    weights = rng.integers(1, 4, size=300).astype(float)
    for criterion in PrecisionCriterion:
        got = choose_threshold(scores, labels, 0.8, weights=weights, criterion=criterion)
        meeting = []
        for t in np.unique(scores):
            est = precision_at_threshold(scores, labels, t, weights)
            value = est.precision if criterion is PrecisionCriterion.POINT else est.low
            if value >= 0.8:
                meeting.append(t)
        assert got is not None and got.threshold == pytest.approx(min(meeting))
    point = choose_threshold(scores, labels, 0.8, weights=weights)
    bound = choose_threshold(scores, labels, 0.8, weights=weights, criterion=PrecisionCriterion.LOWER_BOUND)
    assert bound.threshold > point.threshold and bound.estimate.low >= 0.8


def test_yield_curve() -> None:
    run = np.array([0.2, 0.5, 0.5, 0.9])
    np.testing.assert_array_equal(yield_curve(run, np.array([0.0, 0.5, 0.6, 1.0])), [4, 3, 1, 0])


def test_stratum_weights_hand_values(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        w = stratum_weights(np.array([0, 0, 1, 2, 2, 2]), np.array([10, 5, 30, 7]))
    np.testing.assert_allclose(w, [5, 5, 5, 10, 10, 10])
    assert "[3]" in caplog.text
    with pytest.raises(ValueError):
        stratum_weights(np.array([0, 4]), np.array([1, 1]))


def test_stratum_weights_make_stratified_estimate_unbiased() -> None:
    rng = np.random.default_rng(5)
    sizes = np.array([1_000, 5_000, 20_000])
    rates = np.array([0.95, 0.6, 0.1])
    population = [rng.random(s) < r for s, r in zip(sizes, rates, strict=True)]
    truth = np.concatenate(population).mean()
    strata = np.repeat(np.arange(3), 50)
    weights = stratum_weights(strata, sizes)
    weighted, plain, covered = [], [], 0
    for _ in range(300):
        labels = np.concatenate([rng.choice(pop, 50, replace=False) for pop in population])
        est = weighted_proportion(labels, weights)
        weighted.append(est.precision)
        plain.append(labels.mean())
        covered += est.low <= truth <= est.high
    assert abs(np.mean(weighted) - truth) < 0.01
    assert abs(np.mean(plain) - truth) > 0.2
    assert 0.85 <= covered / 300 <= 1.0


def test_uncertain_sample_nearest_first_with_exclusions() -> None:
    # Exact binary fractions so that the tied distances really tie: 0.5, 0.125, 0.5, 0.125, 0, 0.25.
    conf = np.array([0.0, 0.375, 1.0, 0.625, 0.5, 0.25, np.nan])
    picked = uncertain_sample(conf, 0.5, 3, seed=0)
    assert picked[0] == 4 and set(picked[1:]) == {1, 3}
    np.testing.assert_array_equal(uncertain_sample(conf, 0.5, 3, exclude=np.array([4]), seed=0)[2:], [5])
    mask = np.zeros(7, dtype=bool)
    mask[[1, 3, 4]] = True
    masked = uncertain_sample(conf, 0.5, 2, exclude=mask, seed=0)
    assert masked[0] == 5 and masked[1] in (0, 2)
    assert len(uncertain_sample(conf, 0.5, 100)) == 6  # NaN never picked
    np.testing.assert_array_equal(uncertain_sample(conf, 0.5, 3, seed=7), uncertain_sample(conf, 0.5, 3, seed=7))
    orders = {tuple(uncertain_sample(conf, 0.5, 3, seed=s)[1:]) for s in range(20)}
    assert orders == {(1, 3), (3, 1)}  # ties broken at random, both ways
