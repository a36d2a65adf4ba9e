"""core.precision_labels on hand-made band counts: the stratified mean and variance, collapsed strata, the decoy
prior's weight, and the bias spread from measured errors."""

import math

import numpy as np
import pytest

from mining.core.precision_labels import (
    METHOD,
    METHOD_LABELS,
    BandCounts,
    bias_sd_from_errors,
    decoy_variance,
    score_bands,
    settle_precision,
    stratified_precision,
)


def test_score_bands_equal_width_and_outside():
    assert score_bands(np.array([0.0, 0.5, 0.99, 1.0, -0.1]), 0.0, 1.0, 2).tolist() == [0, 1, 1, -1, -1]


def test_counts_from_scores_use_the_kept_sets_range():
    kept = np.arange(10.0)
    c = BandCounts.from_scores(kept, np.array([0.0, 9.0, 9.0, 42.0]), np.array([1.0, 0.0, 0.5, 1.0]))
    assert c.sizes.tolist() == [2, 2, 2, 2, 2]
    assert c.labelled.tolist() == [1, 0, 0, 0, 2]  # 42 lies outside the kept set: ignored
    assert c.good.tolist() == [1.0, 0.0, 0.0, 0.0, 0.5]
    assert c.n_labels == 3


def test_stratified_mean_and_variance_by_hand():
    e = stratified_precision(BandCounts(np.array([10, 30]), np.array([5, 10]), np.array([5.0, 5.0])))
    assert e.precision == pytest.approx(0.25 * 1.0 + 0.75 * 0.5)
    # q = (g + 1) / (n + 2), finite-population correction 1 - n / N
    var = 0.25**2 * 0.5 * (6 / 7) * (1 / 7) / 5 + 0.75**2 * (2 / 3) * 0.5 * 0.5 / 10
    assert e.variance == pytest.approx(var)
    assert e.low < e.precision < e.high
    assert e.n_labels == 15


def test_a_band_without_labels_joins_its_nearest_labelled_band():
    merged = stratified_precision(BandCounts(np.array([10, 5, 30]), np.array([5, 0, 10]), np.array([5.0, 0.0, 5.0])))
    by_hand = stratified_precision(BandCounts(np.array([15, 30]), np.array([5, 10]), np.array([5.0, 5.0])))
    assert merged.precision == pytest.approx(by_hand.precision)
    assert merged.precision == pytest.approx(15 / 45 + 30 / 45 * 0.5)


def test_no_label_in_the_kept_set_gives_none():
    c = BandCounts(np.array([10, 30]), np.array([0, 0]), np.array([0.0, 0.0]))
    assert stratified_precision(c) is None
    assert settle_precision(c, prior_precision=0.9, prior_variance=0.001) is None


def test_settled_is_the_precision_weighted_mean_of_decoys_and_labels():
    c = BandCounts(np.array([10, 30]), np.array([5, 10]), np.array([5.0, 5.0]))
    lab = stratified_precision(c)
    s = settle_precision(c, prior_precision=0.8, prior_variance=0.0004, bias_sd=0.03, trust=1.0)
    v0 = 0.0004 + 0.03**2
    w0 = (1 / v0) / (1 / v0 + 1 / lab.variance)
    assert s.method == METHOD
    assert s.prior_weight == pytest.approx(w0)
    assert s.precision == pytest.approx(w0 * 0.8 + (1 - w0) * 0.625)
    half = 1.959964 * math.sqrt(1 / (1 / v0 + 1 / lab.variance))
    assert (s.low, s.high) == pytest.approx((s.precision - half, s.precision + half), abs=1e-5)
    assert s.label_precision == pytest.approx(0.625)


def test_the_labels_weigh_whether_the_decoys_hold():
    c = BandCounts(np.array([10, 30]), np.array([5, 10]), np.array([5.0, 5.0]))
    lab = stratified_precision(c)  # 0.625
    fixed = settle_precision(c, prior_precision=0.8, prior_variance=0.0004, bias_sd=0.03, trust=1.0)
    s = settle_precision(c, prior_precision=0.8, prior_variance=0.0004, bias_sd=0.03, trust=0.9)
    v0 = 0.0004 + 0.03**2
    sd = math.sqrt(v0 + lab.variance)
    holds = 0.9 * math.exp(-0.5 * ((0.625 - 0.8) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
    w1 = holds / (holds + 0.1)
    assert s.precision == pytest.approx(w1 * fixed.precision + (1 - w1) * 0.625)
    assert s.prior_weight == pytest.approx(w1 * fixed.prior_weight)
    var = w1 * (1 / (1 / v0 + 1 / lab.variance) + fixed.precision**2)
    var += (1 - w1) * (lab.variance + 0.625**2) - s.precision**2
    assert s.high - s.low == pytest.approx(2 * 1.959964 * math.sqrt(var), abs=1e-5)
    # labels that agree with the decoys: the mixture barely differs from believing them
    agree = settle_precision(c, prior_precision=0.63, prior_variance=0.0004, bias_sd=0.03, trust=0.9)
    believed = settle_precision(c, prior_precision=0.63, prior_variance=0.0004, bias_sd=0.03, trust=1.0)
    assert agree.precision == pytest.approx(believed.precision, abs=0.002)


def test_many_labels_outweigh_the_decoys_and_none_means_labels_alone():
    few = BandCounts(np.array([1000]), np.array([20]), np.array([14.0]))
    many = BandCounts(np.array([1000]), np.array([800]), np.array([560.0]))
    w_few = settle_precision(few, prior_precision=0.72, prior_variance=0.0004).prior_weight
    w_many = settle_precision(many, prior_precision=0.72, prior_variance=0.0004).prior_weight
    assert w_few > 0.5 > w_many
    alone = settle_precision(many)
    assert alone.method == METHOD_LABELS and alone.prior_weight == 0.0
    assert alone.precision == pytest.approx(0.7)


def test_decoy_variance_and_bias_spread():
    assert decoy_variance(decoy_hits=3, n_kept=100, n_targets=200, n_decoys=100) == pytest.approx(2 * 4 * 4 / 100**2)
    errors, variances = np.array([0.03, -0.04]), np.array([0.0001, 0.0001])
    assert bias_sd_from_errors(errors, variances) == pytest.approx(math.sqrt(0.00125 - 0.0001))
    assert bias_sd_from_errors(np.array([0.001]), np.array([0.01])) == 0.0


def test_bad_input_raises():
    with pytest.raises(ValueError):
        BandCounts(np.array([1]), np.array([2]), np.array([0.0]))
    with pytest.raises(ValueError):
        settle_precision(BandCounts(np.array([5]), np.array([2]), np.array([1.0])), bias_sd=-1)
    with pytest.raises(ValueError):
        settle_precision(BandCounts(np.array([5]), np.array([2]), np.array([1.0])), trust=0.0)
    with pytest.raises(ValueError):
        score_bands(np.array([0.5]), 1.0, 1.0)
