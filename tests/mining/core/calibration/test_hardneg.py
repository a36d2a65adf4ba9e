"""Positives and hard negatives from reviewed pairs."""

import numpy as np
import pytest

from mining.core.calibration.hardneg import review_training_pairs


def test_review_training_pairs_hand_example() -> None:
    labels = np.array([1, 0, 0, 1, 0, 0])
    scores = np.array([0.9, 0.85, 0.2, 0.4, 0.95, 0.7])
    positives, hard = review_training_pairs(labels, scores, min_score=0.7)
    np.testing.assert_array_equal(positives, [0, 3])
    np.testing.assert_array_equal(hard, [4, 1, 5])  # BAD with score >= 0.7, highest first
    _, none = review_training_pairs(labels, scores, min_score=0.99)
    assert none.size == 0 and none.dtype == np.int64


def test_review_training_pairs_validates() -> None:
    with pytest.raises(ValueError):
        review_training_pairs(np.array([1, 2]), np.array([0.1, 0.2]), 0.0)
    with pytest.raises(ValueError):
        review_training_pairs(np.array([1, 0]), np.array([0.1]), 0.0)
