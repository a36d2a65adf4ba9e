"""Kappa against hand computations and textbook values."""

import math

import numpy as np
import pytest

from mining.core.agreement import cohen_kappa, fleiss_kappa


def test_cohen_kappa_hand_example():
    # 10 items: agree on 7 (4 GOOD, 3 BAD); rater a says GOOD 6 times, rater b 5 times.
    a = np.array(["G"] * 6 + ["B"] * 4)
    b = np.array(["G", "G", "G", "G", "B", "B", "B", "B", "B", "G"])
    po = 0.7
    pe = 0.6 * 0.5 + 0.4 * 0.5
    assert cohen_kappa(a, b) == pytest.approx((po - pe) / (1 - pe))


def test_cohen_kappa_perfect_and_undefined():
    assert cohen_kappa(np.array([1, 0, 1]), np.array([1, 0, 1])) == 1.0
    assert math.isnan(cohen_kappa(np.array([1, 1]), np.array([1, 1])))


def test_fleiss_kappa_wikipedia_example():
    # The worked example of Fleiss (1971) as given on Wikipedia: 10 items, 14 raters, 5 categories -> 0.210
    counts = np.array(
        [
            [0, 0, 0, 0, 14],
            [0, 2, 6, 4, 2],
            [0, 0, 3, 5, 6],
            [0, 3, 9, 2, 0],
            [2, 2, 8, 1, 1],
            [7, 7, 0, 0, 0],
            [3, 2, 6, 3, 0],
            [2, 5, 3, 2, 2],
            [6, 5, 2, 1, 0],
            [0, 2, 2, 3, 7],
        ]
    )
    assert fleiss_kappa(counts) == pytest.approx(0.210, abs=1e-3)


def test_fleiss_kappa_needs_equal_rater_counts():
    with pytest.raises(ValueError):
        fleiss_kappa(np.array([[1, 1], [2, 1]]))
