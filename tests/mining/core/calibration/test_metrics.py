"""Calibration metrics on hand-computed arrays and seeded synthetic confidences."""

import numpy as np
import pytest

from mining.core.calibration.metrics import (
    brier_score,
    equal_mass_bins,
    expected_calibration_error,
    log_loss,
    reliability_bins,
)


def test_brier_hand_values() -> None:
    conf = np.array([0.9, 0.2, 0.6, 0.0])
    labels = np.array([1, 0, 0, 1])
    # (0.01 + 0.04 + 0.36 + 1.0) / 4
    assert brier_score(conf, labels) == pytest.approx(1.41 / 4)
    # weights 1, 1, 2, 0 -> (0.01 + 0.04 + 0.72) / 4
    assert brier_score(conf, labels, np.array([1.0, 1.0, 2.0, 0.0])) == pytest.approx(0.77 / 4)


def test_log_loss_hand_values_and_clipping() -> None:
    conf = np.array([0.8, 0.25])
    labels = np.array([1, 0])
    assert log_loss(conf, labels) == pytest.approx(-(np.log(0.8) + np.log(0.75)) / 2)
    # A confident mistake costs -log(eps), not infinity.
    assert log_loss(np.array([0.0]), np.array([1]), eps=1e-4) == pytest.approx(-np.log(1e-4))
    assert np.isfinite(log_loss(np.array([1.0, 0.0]), np.array([0, 1])))


def test_equal_mass_bins_balanced_and_ordered() -> None:
    conf = np.array([0.9, 0.1, 0.5, 0.3, 0.7, 0.2])
    bins = equal_mass_bins(conf, np.ones(6), 3)
    np.testing.assert_array_equal(bins, [2, 0, 1, 1, 2, 0])
    # Weighted: one heavy item fills a bin on its own.
    bins_w = equal_mass_bins(np.array([0.1, 0.2, 0.3, 0.4]), np.array([1.0, 1.0, 1.0, 3.0]), 2)
    np.testing.assert_array_equal(bins_w, [0, 0, 0, 1])


def test_reliability_bins_hand_example() -> None:
    conf = np.array([0.1, 0.2, 0.8, 0.9])
    labels = np.array([0, 1, 1, 1])
    rb = reliability_bins(conf, labels, n_bins=2)
    np.testing.assert_allclose(rb.mean_confidence, [0.15, 0.85])
    np.testing.assert_allclose(rb.frequency, [0.5, 1.0])
    np.testing.assert_array_equal(rb.count, [2, 2])
    np.testing.assert_allclose(rb.low, [0.1, 0.8])
    np.testing.assert_allclose(rb.high, [0.2, 0.9])
    # ECE = 0.5 * |0.15 - 0.5| + 0.5 * |0.85 - 1|
    assert expected_calibration_error(conf, labels, n_bins=2) == pytest.approx(0.5 * 0.35 + 0.5 * 0.15)


def test_more_bins_than_items_drops_empty_bins() -> None:
    rb = reliability_bins(np.array([0.3, 0.6]), np.array([0, 1]), n_bins=10)
    assert rb.count.sum() == 2 and rb.count.size == 2


def test_perfectly_calibrated_has_small_ece_and_miscalibrated_does_not() -> None:
    rng = np.random.default_rng(0)
    conf = rng.random(50_000)
    labels = rng.random(50_000) < conf
    assert expected_calibration_error(conf, labels, n_bins=10) < 0.02
    assert expected_calibration_error(conf, labels, n_bins=10, weights=rng.random(50_000)) < 0.02
    overconfident = np.where(conf > 0.5, 1.0 - (1.0 - conf) ** 3, conf**3)
    assert expected_calibration_error(overconfident, labels, n_bins=10) > 0.1
    assert expected_calibration_error(np.full(50_000, 0.9), labels) > 0.3


def test_weights_equal_repetition() -> None:
    conf = np.array([0.2, 0.4, 0.7, 0.9])
    labels = np.array([0, 1, 0, 1])
    w = np.array([1.0, 3.0, 2.0, 1.0])
    rep = np.repeat(np.arange(4), w.astype(int))
    for fn in (brier_score, log_loss):
        assert fn(conf, labels, w) == pytest.approx(fn(conf[rep], labels[rep]))


def test_inputs_not_mutated_and_validated() -> None:
    conf = np.array([0.3, 0.6])
    labels = np.array([0, 1])
    before = conf.copy()
    expected_calibration_error(conf, labels)
    np.testing.assert_array_equal(conf, before)
    with pytest.raises(ValueError):
        brier_score(np.array([1.2]), np.array([1]))
    with pytest.raises(ValueError):
        brier_score(np.array([0.2]), np.array([2]))
    with pytest.raises(ValueError):
        brier_score(np.array([0.2, 0.3]), np.array([1]))
