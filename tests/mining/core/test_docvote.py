"""Sentence-vote scoring against a hand computation and a slow reference."""

import numpy as np

from mining.core.docvote import aligned_sentence_count, sentence_vote


def test_hand_example():
    # Two source sentences (doc 0, positions 0 and 1), three target sentences in docs 0, 0, 1.
    ids = np.array([[0, 2], [1, -1]])
    sims = np.array([[0.8, 0.2], [0.6, 0.0]])
    scores = sentence_vote(ids, sims, np.array([0, 0]), np.array([0, 1]), np.array([0, 0, 1]), np.array([0, 1, 0]),
                           n_tgt_docs=2)
    # doc 0 <- (x0,y0): -1 + 5*0.9 - 0 = 3.5 ; (x1,y1): -1 + 5*0.8 - 0 = 3.0  -> 6.5 from 2 votes
    # doc 1 <- (x0,y2): -2 + 5*0.6 - 2*0 = 1.0
    assert list(scores.tgt_doc) == [0, 1]
    np.testing.assert_allclose(scores.score, [6.5, 1.0])
    assert list(scores.n_votes) == [2, 1]
    assert list(scores.best().tgt_doc) == [0]


def test_matches_a_slow_reference_on_random_input():
    rng = np.random.default_rng(0)
    n_src, n_tgt, n, docs = 60, 80, 5, 7
    ids = rng.integers(0, n_tgt, size=(n_src, n))
    sims = rng.uniform(-1, 1, size=(n_src, n))
    sd, sp = rng.integers(0, docs, n_src), rng.integers(0, 10, n_src)
    td, tp = rng.integers(0, docs, n_tgt), rng.integers(0, 10, n_tgt)
    conf = rng.uniform(size=(n_src, n))
    got = sentence_vote(ids, sims, sd, sp, td, tp, n_tgt_docs=docs, confidence=conf, w1=3.0, w2=-0.5)
    ref: dict[tuple[int, int], float] = {}
    for i in range(n_src):
        for r in range(n):
            j = ids[i, r]
            key = (sd[i], td[j])
            ref[key] = ref.get(key, 0.0) - (r + 1) + 3.0 * conf[i, r] - 0.5 * abs(sp[i] - tp[j])
    keys = [(int(s), int(t)) for s, t in zip(got.src_doc, got.tgt_doc, strict=True)]
    assert set(keys) == set(ref)
    np.testing.assert_allclose(got.score, [ref[k] for k in keys])
    # sorted by source doc, then score descending
    for a in range(len(got.src_doc) - 1):
        assert got.src_doc[a] < got.src_doc[a + 1] or got.score[a] >= got.score[a + 1]
    ranked = got.ranked_targets(docs, n=3)
    assert ranked.shape == (docs, 3)


def test_count_baseline_uses_the_nearest_neighbour_only():
    ids = np.array([[0, 1], [0, 1], [1, 0]])
    scores = aligned_sentence_count(ids, np.array([0, 0, 0]), np.array([0, 1]), n_tgt_docs=2)
    assert list(zip(scores.tgt_doc, scores.score, strict=True)) == [(0, 2.0), (1, 1.0)]
