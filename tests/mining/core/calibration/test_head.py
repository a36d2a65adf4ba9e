"""Calibration head: never reorders one source's targets, beats Platt when the slope depends on u."""

from pathlib import Path

import numpy as np
import pytest
import torch

from mining.core.calibration.baselines import PlattScaling
from mining.core.calibration.crossval import compare_calibrators
from mining.core.calibration.head import CalibrationHead, HeadConfig

torch.set_num_threads(1)


def _two_groups(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sources with u[0] > 0 have slope 6 and bias 2, the others slope 0.5 and bias -1."""
    rng = np.random.default_rng(seed)
    u = rng.normal(size=(n, d)).astype(np.float32)
    group = u[:, 0] > 0
    a = np.where(group, 6.0, 0.5)
    b = np.where(group, 2.0, -1.0)
    phi = rng.normal(size=n).astype(np.float32)
    labels = rng.random(n) < 1.0 / (1.0 + np.exp(-(a * phi + b)))
    return u, phi, labels


@pytest.fixture(scope="module")
def fitted() -> tuple[CalibrationHead, np.ndarray, np.ndarray, np.ndarray]:
    u, phi, labels = _two_groups(600, 8, seed=0)
    return CalibrationHead().fit(u, phi, labels, seed=0), u, phi, labels


def test_head_never_reorders_targets_of_one_source(fitted) -> None:
    head, u, _, _ = fitted
    assert head.epochs_trained > 0, "the head should have learnt something beyond Platt here"
    rng = np.random.default_rng(1)
    for row in rng.choice(len(u), size=20, replace=False):
        phis = rng.normal(scale=2.0, size=300).astype(np.float32)
        conf = head.predict(np.repeat(u[row : row + 1], phis.size, axis=0), phis)
        order = np.argsort(phis, kind="stable")
        assert np.all(np.diff(conf[order]) >= 0)
        # Same order as the raw scores wherever the confidences are not saturated.
        inner = (conf[order] > 1e-4) & (conf[order] < 1 - 1e-4)
        assert np.all(np.diff(conf[order][inner]) > 0)


def test_scale_bias_positive_and_source_dependent(fitted) -> None:
    head, u, phi, _ = fitted
    a, b = head.scale_bias(u)
    assert a.shape == b.shape == (len(u),) and a.dtype == np.float32
    assert np.all(a > 0)
    group = u[:, 0] > 0
    # The steep group gets the larger scale on average.
    assert a[group].mean() > a[~group].mean()
    expected = 1.0 / (1.0 + np.exp(-(a * phi + b)))
    np.testing.assert_allclose(head.predict(u, phi), expected, atol=1e-5)


def test_cross_validated_head_beats_platt_when_slope_depends_on_source() -> None:
    u, phi, labels = _two_groups(1000, 8, seed=2)
    reports = compare_calibrators({"head": CalibrationHead, "platt": PlattScaling}, u, phi, labels, k=5, seed=0)
    head, platt = reports["head"], reports["platt"]
    assert head.ece < platt.ece
    assert head.brier < platt.brier - 0.01
    assert head.log_loss < platt.log_loss - 0.03


def test_uninformative_source_stays_close_to_platt() -> None:
    rng = np.random.default_rng(3)
    u = rng.normal(size=(200, 64)).astype(np.float32)
    phi = rng.normal(size=200).astype(np.float32)
    labels = rng.random(200) < 1.0 / (1.0 + np.exp(-(2.0 * phi + 0.5)))
    head = CalibrationHead().fit(u, phi, labels, seed=0)
    platt = PlattScaling().fit(None, phi, labels)
    grid = np.linspace(-2, 2, 50, dtype=np.float32)
    diff = np.abs(head.predict(u[:50], grid) - platt.predict(None, grid))
    assert diff.max() < 0.1


def test_seeded_save_load_roundtrip(fitted, tmp_path: Path) -> None:
    head, u, phi, labels = fitted
    again = CalibrationHead().fit(u, phi, labels, seed=0)
    np.testing.assert_array_equal(again.predict(u, phi), head.predict(u, phi))
    folder = tmp_path / "heads"
    folder.mkdir()
    path = folder / "head.pt"
    head.save(path)
    assert [p.name for p in folder.iterdir()] == ["head.pt"]
    loaded = CalibrationHead.load(path)
    assert loaded.config == head.config
    np.testing.assert_array_equal(loaded.predict(u, phi), head.predict(u, phi))


def test_linear_and_hidden_heads_fit_quickly_without_mutating_inputs() -> None:
    u, phi, labels = _two_groups(200, 16, seed=4)
    u_before, phi_before = u.copy(), phi.copy()
    for config in (HeadConfig(hidden=0), HeadConfig(hidden=8, l2_grid=())):
        conf = CalibrationHead(config).fit(u, phi, labels, sample_weight=np.full(200, 2.0), seed=1).predict(u, phi)
        assert conf.shape == (200,) and conf.dtype == np.float32
        assert np.all((conf >= 0) & (conf <= 1))
    np.testing.assert_array_equal(u, u_before)
    np.testing.assert_array_equal(phi, phi_before)


def test_head_validates_inputs() -> None:
    with pytest.raises(ValueError):
        CalibrationHead().fit(None, np.zeros(3), np.array([0, 1, 0]))
    with pytest.raises(ValueError):
        CalibrationHead().fit(np.zeros((2, 4), np.float32), np.zeros(3), np.array([0, 1, 0]))
    with pytest.raises(RuntimeError):
        CalibrationHead().predict(np.zeros((1, 4), np.float32), np.zeros(1))


def test_few_labels_or_one_class_give_plain_platt() -> None:
    u, phi, labels = _two_groups(60, 8, seed=5)  # a 20 % hold-out would be < 20 pairs
    head = CalibrationHead().fit(u, phi, labels, seed=0)
    assert head.epochs_trained == 0
    platt = PlattScaling().fit(None, phi, labels)
    np.testing.assert_allclose(head.predict(u, phi), platt.predict(None, phi), atol=1e-4)
    one_class = CalibrationHead().fit(u, phi, np.ones(60, dtype=bool), seed=0).predict(u, phi)
    assert np.all(np.isfinite(one_class)) and one_class.min() > 0.9
