"""The pieces of a run's re-scoring (core.evidence_rescore), on hand-made arrays."""

import numpy as np
import pytest

from mining.core.enums import Margin
from mining.core.evidence import pair_evidence
from mining.core.evidence_rescore import (
    MIN_POSITIVES,
    candidate_neighbours,
    confident_rows,
    median3_threshold,
    model_from_dict,
    model_to_dict,
    neighbour_pairs,
    rescore,
    score_pairs,
)
from mining.core.evidence_scorer import fit_logistic
from mining.core.types import Candidates, KnnResult


def test_neighbour_pairs_take_the_first_other_target_and_its_similarity():
    fwd_ids = np.array([[5, 7, 8], [9, 9, -1], [4, -1, -1]])
    fwd_sims = np.array([[0.9, 0.8, 0.7], [0.9, 0.85, 0.0], [0.9, -np.inf, -np.inf]])
    rows, tgt, cos = neighbour_pairs(np.array([5, 9, 4]), fwd_ids, fwd_sims)
    assert rows.tolist() == [0] and tgt.tolist() == [7]
    np.testing.assert_allclose(cos, [0.8])


def test_candidate_neighbours_score_the_next_best_target_on_the_runs_margin():
    knn = KnnResult(
        fwd_sims=np.array([[0.9, 0.5], [0.8, 0.6]], np.float32),
        fwd_ids=np.array([[0, 1], [1, 2]]),
        bwd_sims=np.array([[0.9, 0.3], [0.8, 0.5], [0.6, 0.2]], np.float32),
        bwd_ids=np.array([[0, 1], [1, 0], [1, 0]]),
    )
    cands = Candidates(
        src_idx=np.array([0]),
        tgt_idx=np.array([0]),
        cosine=np.array([0.9], np.float32),
        score=np.array([1.5], np.float32),
        fwd_mean=np.array([0.7], np.float32),
        bwd_mean=np.array([0.6], np.float32),
        rank=np.array([1]),
        direction=np.array([3], np.uint8),
    )
    nb = candidate_neighbours(knn, cands, 2, Margin.RATIO)
    assert nb["rows"].tolist() == [0] and nb["tgt"].tolist() == [1]
    np.testing.assert_allclose(nb["cosine"], [0.5])
    # ratio margin: cos / ((source mean 0.7 + target 1's mean (0.8 + 0.5) / 2) / 2)
    np.testing.assert_allclose(nb["score"], [0.5 / 0.675], rtol=1e-6)


def test_confident_rows_of_a_small_run_are_half_its_mutual_kept_pairs():
    score = np.array([5.0, 4.0, 3.0, 2.0, 1.0])
    direction = np.array([3, 1, 3, 3, 3])
    passed = np.array([True, True, False, True, True])
    rows, rule = confident_rows(score, direction, passed)
    assert rows.tolist() == [0, 3] and rule == "fallback_share"


def test_length_dev_from_a_given_centre():
    ev = pair_evidence(["abcd"], ["abcdefgh"], length_center=0.0)
    assert ev.column("length_dev")[0] == pytest.approx(np.log(2))
    assert ev.length_center == 0.0
    assert pair_evidence(["abcd"], ["abcdefgh"]).column("length_dev")[0] == 0.0  # its own median


def test_the_model_round_trips_through_json():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 3))
    model = fit_logistic(x, x[:, 0] + 0.3 * rng.standard_normal(40) > 0, l2=1.0, names=("a", "b", "c"))
    again = model_from_dict(model_to_dict(model))
    assert again.names == ("a", "b", "c")
    np.testing.assert_array_equal(again.logit(x), model.logit(x))


def test_median3_needs_enough_mutual_candidates():
    cut = median3_threshold(np.arange(10.0), np.arange(10.0), np.ones(10, bool))
    assert cut.threshold is None and cut.n_kept == 10 and "at least 50" in cut.reason


def test_median3_keeps_the_median_of_its_three_counts():
    rng = np.random.default_rng(1)
    margin = np.r_[rng.normal(1.3, 0.05, 80), rng.normal(1.0, 0.05, 120)]
    logit = np.r_[rng.normal(3.0, 1.0, 80), rng.normal(-3.0, 1.0, 120)]
    cut = median3_threshold(logit, margin, np.ones(200, bool))
    assert set(cut.counts) == {"same_count", "mixture", "expected_f1"}
    assert cut.n_kept == sorted(cut.counts.values())[1]
    assert cut.threshold == np.sort(logit)[::-1][cut.n_kept - 1]
    assert 70 <= cut.n_kept <= 90  # the 80 pairs of the higher bell, give or take the overlap


def _pairs(numbers_s, numbers_t, score, cosine):
    src = [f"The report lists {n} files." for n in numbers_s]
    tgt = [f"Le rapport compte {n} fichiers." for n in numbers_t]
    return np.asarray(score, float), np.asarray(cosine, float), src, tgt


def test_rescore_demotes_a_pair_whose_numbers_disagree_and_scores_other_pairs_alike():
    rng = np.random.default_rng(2)
    n = 30
    pos = _pairs(range(n), range(n), rng.normal(1.3, 0.05, n), rng.normal(0.8, 0.05, n))
    neg = _pairs(range(n), range(100, 100 + n), rng.normal(1.05, 0.05, n), rng.normal(0.6, 0.05, n))
    # two candidates with the same margin and cosine: numbers agree, numbers disagree
    cands = _pairs([7, 7], [7, 8], [1.25, 1.25], [0.78, 0.78])
    res = rescore(cands=cands, passed=np.ones(2, bool), mutual=np.ones(2, bool), positives=pos, negatives=neg)
    assert res.logit[0] > res.logit[1]
    assert res.used == ("text",) and "dict_src" not in res.model.names
    assert res.cut.threshold is None  # two candidates: no cut read off them
    again = score_pairs(res.model, *cands, length_center=res.length_center)
    np.testing.assert_allclose(again, res.logit)
    with pytest.raises(ValueError, match=f"at least {MIN_POSITIVES}"):
        rescore(
            cands=cands,
            passed=np.ones(2, bool),
            mutual=np.ones(2, bool),
            positives=tuple(a[: MIN_POSITIVES - 1] for a in pos),
            negatives=neg,
        )
    with pytest.raises(ValueError, match="trained on"):
        score_pairs(res.model, *cands, length_center=0.0, dicts=({"report": frozenset({"rapport"})}, {}))
