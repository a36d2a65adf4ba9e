"""Retrieve-then-rerank: the retrieval union, the restricted sentence kNN against brute force, votes equal to full
sentence-vote when every target is a candidate, the learnt weight, and the selection layout."""

import numpy as np
import pytest

from mining.core.docrerank import (
    Retrieved,
    candidate_sentence_knn,
    candidate_votes,
    combine,
    learn_weight,
    rank_within_source,
    ranked_targets,
    retrieve,
    selection_knn,
)
from mining.core.docvote import document_positions, sentence_vote
from mining.core.knn import knn_exact


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_retrieve_keeps_pairs_only_the_backward_search_finds():
    # target 2 is nobody's nearest (top_n = 1), but its own nearest source is 1: the pair (1, 2) is kept, rank 0
    u = _unit(np.array([[1, 0, 0], [0, 1, 0]], np.float32))
    v = _unit(np.array([[1, 0.1, 0], [0.1, 1, 0], [0, 0.8, 0.6]], np.float32))
    r = retrieve(u, v, 1)
    assert list(zip(r.src.tolist(), r.tgt.tolist(), r.fwd_rank.tolist(), strict=True)) == [
        (0, 0, 1),
        (1, 1, 1),
        (1, 2, 0),
    ]
    assert r.sim[2] == pytest.approx(0.8, abs=1e-6)


def _sides(seed: int, n_src: int = 6, n_tgt: int = 8, d: int = 16):
    rng = np.random.default_rng(seed)
    s_len, t_len = rng.integers(0, 5, n_src), rng.integers(1, 5, n_tgt)
    s_off = np.concatenate([[0], np.cumsum(s_len)]).astype(np.int64)
    t_off = np.concatenate([[0], np.cumsum(t_len)]).astype(np.int64)
    return _unit(rng.normal(size=(s_off[-1], d))), s_off, _unit(rng.normal(size=(t_off[-1], d))), t_off, rng


def test_candidate_sentence_knn_matches_brute_force_over_allowed_documents():
    s_emb, s_off, t_emb, t_off, rng = _sides(0)
    src = np.sort(rng.integers(0, 6, 14))
    tgt = rng.integers(0, 8, 14)
    keep = np.unique(src * 8 + tgt, return_index=True)[1]
    src, tgt = src[keep], tgt[keep]
    sims, ids = candidate_sentence_knn(s_emb, s_off, t_emb, t_off, src, tgt, 3)
    t_doc = np.repeat(np.arange(8), np.diff(t_off))
    for d in range(6):
        allowed = np.isin(t_doc, tgt[src == d])
        for row in range(s_off[d], s_off[d + 1]):
            full = s_emb[row] @ t_emb.T
            order = [j for j in np.argsort(-full, kind="stable") if allowed[j]][:3]
            assert ids[row, : len(order)].tolist() == order
            assert sims[row, : len(order)] == pytest.approx(full[order], abs=1e-5)
            assert (ids[row, len(order) :] == -1).all()


def test_votes_equal_full_sentence_vote_when_every_target_is_a_candidate():
    s_emb, s_off, t_emb, t_off, _ = _sides(1)
    src = np.repeat(np.arange(6), 8)
    tgt = np.tile(np.arange(8), 6)
    cands = Retrieved(src, tgt, np.zeros(48, np.float32), np.ones(48, np.int64))
    votes = candidate_votes(cands, s_emb, s_off, t_emb, t_off, neighbours=4)
    sims, ids = knn_exact(s_emb, t_emb, 4)
    full = sentence_vote(
        ids,
        sims,
        np.repeat(np.arange(6), np.diff(s_off)),
        document_positions(s_off),
        np.repeat(np.arange(8), np.diff(t_off)),
        document_positions(t_off),
        n_tgt_docs=8,
    )
    expected = np.zeros(48)
    expected[full.src_doc * 8 + full.tgt_doc] = full.score
    assert votes.score == pytest.approx(expected)
    n_sents = np.diff(s_off)[src]
    assert votes.norm == pytest.approx(expected / (np.maximum(n_sents, 1) * (4 + 5.0)))


def test_rank_within_source_and_ranked_targets():
    src = np.array([0, 0, 0, 2, 2])
    tgt = np.array([5, 6, 7, 1, 2])
    score = np.array([0.1, 0.9, 0.5, 0.3, 0.3])
    assert rank_within_source(src, score).tolist() == [3, 1, 2, 1, 2]
    assert ranked_targets(src, tgt, score, 3, 2).tolist() == [[6, 7], [-1, -1], [1, 2]]


def test_learn_weight_trusts_the_votes_when_retrieval_ranks_wrongly():
    # source 0: retrieval prefers the wrong target 1, votes the gold 0; source 1: both agree on gold 3
    src = np.array([0, 0, 1, 1])
    tgt = np.array([0, 1, 2, 3])
    sim = np.array([0.70, 0.80, 0.60, 0.90])
    vote = np.array([0.90, 0.20, 0.10, 0.80])
    w, p1 = learn_weight(src, tgt, sim, vote, {0: 0, 1: 3}, default=0.5)
    assert p1 == 1.0 and w == 0.5  # 0.5 already ranks both right: the default wins the tie
    w, p1 = learn_weight(src, tgt, sim, vote, {0: 0, 1: 3}, default=0.0)
    assert p1 == 1.0 and w == pytest.approx(0.15)  # the smallest weight that fixes source 0 (0.1 ties at 0.75)
    assert learn_weight(src, tgt, sim, vote, {1: 3}, default=0.0) == (0.0, 1.0)  # source 1 alone: any weight
    assert combine(sim, vote, 0.0).tolist() == sim.tolist()
    with pytest.raises(ValueError, match="weight must be in"):
        combine(sim, vote, 1.5)


def test_selection_knn_lays_sparse_scores_out_both_ways():
    knn = selection_knn(np.array([0, 0, 1]), np.array([1, 0, 1]), np.array([0.5, 0.9, 0.7]), 2, 3, 2)
    assert knn.fwd_ids.tolist() == [[0, 1], [1, -1]]
    assert knn.fwd_sims[0].tolist() == pytest.approx([0.9, 0.5])
    assert knn.bwd_ids.tolist() == [[0, -1], [1, 0], [-1, -1]]
    assert np.isneginf(knn.bwd_sims[2]).all()
