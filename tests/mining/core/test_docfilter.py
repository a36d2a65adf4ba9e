"""The Afli et al. 2017 document-pair pre-filter: features by hand, thresholds, learning, and the all-pairs pruning
against a brute-force loop."""

import numpy as np
import pytest

from mining.core.docfilter import (
    DEFAULT_THRESHOLDS,
    PairFeatures,
    PrefilterThresholds,
    document_stats,
    learn_thresholds,
    pair_features,
    surviving_pairs,
)

SRC = [
    # doc 0: 3 sentences, 12 words, numbers {2024, 15, 3}, names {GIMP, Linux, https://gimp.org}
    "In 2024 GIMP ran on Linux.",
    "See https://gimp.org for 15 plugins.",
    "Version 3 is out.",
    # doc 1: 1 sentence, 4 words, no numbers, no names
    "Nothing to see here.",
]
TGT = [
    # doc 0: 2 sentences, numbers {2024, 15}, names {GIMP, Linux, https://gimp.org}
    "En 2024, GIMP tournait sous Linux.",
    "Voir https://gimp.org pour 15 greffons.",
    # doc 1: 2 sentences, numbers {7, 8, 9}
    "Les chiffres 7 et 8.",
    "Puis 9.",
]


@pytest.fixture
def stats():
    return document_stats(SRC, np.array([0, 3, 4])), document_stats(TGT, np.array([0, 2, 4]))


def test_document_stats_counts_sentences_words_numbers_and_names(stats):
    src, tgt = stats
    assert src.n_sentences.tolist() == [3, 1] and tgt.n_sentences.tolist() == [2, 2]
    assert src.n_words.tolist() == [6 + 6 + 4, 4]
    assert np.diff(src.numbers.indptr).tolist() == [3, 0]  # 2024, 15, 3
    assert np.diff(src.names.indptr).tolist() == [3, 0]  # GIMP, Linux, the URL ("In", "See", "Version" open sentences)
    assert np.diff(tgt.numbers.indptr).tolist() == [2, 3]


def test_pair_features_by_hand(stats):
    f = pair_features(*stats, np.array([0, 0, 1]), np.array([0, 1, 1]), min_entities=2)
    assert f.sentence_ratio.tolist() == pytest.approx([2 / 3, 2 / 3, 1 / 2])
    assert f.number_overlap[:2].tolist() == pytest.approx([2 / 3, 0.0])  # {2024, 15} shared of 3; none of 3
    assert f.name_overlap[0] == pytest.approx(1.0)
    assert f.name_overlap[1] == 0.0  # three names against none
    assert np.isnan(f.name_overlap[2])  # fewer than 2 names on either side: not judged
    assert f.number_overlap[2] == pytest.approx(0.0)  # doc 1 has no number, target doc 1 three
    assert f.as_dicts()[2]["name_overlap"] is None and f.as_dicts()[0]["name_overlap"] == 1.0


def test_thresholds_name_the_first_failing_rule_and_pass_unjudged_pairs():
    f = PairFeatures(
        np.array([0.9, 0.1, 0.9, 0.9]),
        np.array([0.9, 0.1, 0.2, 0.9]),
        np.array([np.nan, 0.5, 0.5, 0.0]),
        np.array([0.0, 0.0, 0.0, 0.0]),
    )
    t = PrefilterThresholds(sentence_ratio=0.5, word_ratio=0.5, number_overlap=0.1)
    assert t.reasons(f).tolist() == ["", "sentence_ratio", "word_ratio", "number_overlap"]
    assert t.passes(f).tolist() == [True, False, False, False]
    with pytest.raises(ValueError, match="word_ratio must be in"):
        PrefilterThresholds(word_ratio=1.5)


def test_learn_thresholds_keeps_the_gold_pairs_and_falls_back_below_min_pairs():
    rng = np.random.default_rng(0)
    n = 400
    f = PairFeatures(rng.uniform(0.5, 1, n), rng.uniform(0.6, 1, n), rng.uniform(0.3, 1, n), np.full(n, np.nan))
    t = learn_thresholds(f, keep=0.99, slack=1.0)
    assert t.source == "learnt on 400 pairs" and t.name_overlap == 0.0  # no judged names: not enforced
    assert t.passes(f).mean() >= 0.99
    assert t.sentence_ratio == pytest.approx(np.quantile(f.sentence_ratio, 0.0025))
    assert learn_thresholds(f.take(np.arange(10))) == DEFAULT_THRESHOLDS


def test_surviving_pairs_match_a_brute_force_loop():
    rng = np.random.default_rng(1)
    words = ["alpha", "Beta", "7", "12", "Gamma", "delta", "99", "URL www.example.org", "x"]

    def side(n_docs: int) -> tuple[list[str], np.ndarray]:
        lengths = rng.integers(0, 5, n_docs)
        sents = [" ".join(rng.choice(words, rng.integers(1, 6))) for _ in range(int(lengths.sum()))]
        return sents, np.concatenate([[0], np.cumsum(lengths)])

    src, tgt = document_stats(*side(23)), document_stats(*side(17))
    t = PrefilterThresholds(sentence_ratio=0.3, word_ratio=0.4, number_overlap=0.2, name_overlap=0.1, min_entities=2)
    s_idx, t_idx = surviving_pairs(src, tgt, t, block=5)
    expected = [
        (s, u)
        for s in range(23)
        for u in range(17)
        if t.passes(pair_features(src, tgt, np.array([s]), np.array([u]), min_entities=2))[0]
    ]
    assert list(zip(s_idx.tolist(), t_idx.tolist(), strict=True)) == expected
    assert 0 < len(expected) < 23 * 17
