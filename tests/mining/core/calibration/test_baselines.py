"""Platt scaling and isotonic regression on hand examples and seeded synthetic scores."""

import numpy as np
import pytest

from mining.core.calibration.baselines import IsotonicCalibration, PlattScaling, pool_adjacent_violators


def test_platt_recovers_known_logistic_slope() -> None:
    rng = np.random.default_rng(1)
    phi = rng.normal(size=20_000)
    labels = rng.random(20_000) < 1.0 / (1.0 + np.exp(-(2.5 * phi - 0.7)))
    model = PlattScaling().fit(None, phi, labels)
    assert model.slope == pytest.approx(2.5, abs=0.15)
    assert model.intercept == pytest.approx(-0.7, abs=0.1)
    conf = model.predict(None, np.array([0.0, 1.0]))
    assert conf.dtype == np.float32
    np.testing.assert_allclose(conf, 1.0 / (1.0 + np.exp(-np.array([-0.7, 1.8]))), atol=0.03)


def test_platt_weights_equal_repetition_and_state_roundtrip() -> None:
    phi = np.array([0.1, 0.2, 0.4, 0.5, 0.7, 0.9])
    labels = np.array([0, 0, 1, 0, 1, 1])
    w = np.array([1.0, 2.0, 1.0, 3.0, 1.0, 2.0])
    rep = np.repeat(np.arange(6), w.astype(int))
    a = PlattScaling().fit(None, phi, labels, sample_weight=w)
    b = PlattScaling().fit(None, phi[rep], labels[rep])
    assert a.slope == pytest.approx(b.slope, rel=1e-6)
    assert a.intercept == pytest.approx(b.intercept, rel=1e-6)
    c = PlattScaling.from_state(a.state_dict())
    np.testing.assert_array_equal(c.predict(None, phi), a.predict(None, phi))


def test_platt_separable_data_stays_finite() -> None:
    model = PlattScaling().fit(None, np.array([0.0, 0.1, 0.9, 1.0]), np.array([0, 0, 1, 1]))
    assert np.isfinite(model.slope) and model.slope > 0
    conf = model.predict(None, np.array([0.0, 1.0]))
    assert conf[0] < 0.1 and conf[1] > 0.9


def test_pav_hand_example() -> None:
    fit = pool_adjacent_violators(np.array([1.0, 0.0, 1.0, 1.0, 0.0]), np.ones(5))
    np.testing.assert_allclose(fit, [0.5, 0.5, 2 / 3, 2 / 3, 2 / 3])
    fit_w = pool_adjacent_violators(np.array([0.2, 0.0]), np.array([3.0, 1.0]))
    np.testing.assert_allclose(fit_w, [0.15, 0.15])


def test_pav_matches_scipy_oracle() -> None:
    scipy_optimize = pytest.importorskip("scipy.optimize")
    rng = np.random.default_rng(2)
    y = rng.random(200)
    w = rng.random(200) + 0.1
    np.testing.assert_allclose(
        pool_adjacent_violators(y, w), scipy_optimize.isotonic_regression(y, weights=w).x, atol=1e-12
    )


def test_isotonic_is_monotone_and_matches_hand_example() -> None:
    phi = np.array([3.0, 1.0, 2.0, 4.0, 2.0])
    labels = np.array([1, 1, 0, 1, 1])
    model = IsotonicCalibration().fit(None, phi, labels)
    # Distinct scores 1, 2, 3, 4 with means 1, 0.5 (two pairs), 1, 1 -> pool 1 and 2: 2/3.
    np.testing.assert_allclose(model.x, [1, 2, 3, 4])
    np.testing.assert_allclose(model.y, [2 / 3, 2 / 3, 1, 1])
    np.testing.assert_allclose(model.predict(None, np.array([0.0, 2.5, 9.0])), [2 / 3, 5 / 6, 1.0], rtol=1e-6)
    rng = np.random.default_rng(3)
    s = rng.normal(size=500)
    y = rng.random(500) < 1.0 / (1.0 + np.exp(-2 * s))
    iso = IsotonicCalibration().fit(None, s, y, sample_weight=rng.random(500))
    grid = np.linspace(-4, 4, 1001)
    assert np.all(np.diff(iso.predict(None, grid)) >= 0)
    restored = IsotonicCalibration.from_state(iso.state_dict())
    np.testing.assert_array_equal(restored.predict(None, grid), iso.predict(None, grid))


def test_unfitted_raises() -> None:
    with pytest.raises(RuntimeError):
        PlattScaling().predict(None, np.zeros(2))
    with pytest.raises(RuntimeError):
        IsotonicCalibration().predict(None, np.zeros(2))
