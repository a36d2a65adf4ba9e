"""Sentence-vote scoring against a hand computation and a slow reference."""

import numpy as np

from mining.core.docvote import VoteForm, aligned_sentence_count, document_positions, sentence_vote


def test_hand_example():
    # Two source sentences (doc 0, positions 0 and 1), three target sentences in docs 0, 0, 1.
    ids = np.array([[0, 2], [1, -1]])
    sims = np.array([[0.8, 0.2], [0.6, 0.0]])
    scores = sentence_vote(
        ids,
        sims,
        np.array([0, 0]),
        np.array([0, 1]),
        np.array([0, 0, 1]),
        np.array([0, 1, 0]),
        n_tgt_docs=2,
        form=VoteForm.PAPER,
    )
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
    got = sentence_vote(
        ids, sims, sd, sp, td, tp, n_tgt_docs=docs, confidence=conf, w1=3.0, w2=-0.5, form=VoteForm.PAPER
    )
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


def test_document_positions():
    offsets = np.array([0, 4, 4, 6])  # documents of 4, 0 and 2 sentences
    np.testing.assert_array_equal(document_positions(offsets, VoteForm.PAPER), [0, 1, 2, 3, 0, 1])
    np.testing.assert_allclose(document_positions(offsets), [0, 0.25, 0.5, 0.75, 0, 0.5])


def test_counted_form_rewards_the_document_with_more_votes():
    # Source doc 0 has 4 sentences; target doc 0 (its translation, 8 sentences: re-split) gets 4 rank-1 hits at
    # drifting positions, target doc 1 (2 sentences) one rank-1 hit at the same index. The printed form prefers
    # the one-vote document (every vote there is negative); the counted form with relative positions does not.
    src_doc, tgt_doc = np.zeros(5, np.int64), np.array([0] * 8 + [1] * 2)
    src_doc[4] = 1
    ids = np.array([[0, 8], [2, 9], [5, 8], [7, 9], [8, 0]])
    sims = np.full((5, 2), 0.2)
    src_off, tgt_off = np.array([0, 4, 5]), np.array([0, 8, 10])
    paper = sentence_vote(
        ids,
        sims,
        src_doc,
        document_positions(src_off, VoteForm.PAPER),
        tgt_doc,
        document_positions(tgt_off, VoteForm.PAPER),
        n_tgt_docs=2,
        form=VoteForm.PAPER,
    )
    counted = sentence_vote(
        ids, sims, src_doc, document_positions(src_off), tgt_doc, document_positions(tgt_off), n_tgt_docs=2
    )
    assert paper.best().tgt_doc[0] == 1
    assert counted.best().tgt_doc[0] == 0
    # counted vote of (x0, y0): (2 + 1) - 1 + 5 * 0.6 - 2 * 0 = 5.0
    assert counted.score[0] > 0 and float(counted.n_votes[0]) == 4


def test_counted_form_lets_a_sentence_vote_once_per_document():
    # One source sentence whose 3 neighbours all sit in target doc 0: one vote (its rank-1 hit), not three.
    ids, sims = np.array([[0, 1, 2]]), np.array([[1.0, 1.0, 1.0]])
    got = sentence_vote(ids, sims, np.array([0]), np.array([0.0]), np.zeros(3, np.int64), np.zeros(3), n_tgt_docs=1)
    assert list(got.n_votes) == [1]
    np.testing.assert_allclose(got.score, [3 + 1 - 1 + 5 * 1.0])
