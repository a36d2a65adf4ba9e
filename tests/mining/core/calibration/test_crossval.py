"""Stratified folds and out-of-fold predictions: no pair is ever scored by a model trained on it."""

from typing import Self

import numpy as np
import pytest

from mining.core.calibration.baselines import IsotonicCalibration, PlattScaling
from mining.core.calibration.crossval import (
    calibration_report,
    compare_calibrators,
    cross_val_predict,
    stratified_folds,
)


class _Memoriser:
    """Predicts 1 for a score it was trained on and 0 otherwise: out-of-fold output must be all 0."""

    def fit(self, u, phi, labels, sample_weight=None, seed: int = 0) -> Self:
        self.seen = set(np.asarray(phi).tolist())
        return self

    def predict(self, u, phi) -> np.ndarray:
        return np.array([p in self.seen for p in np.asarray(phi).tolist()], dtype=np.float32)


def test_stratified_folds_balance_each_label() -> None:
    labels = np.r_[np.zeros(63), np.ones(37)].astype(int)
    folds = stratified_folds(labels, 5, seed=3)
    for value in (0, 1):
        counts = np.bincount(folds[labels == value], minlength=5)
        assert counts.max() - counts.min() <= 1
    assert np.bincount(folds).max() - np.bincount(folds).min() <= 1
    np.testing.assert_array_equal(folds, stratified_folds(labels, 5, seed=3))
    assert not np.array_equal(folds, stratified_folds(labels, 5, seed=4))
    with pytest.raises(ValueError):
        stratified_folds(labels, 1)


def test_cross_val_predict_never_uses_training_pairs() -> None:
    rng = np.random.default_rng(0)
    phi = rng.permutation(200).astype(np.float64)
    labels = rng.random(200) < 0.3
    oof = cross_val_predict(_Memoriser, None, phi, labels, k=5, seed=0)
    assert oof.shape == (200,) and oof.dtype == np.float32
    assert np.all(oof == 0.0)


def test_compare_calibrators_reports_out_of_fold_metrics() -> None:
    rng = np.random.default_rng(1)
    phi = rng.normal(size=400)
    labels = rng.random(400) < 1.0 / (1.0 + np.exp(-3.0 * phi))
    reports = compare_calibrators({"platt": PlattScaling, "isotonic": IsotonicCalibration}, None, phi, labels, k=4)
    assert list(reports) == ["platt", "isotonic"]
    oof = cross_val_predict(PlattScaling, None, phi, labels, k=4, seed=0)
    expected = calibration_report(oof, labels)
    assert reports["platt"].ece == pytest.approx(expected.ece)
    assert reports["platt"].brier == pytest.approx(expected.brier)
    assert reports["platt"].reliability.count.sum() == 400
    # Well-specified logistic data: Platt is close to calibrated out of fold.
    assert reports["platt"].ece < 0.06
    # In-sample isotonic looks better than its honest out-of-fold score.
    in_sample = IsotonicCalibration().fit(None, phi, labels).predict(None, phi)
    assert calibration_report(in_sample, labels).log_loss < reports["isotonic"].log_loss
