"""P@N and pair precision / recall / F1 on hand-made examples."""

import numpy as np
import pytest

from mining.core.metrics import precision_at, precision_at_n, prf


def test_precision_at_n() -> None:
    ids = np.array([[3, 1, 2], [0, 2, 1], [2, 0, -1], [1, 1, 1]])
    gold = np.array([3, 2, 1, 0])
    assert precision_at_n(ids, gold, 1) == 0.25
    assert precision_at_n(ids, gold, 2) == 0.5
    assert precision_at_n(ids, gold, 3) == 0.5
    assert precision_at(ids, gold, (1, 2)) == {1: 0.25, 2: 0.5}
    with pytest.raises(ValueError):
        precision_at_n(ids, gold[:2], 1)


def test_prf_counts_duplicates_once() -> None:
    pred = np.array([[0, 0], [1, 2], [1, 2], [2, 1], [5, 5]])
    gold = np.array([[0, 0], [1, 2], [3, 3]])
    out = prf(pred, gold)
    assert (out.n_pred, out.n_gold, out.n_correct) == (4, 3, 2)
    assert out.precision == pytest.approx(0.5)
    assert out.recall == pytest.approx(2 / 3)
    assert out.f1 == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))


def test_prf_pairs_are_ordered() -> None:
    # (1, 2) and (2, 1) are different pairs; (a*base + b) keys must not collide.
    out = prf(np.array([[2, 1], [0, 12], [1, 2]]), np.array([[1, 2], [1, 12]]))
    assert out.n_correct == 1


def test_prf_matches_set_reference() -> None:
    rng = np.random.default_rng(0)
    pred = rng.integers(0, 40, (300, 2))
    gold = rng.integers(0, 40, (200, 2))
    ps, gs = set(map(tuple, pred.tolist())), set(map(tuple, gold.tolist()))
    out = prf(pred, gold)
    assert out.n_correct == len(ps & gs)
    assert out.precision == pytest.approx(len(ps & gs) / len(ps))
    assert out.recall == pytest.approx(len(ps & gs) / len(gs))


def test_prf_empty() -> None:
    out = prf(np.zeros((0, 2), dtype=int), np.array([[1, 1]]))
    assert (out.precision, out.recall, out.f1) == (0.0, 0.0, 0.0)
