"""The label-free threshold recovers the F1-best cut of synthetic score mixtures and of a synthetic mining run."""

from __future__ import annotations

import numpy as np
import pytest

from mining.core.candidates import Strategy, mine_candidates
from mining.core.default_threshold import MIN_CANDIDATES, ThresholdMethod, default_threshold, fit_two_gaussians
from mining.core.knn import knn_both_ways
from mining.core.margin import Margin
from mining.core.threshold import best_f1_threshold, sweep


def _f1_at(scores: np.ndarray, labels: np.ndarray, threshold: float, n_positive: int) -> tuple[float, float]:
    """(F1, precision) of keeping score >= threshold."""
    sw = sweep(scores, labels, n_positive=n_positive)
    i = int(np.searchsorted(-sw.thresholds, -threshold))
    return float(sw.f1[i]), float(sw.precision[i])


def _mixture(seed: int, n_false: int, n_true: int, false=(1.0, 0.05), true=(1.3, 0.08)):
    rng = np.random.default_rng(seed)
    scores = np.concatenate([rng.normal(*false, n_false), rng.normal(*true, n_true)])
    labels = np.r_[np.zeros(n_false, bool), np.ones(n_true, bool)]
    return scores, labels


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("n_false,n_true", [(6000, 1500), (8000, 800), (2000, 2000)])
def test_recovers_the_best_cut_of_a_two_gaussian_mixture(seed: int, n_false: int, n_true: int) -> None:
    scores, labels = _mixture(seed, n_false, n_true)
    best = best_f1_threshold(scores, labels)

    got = default_threshold(scores)

    f1, precision = _f1_at(scores, labels, got.threshold, int(labels.sum()))
    assert got.method is ThresholdMethod.MIXTURE
    assert abs(got.threshold - best.threshold) < 0.03
    assert f1 >= best.f1 - 0.01
    assert abs(got.estimated_precision - precision) < 0.03
    assert abs(got.estimated_true - n_true) < 0.1 * n_true
    assert got.n_kept == int((scores >= got.threshold).sum())


def test_a_long_upper_tail_and_one_sided_candidates_do_not_move_the_cut() -> None:
    rng = np.random.default_rng(5)
    scores, labels = _mixture(5, 6000, 1500)
    # True pairs with a long upper tail (as the ratio margin at k = 16 gives), and one-sided candidates (max-score
    # mining) scoring low: neither is the false pairs' bell.
    tail = 1.3 + rng.exponential(0.4, 300)
    junk = rng.normal(0.8, 0.15, 3000)
    all_scores = np.concatenate([scores, tail, junk])
    all_labels = np.r_[labels, np.ones(300, bool), np.zeros(3000, bool)]
    mutual = np.r_[np.ones(len(scores) + 300, bool), np.zeros(3000, bool)]
    best = best_f1_threshold(all_scores, all_labels)

    got = default_threshold(all_scores, mutual)

    f1, _ = _f1_at(all_scores, all_labels, got.threshold, int(all_labels.sum()))
    assert abs(got.threshold - best.threshold) < 0.03
    assert f1 >= best.f1 - 0.01


@pytest.mark.parametrize(
    "margin,k", [(Margin.RATIO, 4), (Margin.RATIO, 16), (Margin.DISTANCE, 4), (Margin.DISTANCE, 16)]
)
def test_on_a_synthetic_mining_run_the_cut_is_near_the_best(margin: Margin, k: int) -> None:
    """Clustered random sentences, 500 of 3000 sources with a noisy translation among 3000 targets."""
    rng = np.random.default_rng(0)
    n, n_true, d = 3000, 500, 64
    centres = rng.normal(size=(30, d))
    src = centres[rng.integers(30, size=n)] * 0.6 + rng.normal(size=(n, d))
    tgt = centres[rng.integers(30, size=n)] * 0.6 + rng.normal(size=(n, d))
    s_true, t_true = rng.permutation(n)[:n_true], rng.permutation(n)[:n_true]
    tgt[t_true] = src[s_true] + 1.1 * rng.normal(size=(n_true, d))
    src = (src / np.linalg.norm(src, axis=1, keepdims=True)).astype(np.float32)
    tgt = (tgt / np.linalg.norm(tgt, axis=1, keepdims=True)).astype(np.float32)
    gold = set(zip(s_true.tolist(), t_true.tolist(), strict=True))
    cands = mine_candidates(knn_both_ways(src, tgt, k), margin=margin, k=k, strategy=Strategy.MAX_SCORE)
    labels = np.array([(int(a), int(b)) in gold for a, b in zip(cands.src_idx, cands.tgt_idx, strict=True)])
    best = best_f1_threshold(cands.score, labels, n_positive=n_true)

    got = default_threshold(cands.score, cands.direction == 3)

    f1, precision = _f1_at(cands.score, labels, got.threshold, n_true)
    assert f1 >= best.f1 - 0.02
    assert abs(got.estimated_precision - precision) < 0.05


def test_fit_two_gaussians_finds_both_components() -> None:
    scores, _ = _mixture(3, 4000, 1000, false=(0.0, 1.0), true=(5.0, 0.5))
    w1, (m0, s0), (m1, s1) = fit_two_gaussians(scores)
    assert w1 == pytest.approx(0.2, abs=0.01)
    assert (m0, s0, m1, s1) == pytest.approx((0.0, 1.0, 5.0, 0.5), abs=0.06)


def test_too_few_or_mismatched_scores_are_refused() -> None:
    with pytest.raises(ValueError, match=f"needs at least {MIN_CANDIDATES}"):
        default_threshold(np.linspace(0, 1, MIN_CANDIDATES - 1))
    with pytest.raises(ValueError, match="found from both sides"):
        default_threshold(np.linspace(0, 1, 200), np.zeros(200, bool))
    with pytest.raises(ValueError, match="mutual has shape"):
        default_threshold(np.linspace(0, 1, 200), np.ones(10, bool))


def test_to_dict_names_method_and_assumption() -> None:
    scores, _ = _mixture(0, 2000, 500)
    d = default_threshold(scores).to_dict()
    assert d["method"] == "mixture"
    assert "bell curves" in d["assumption"]
    assert set(d) == {
        "threshold",
        "method",
        "estimated_precision",
        "estimated_recall",
        "estimated_f1",
        "estimated_true",
        "n_kept",
        "n_candidates",
        "assumption",
    }


def test_a_degenerate_mixture_fit_falls_back_to_the_false_pairs_bell(monkeypatch) -> None:
    """A real run's scores (Debian Reference en-de, ratio k = 4) where 76 % of the mutual candidates are true pairs:
    the mixture's true component collapses onto the top clip's point mass (it kept 13 pairs, F1 0.107 against 0.870
    at best); the false pairs' bell alone keeps 178 with F1 0.863."""
    import json
    from pathlib import Path

    import mining.core.default_threshold as dt

    data = json.loads((Path(__file__).resolve().parents[2] / "data" / "debref-de-ratio4-scores.json").read_text())
    scores, mutual, gold = np.array(data["score"]), np.array(data["mutual"]), np.array(data["gold"])
    best = best_f1_threshold(scores, gold, n_positive=data["n_gold"])

    got = default_threshold(scores, mutual)

    f1, _ = _f1_at(scores, gold, got.threshold, data["n_gold"])
    assert got.method is ThresholdMethod.FALSE_BELL and got.n_kept == 178
    assert round(best.f1, 3) == 0.870 and round(f1, 3) == 0.863
    monkeypatch.setattr(dt, "DEGENERATE_SHARE", 0.0)  # without the guard: the collapse
    collapsed = default_threshold(scores, mutual)
    assert collapsed.method is ThresholdMethod.MIXTURE and collapsed.n_kept == 13
