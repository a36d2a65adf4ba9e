"""Target-decoy precision: planted decoy hits give the known false count; a synthetic run's estimate covers its
measured precision; the estimate says why when it cannot be made; the decoys are what they claim."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mining.core.candidates import Strategy, mine_candidates
from mining.core.decoys import (
    fill_decoys,
    kind_weights,
    mutated_decoys,
    near_duplicates,
    nearest_similarity,
    sample_decoys,
    shuffled_decoys,
)
from mining.core.knn import knn_both_ways
from mining.core.margin import Margin
from mining.core.precision import MIN_KEPT, decoy_hits, estimate_precision, matched_threshold


def test_planted_decoy_hits_give_the_known_false_count():
    kept = np.r_[np.full(160, 2.0), np.full(40, 1.0)]  # 200 kept at threshold 1.0
    decoy = np.r_[np.full(20, 1.5), np.full(500, 0.5)]  # 20 decoy hits at or above 1.0
    est = estimate_precision(kept_scores=kept, decoy_scores=decoy, threshold=1.0, n_targets=1000, n_decoys=1000)
    assert est.ok and est.reason == ""
    assert (est.n_kept, est.decoy_hits, est.est_false) == (200, 20, 20.0)
    assert est.precision == pytest.approx(0.9)
    half = 1.959964 * math.sqrt(2 * 21)  # hits +- z * sqrt(2 (hits + 1))
    assert est.low == pytest.approx(1 - (20 + half) / 200, abs=1e-6)
    assert est.high == pytest.approx(1 - (20 - half) / 200, abs=1e-6)


def test_half_as_many_decoys_count_double():
    kept = np.full(100, 2.0)
    decoy = np.r_[np.full(5, 2.5), np.zeros(10)]
    est = estimate_precision(kept_scores=kept, decoy_scores=decoy, threshold=1.0, n_targets=1000, n_decoys=500)
    assert est.est_false == 10.0
    assert est.precision == pytest.approx(0.9)


def test_no_decoy_hit_still_has_an_interval():
    est = estimate_precision(
        kept_scores=np.full(100, 2.0), decoy_scores=np.zeros(50), threshold=1.0, n_targets=50, n_decoys=50
    )
    assert est.precision == 1.0 and est.high == 1.0
    assert est.low == pytest.approx(1 - 1.959964 * math.sqrt(2) / 100, abs=1e-6)


@pytest.mark.parametrize(
    "kw,words",
    [
        ({"threshold": None}, "no threshold"),
        ({"n_decoys": 100}, "100 decoys for 1000 target sentences"),
        ({"kept_scores": np.full(MIN_KEPT - 1, 2.0)}, f"{MIN_KEPT - 1} pairs kept"),
    ],
)
def test_no_estimate_says_why(kw, words):
    args = {
        "kept_scores": np.full(100, 2.0),
        "decoy_scores": np.zeros(5),
        "threshold": 1.0,
        "n_targets": 1000,
        "n_decoys": 1000,
    }
    est = estimate_precision(**{**args, **kw})
    assert not est.ok and est.precision is None and est.low is None
    assert words in est.reason
    got = est.to_dict()
    assert got["precision"] is None and got["est_false"] is None and words in got["reason"]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="confidence"):
        estimate_precision(
            kept_scores=np.ones(3), decoy_scores=np.ones(3), threshold=0, n_targets=1, n_decoys=1, confidence=1.0
        )
    with pytest.raises(ValueError, match="1-d"):
        estimate_precision(kept_scores=np.ones((2, 2)), decoy_scores=np.ones(3), threshold=0, n_targets=1, n_decoys=1)
    with pytest.raises(ValueError, match="1-d"):
        decoy_hits(np.ones((2, 2)), 3)


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_a_synthetic_runs_estimate_covers_its_measured_precision():
    """600 sources, 600 targets of which 300 translate a source (near copies), the rest unrelated; 600 unrelated
    decoys. Cut where wrong pairs are a minority (precision 0.83-0.97), the decoy estimate is within 5 points of the
    measured precision and its interval covers it. (Lower, where half the kept pairs are wrong, it says too low a
    precision: the decoys' tail is no longer a tail.)"""
    rng = np.random.default_rng(0)
    d, n, n_true = 32, 600, 300
    src = rng.normal(size=(n, d))
    tgt = rng.normal(size=(n, d))
    tgt[:n_true] = src[:n_true] + rng.normal(scale=0.9, size=(n_true, d))
    src, tgt, decoys = _unit(src), _unit(tgt), _unit(rng.normal(size=(n, d)))
    run = mine_candidates(knn_both_ways(src, tgt, 4), margin=Margin.RATIO, k=4, strategy=Strategy.MAX_SCORE)
    both = mine_candidates(
        knn_both_ways(src, np.concatenate([tgt, decoys]), 4), margin=Margin.RATIO, k=4, strategy=Strategy.MAX_SCORE
    )
    hit = decoy_hits(both.tgt_idx, n)
    assert hit.sum() > 100  # sources without a translation land on decoys about half the time
    true = (run.src_idx == run.tgt_idx) & (run.src_idx < n_true)
    for threshold in (1.1, 1.15, 1.2):
        kept = run.score >= threshold
        measured = float(true[kept].mean())
        est = estimate_precision(
            kept_scores=run.score, decoy_scores=both.score[hit], threshold=threshold, n_targets=n, n_decoys=n
        )
        assert est.n_kept == int(kept.sum())
        assert est.low <= measured <= est.high, (threshold, est, measured)
        assert abs(est.precision - measured) < 0.05


def test_shuffled_decoys_keep_the_words_in_another_order():
    texts = ["le chat dort sur le tapis", "un deux trois quatre", "bonjour", "a a a"]
    out = shuffled_decoys(texts, seed=3)
    assert out == shuffled_decoys(texts, seed=3)
    assert len(out) == 4
    for before, after in zip(texts[:2], out[:2], strict=True):
        assert after != before and sorted(after.split()) == sorted(before.split())
    assert out[2] == "jourbon"  # one word: its characters rotated by half
    assert out[3] == "a aa "  # one distinct word: rotated by characters too


def test_sampled_decoys_are_distinct_and_never_a_target_sentence():
    pool = ["Une phrase.", "une  phrase.", "Autre chose ici.", "La cible.", "Encore une.", "Encore une."]
    out = sample_decoys(pool, n=10, exclude=["la cible."], seed=0)
    assert sorted(out) == ["Autre chose ici.", "Encore une.", "Une phrase."]
    assert len(sample_decoys(pool, n=2, seed=0)) == 2
    with pytest.raises(ValueError, match="at least 1"):
        sample_decoys(pool, n=0)


def test_the_systematic_width_widens_the_interval_by_its_share_of_the_wrong_pairs():
    kept = np.r_[np.full(160, 2.0), np.full(40, 1.0)]  # 200 kept at threshold 1.0
    decoy = np.r_[np.full(20, 1.5), np.full(500, 0.5)]  # 20 decoy hits: 20 wrong pairs estimated
    est = estimate_precision(
        kept_scores=kept, decoy_scores=decoy, threshold=1.0, n_targets=1000, n_decoys=1000, systematic=0.5
    )
    half = 1.959964 * math.sqrt(2 * 21)
    assert est.precision == pytest.approx(0.9)  # the point estimate does not move
    assert est.low == pytest.approx(1 - (20 + half + 10) / 200, abs=1e-6)  # + 0.5 * 20 wrong pairs
    assert est.high == 1.0  # 20 - 12.7 - 10 < 0 wrong pairs: clipped at none
    assert est.systematic == 0.5 and est.to_dict()["systematic"] == 0.5
    with pytest.raises(ValueError, match="systematic"):
        estimate_precision(kept_scores=kept, decoy_scores=decoy, threshold=1.0, n_targets=1, n_decoys=1, systematic=-1)


def test_the_systematic_width_scales_with_the_decoys_and_is_clipped():
    # 40 hits among 500 decoys for 1000 targets: 80 wrong pairs estimated, +- 2 * 1.96 sqrt(2 * 41) of counting noise
    kw = {"kept_scores": np.full(400, 2.0), "decoy_scores": np.full(40, 2.0), "threshold": 1.0, "n_targets": 1000}
    est = estimate_precision(**kw, n_decoys=500, systematic=0.25)
    half = 2 * 1.959964 * math.sqrt(2 * 41)
    assert est.precision == pytest.approx(0.8)
    assert est.low == pytest.approx(1 - (80 + half + 20) / 400, abs=1e-6)
    assert est.high == pytest.approx(1 - (80 - half - 20) / 400, abs=1e-6)
    wide = estimate_precision(**kw, n_decoys=500, systematic=4.0)  # past 0 and 100 wrong pairs: clipped
    assert (wide.low, wide.high) == (0.0, 1.0)


def test_mutated_decoys_replace_a_share_of_the_words_and_change_every_digit():
    texts = ["le chat dort sur le tapis rouge ce soir", "un", ""]
    out = mutated_decoys(texts, rate=0.3, seed=1)
    assert out == mutated_decoys(texts, rate=0.3, seed=1) and out != mutated_decoys(texts, rate=0.3, seed=2)
    assert len(out) == 3 and out[2] == ""
    a, b = texts[0].split(), out[0].split()
    assert len(b) == 9 and sum(x != y for x, y in zip(a, b, strict=True)) == 3  # round(0.3 * 9) words, all changed
    vocab = {w for t in texts for w in t.split()}
    assert set(b) <= vocab  # replacements come from the side's own words
    assert out[1] != "un" and out[1] in vocab  # one word: replaced by another
    # digits: one word of 4 replaced ("3" by "de"), then every digit shifted by 1-9, never to itself
    assert mutated_decoys(["fichier 3 de 12", "sur"], rate=0.25, seed=1)[0] == "fichier de de 77"
    with pytest.raises(ValueError, match="rate"):
        mutated_decoys(texts, rate=0.0)


def test_near_copies_of_a_target_are_found_and_skipped_when_filling():
    targets = _unit(np.eye(4)[:2] + 0.0)  # e0, e1
    decoys = _unit(np.array([[1.0, 0.1, 0, 0], [0, 0, 1, 0], [0.6, 0.8, 0, 0], [0, 0, 0, 1], [0, 0.05, 0, 1]]))
    near = near_duplicates(decoys, targets, cut=0.9, batch=2)  # odd blocks
    assert near.tolist() == [True, False, False, False, False]
    assert near_duplicates(decoys, targets, cut=0.8).tolist() == [True, False, True, False, False]
    assert fill_decoys(["a", "b", "c", "d", "e"], near, 3) == [1, 2, 3]
    assert fill_decoys(["a", "b", "c", "d", "e"], np.ones(5, bool), 3) == []
    with pytest.raises(ValueError, match="one width"):
        near_duplicates(decoys, np.ones((2, 3)), cut=0.9)


def test_the_matched_threshold_keeps_as_many_real_hits_as_the_run():
    real = np.array([0.9, 1.4, 1.1, 1.3, 1.2])
    assert matched_threshold(real, 3) == 1.2  # 1.4, 1.3, 1.2 kept
    assert matched_threshold(real, 9) == 0.9  # fewer real hits than the run keeps: their lowest
    assert matched_threshold(real, 0) == math.inf and matched_threshold(np.zeros(0), 3) == math.inf
    with pytest.raises(ValueError, match="1-d"):
        matched_threshold(np.ones((2, 2)), 1)


def test_decoy_hits_are_counted_at_the_decoy_threshold_when_given():
    kept = np.r_[np.full(80, 2.0), np.full(20, 1.0)]  # 100 kept at 1.0
    decoy = np.array([1.5, 0.95, 0.9, 0.85, 0.5])  # 1 hit at 1.0, 3 at 0.9
    args = {"kept_scores": kept, "decoy_scores": decoy, "threshold": 1.0, "n_targets": 100, "n_decoys": 100}
    assert estimate_precision(**args).decoy_hits == 1
    est = estimate_precision(**args, decoy_threshold=0.9)
    assert (est.n_kept, est.decoy_hits, est.threshold) == (100, 3, 1.0)
    assert est.precision == pytest.approx(0.97)


def test_nearest_similarity_skips_a_row_itself_when_asked():
    x = _unit(np.array([[1.0, 0, 0], [0.8, 0.6, 0], [0, 0, 1]]))
    assert nearest_similarity(x, x, batch=2).tolist() == pytest.approx([1.0, 1.0, 1.0])
    assert nearest_similarity(x, x, self_index=np.arange(3), batch=2).tolist() == pytest.approx([0.8, 0.8, 0.0])
    assert nearest_similarity(x[[2, 0]], x, self_index=np.array([2, 0])).tolist() == pytest.approx([0.0, 0.8])
    assert nearest_similarity(x, np.zeros((0, 3))).tolist() == [-np.inf] * 3


def test_kind_weights_give_the_decoys_the_targets_spread():
    # targets: half with a near-copy among the targets (0.95), half without (0.3); decoys: 1 in 5 near a target
    target_nn = np.r_[np.full(50, 0.95), np.full(50, 0.3)]
    decoy_nn = np.r_[np.full(20, 0.95), np.full(80, 0.3)]
    w = kind_weights(decoy_nn, target_nn, bins=2)
    assert w.sum() == pytest.approx(100)
    assert w[:20] == pytest.approx(np.full(20, 0.5 / 0.2)) and w[20:] == pytest.approx(np.full(80, 0.5 / 0.8))
    capped = kind_weights(np.r_[0.95, np.full(99, 0.3)], target_nn, bins=2, cap=10.0)
    assert capped[0] / capped[1] == pytest.approx(10.0 / (0.5 / 0.99))  # 50 would be its share; capped at 10
    assert capped.sum() == pytest.approx(100)
