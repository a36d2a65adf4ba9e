"""One document method applied to two sides' documents, as a document run applies it: scoring, then selection.

`match_documents` is the single place where a `DocMethod` becomes scores and selected pairs; the run handler
(services/document_runs.py), the evaluation (`doc_evaluation`) and the benchmarks all call it, so a method's figure
is the same wherever it is measured. Its result also carries each source document's raw ranking (by the method's
own score, before margin and selection) for P@N.

- SENTENCE_AVG, HIDE, BOW: document embeddings (a `DocumentEmbedder`), kNN both ways, the margin over k neighbours
  and the strategy (`candidates.mine_candidates`).
- SENTENCE_VOTE, COUNT: kNN of every source sentence over every target sentence, then the vote (or the count); each
  source document's best-scoring target.
- RERANK: `docrerank`: retrieval by the embedder's document embeddings (HiDE, or Sentence-Avg), the pre-filter, votes
  inside the candidates, a combined score, then the margin and the strategy as for the embedding methods.

With both sides' `DocStats`, the pre-filter's features are computed for every selected pair (and RERANK prunes its
candidates with them); a selected pair that fails gets its rule as filter reason (kept, as sentence runs keep theirs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mining.core.defaults import DEFAULT_K

from .candidates import Strategy, mine_candidates
from .docembed import DocumentEmbedder, Documents, Side
from .docfilter import DEFAULT_THRESHOLDS, DocStats, PrefilterThresholds, learn_thresholds, pair_features
from .docmethod import DocMethod
from .docrerank import (
    DEFAULT_WEIGHT,
    candidate_votes,
    combine,
    learn_weight,
    rank_within_source,
    ranked_targets,
    retrieve,
    selection_knn,
    with_pairs,
)
from .docvote import VoteForm, aligned_sentence_count, document_positions, sentence_vote
from .knn import knn_both, knn_method_for, knn_search
from .margin import Margin
from .urlsignals import UrlPairs

# What a URL language-marker match adds to RERANK's combined score (which lies in about [0, 1]) by default. Chosen
# leave-one-collection-out on the crawl bench (bench/document_quality.py --crawl, docs/BENCHMARKS.md).
DEFAULT_URL_WEIGHT = 0.2

# (sims, ids) of the sentence kNN -> (n_s, N) calibrated f1 of each hit, or None for the mapped cosine
Confidence = Callable[[np.ndarray, np.ndarray], "np.ndarray | None"]


@dataclass(frozen=True)
class DocMatchConfig:
    """How a method scores and selects (the run's parameters, typed).

    Attributes:
        k: margin neighbourhood (and candidates per document for the selection), >= 1.
        margin, strategy, threshold: the selection, as in sentence mining (threshold on the margin score).
        neighbours: sentence kNN width N of the vote and the count.
        w1, w2, vote_form: the vote's weights and form (`docvote`).
        top_n: RERANK: targets retrieved per source document (and sources per target). 5 by measurement
            (bench/document_quality.py --top-n-sweep, docs/BENCHMARKS.md): on every bench collection the true
            target was retrieved as often at 5 as at 10, at half the candidates.
        rerank_weight: RERANK: the vote's share of the combined score, in [0, 1].
        url_weight: RERANK: what a URL language-marker match (`urlsignals`) adds to the combined score, in [0, 1]
            (0: URLs are not read).
        prefilter: thresholds of the pre-filter (None: not applied; RERANK then prunes nothing).
        ranked: targets kept per source document in the raw ranking (for P@N).
    """

    k: int = DEFAULT_K
    margin: Margin = Margin.RATIO
    strategy: Strategy = Strategy.MAX_SCORE
    threshold: float | None = None
    neighbours: int = 10
    w1: float = 5.0
    w2: float = -2.0
    vote_form: VoteForm = VoteForm.COUNTED
    top_n: int = 5
    rerank_weight: float = DEFAULT_WEIGHT
    url_weight: float = DEFAULT_URL_WEIGHT
    prefilter: PrefilterThresholds | None = DEFAULT_THRESHOLDS
    ranked: int = 10

    def __post_init__(self) -> None:
        for name in ("k", "neighbours", "top_n", "ranked"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("rerank_weight", "url_weight"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")


@dataclass(frozen=True)
class DocumentMatch:
    """Selected document pairs and the raw ranking.

    Attributes:
        src, tgt: (p,) int64 selected pairs, by score descending.
        cosine: (p,) float64 the document-embedding cosine (0 for the vote methods).
        score: (p,) float64 the pair's score (margin score, or the summed votes / count).
        filter_reason: (p,) object, the pre-filter rule a pair fails, '' when it passes or was not checked.
        evidence: p dicts, what scored each pair.
        ranked: (n_src, ranked) int64 targets by the method's raw score (-1 padding).
        stats: run-level figures (candidates retrieved and pruned, the vote's weight, ...).
    """

    src: np.ndarray
    tgt: np.ndarray
    cosine: np.ndarray
    score: np.ndarray
    filter_reason: np.ndarray
    evidence: list[dict[str, Any]]
    ranked: np.ndarray
    stats: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.src)


def _pad(ids: np.ndarray, n: int) -> np.ndarray:
    ids = np.asarray(ids, np.int64)[:, :n]
    if ids.shape[1] < n:
        ids = np.hstack([ids, np.full((len(ids), n - ids.shape[1]), -1, np.int64)])
    return ids


def _select(
    src: np.ndarray, tgt: np.ndarray, score: np.ndarray, n_src: int, n_tgt: int, config: DocMatchConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Margin + strategy over sparse pair scores: (src, tgt, raw score, margin score, fwd_mean, bwd_mean)."""
    k = min(config.k, max(n_src, 1), max(n_tgt, 1))
    cands = mine_candidates(
        selection_knn(src, tgt, np.asarray(score, np.float32), n_src, n_tgt, k),
        margin=config.margin,
        k=k,
        strategy=config.strategy,
        threshold=config.threshold,
    )
    return cands.src_idx, cands.tgt_idx, cands.cosine, cands.score, cands.fwd_mean, cands.bwd_mean


def _embedding_match(
    method: DocMethod, u: np.ndarray, v: np.ndarray, config: DocMatchConfig
) -> tuple[dict[str, np.ndarray], list[dict[str, Any]], np.ndarray]:
    kk = min(max(config.k, config.ranked), len(u), len(v))
    knn = knn_both(u, v, kk, method=knn_method_for(len(u), len(v)))
    k = min(config.k, len(u), len(v))
    cands = mine_candidates(knn, margin=config.margin, k=k, strategy=config.strategy, threshold=config.threshold)
    evidence = [
        {"method": method.value, "fwd_mean": round(float(f), 5), "bwd_mean": round(float(b), 5)}
        for f, b in zip(cands.fwd_mean, cands.bwd_mean, strict=True)
    ]
    arrays = {"src": cands.src_idx, "tgt": cands.tgt_idx, "cosine": cands.cosine, "score": cands.score}
    return arrays, evidence, _pad(knn.fwd_ids, config.ranked)


def _vote_match(
    method: DocMethod,
    src: Documents,
    tgt: Documents,
    config: DocMatchConfig,
    confidence: Confidence | None,
    f1_label: str,
) -> tuple[dict[str, np.ndarray], list[dict[str, Any]], np.ndarray]:
    s_emb, t_emb = src.embeddings(), tgt.embeddings()
    n = min(config.neighbours, len(t_emb))
    sims, ids = knn_search(s_emb, t_emb, n, method=knn_method_for(len(s_emb), len(t_emb)))
    tgt_doc_of = np.repeat(np.arange(tgt.n_docs), np.diff(tgt.offsets))
    src_doc_of = np.repeat(np.arange(src.n_docs), np.diff(src.offsets))
    if method is DocMethod.COUNT:
        scores = aligned_sentence_count(ids, src_doc_of, tgt_doc_of, n_tgt_docs=tgt.n_docs)
    else:
        conf = confidence(sims, ids) if confidence is not None else None
        f1_label = f1_label if conf is not None else "cosine"
        form = config.vote_form
        scores = sentence_vote(
            ids,
            sims,
            src_doc_of,
            document_positions(src.offsets, form),
            tgt_doc_of,
            document_positions(tgt.offsets, form),
            n_tgt_docs=tgt.n_docs,
            w1=config.w1,
            w2=config.w2,
            confidence=conf,
            form=form,
        )
    best = scores.best()
    evidence = [
        {"method": method.value, "votes": int(nv), **({"f1": f1_label} if method is DocMethod.SENTENCE_VOTE else {})}
        for nv in best.n_votes
    ]
    arrays = {"src": best.src_doc, "tgt": best.tgt_doc, "cosine": np.zeros(len(best.src_doc)), "score": best.score}
    return arrays, evidence, scores.ranked_targets(src.n_docs, config.ranked)


def _rerank_match(
    src: Documents,
    tgt: Documents,
    u: np.ndarray,
    v: np.ndarray,
    retrieval: str,
    config: DocMatchConfig,
    stats_pair: tuple[DocStats, DocStats] | None,
    confidence: Confidence | None,
    learn_from: dict[int, int] | None,
    f1_label: str,
    urls: UrlPairs | None = None,
) -> tuple[dict[str, np.ndarray], list[dict[str, Any]], np.ndarray, dict[str, Any]]:
    cands = retrieve(u, v, config.top_n)
    n_retrieved = len(cands.src)
    use_urls = urls is not None and config.url_weight > 0
    if use_urls:  # the pairs whose URLs differ only by the documents' language markers are candidates too
        cands = with_pairs(cands, *urls.matches(), u, v)
    pruned = 0
    if stats_pair is not None and config.prefilter is not None:
        feats = pair_features(*stats_pair, cands.src, cands.tgt, min_entities=config.prefilter.min_entities)
        ok = config.prefilter.passes(feats)
        pruned = int((~ok).sum())
        cands = cands.take(np.flatnonzero(ok))
    votes = candidate_votes(
        cands,
        src.embeddings(),
        src.offsets,
        tgt.embeddings(),
        tgt.offsets,
        neighbours=config.neighbours,
        w1=config.w1,
        w2=config.w2,
        form=config.vote_form,
        confidence=confidence,
    )
    weight, weight_note = config.rerank_weight, "set"
    if learn_from:
        weight, p1 = learn_weight(cands.src, cands.tgt, cands.sim, votes.norm, learn_from, default=weight)
        weight_note = f"learnt on {len(learn_from)} gold pairs (their P@1 {p1:.4f})"
    combined = combine(cands.sim, votes.norm, weight)
    url_signal = urls.lookup(cands.src, cands.tgt, tgt.n_docs) if urls is not None else None
    if use_urls:
        combined = combined + config.url_weight * url_signal
    s, t, _, score, fwd, bwd = _select(cands.src, cands.tgt, combined, src.n_docs, tgt.n_docs, config)
    # each selected pair's row among the candidates, for its evidence
    key = cands.src * max(tgt.n_docs, 1) + cands.tgt  # ascending: retrieve() sorts by (src, tgt), take() keeps order
    rows = np.searchsorted(key, s * max(tgt.n_docs, 1) + t)
    vote_rank = rank_within_source(cands.src, votes.score)
    comb_rank = rank_within_source(cands.src, combined)
    evidence = [
        {
            "method": DocMethod.RERANK.value,
            "retrieval": {"by": retrieval, "rank": int(cands.fwd_rank[r]), "cosine": round(float(cands.sim[r]), 5)},
            "vote": {
                "rank": int(vote_rank[r]),
                "score": round(float(votes.score[r]), 4),
                "norm": round(float(votes.norm[r]), 5),
                "votes": int(votes.n_votes[r]),
                "f1": f1_label if confidence is not None else "cosine",
            },
            "combined": {"rank": int(comb_rank[r]), "score": round(float(combined[r]), 5), "weight": weight},
            "fwd_mean": round(float(f), 5),
            "bwd_mean": round(float(b), 5),
            **(
                {"url": {"signal": float(url_signal[r]), "weight": config.url_weight if use_urls else 0.0}}
                if url_signal is not None
                else {}
            ),
        }
        for r, f, b in zip(rows.tolist(), fwd, bwd, strict=True)
    ]
    arrays = {"src": s, "tgt": t, "cosine": cands.sim[rows], "score": score}
    stats = {
        "retrieval": retrieval,
        "top_n": config.top_n,
        "candidates_retrieved": n_retrieved,
        "candidates_pruned": pruned,
        "rerank_weight": weight,
        "rerank_weight_source": weight_note,
        **(
            {"url_pairs": int((urls.signal > 0).sum()), "url_pairs_contradicted": int((urls.signal == 0).sum())}
            if urls is not None
            else {}
        ),
    }
    return arrays, evidence, ranked_targets(cands.src, cands.tgt, combined, src.n_docs, config.ranked), stats


def match_documents(
    method: DocMethod,
    src: Documents,
    tgt: Documents,
    config: DocMatchConfig,
    *,
    embedder: DocumentEmbedder | None = None,
    doc_stats: tuple[DocStats, DocStats] | None = None,
    confidence: Confidence | None = None,
    learn_from: dict[int, int] | None = None,
    tune_weight: bool = False,
    f1_label: str = "calibrated",
    urls: UrlPairs | None = None,
) -> DocumentMatch:
    """Score and select document pairs with `method`.

    Args:
        method: the document method.
        src, tgt: each side's documents (sentence embeddings; sentence texts for Document BoW).
        config: scoring and selection settings.
        embedder: the document embedder of SENTENCE_AVG / HIDE / BOW, and RERANK's retrieval (Sentence-Avg when
            None).
        doc_stats: both sides' pre-filter features (`docfilter.document_stats`); None: no pre-filter.
        confidence: calibrated f1 of the vote's sentence hits (SENTENCE_VOTE, RERANK); `f1_label` names it in each
            pair's evidence (the cosine's label is "cosine").
        learn_from: gold pairs (source index -> target index) to learn from: the pre-filter's thresholds
            (`docfilter.learn_thresholds`, with `doc_stats` and a pre-filter) and, with `tune_weight`, RERANK's vote
            weight (`docrerank.learn_weight`). Pairs learnt from should be left out of any figure of the result.
        tune_weight: learn RERANK's weight from `learn_from` (else `config.rerank_weight`).
        urls: pairs whose URLs differ only by language markers (`urlsignals.url_pairs`): RERANK adds them to its
            candidates and `config.url_weight` times their signal to the combined score; every pair's evidence
            says its signal.
    """
    method = DocMethod.parse(method)
    if src.n_docs == 0 or tgt.n_docs == 0:
        raise ValueError(f"nothing to match: {src.n_docs} source and {tgt.n_docs} target documents")
    from .docembed import SentenceAvg  # noqa: PLC0415  (the default retrieval)

    stats: dict[str, Any] = {}
    if doc_stats is not None and config.prefilter is not None and learn_from:
        gs = np.fromiter(learn_from.keys(), np.int64, len(learn_from))
        gt = np.fromiter(learn_from.values(), np.int64, len(learn_from))
        feats = pair_features(*doc_stats, gs, gt, min_entities=config.prefilter.min_entities)
        config = dataclasses.replace(config, prefilter=learn_thresholds(feats, default=config.prefilter))
    if doc_stats is not None and config.prefilter is not None:
        stats["prefilter"] = config.prefilter.as_dict()
    if method.votes:
        arrays, evidence, ranked = _vote_match(method, src, tgt, config, confidence, f1_label)
    else:
        if embedder is None:
            if method not in (DocMethod.SENTENCE_AVG, DocMethod.RERANK):
                raise ValueError(f"method '{method.value}' needs its document model")
            embedder = SentenceAvg()
        u = embedder.embed_documents(src, Side.SOURCE)
        v = embedder.embed_documents(tgt, Side.TARGET)
        if method is DocMethod.RERANK:
            arrays, evidence, ranked, rerank_stats = _rerank_match(
                src,
                tgt,
                u,
                v,
                embedder.name,
                config,
                doc_stats,
                confidence,
                learn_from if tune_weight else None,
                f1_label,
                urls,
            )
            stats.update(rerank_stats)
        else:
            arrays, evidence, ranked = _embedding_match(method, u, v, config)
    s, t = np.asarray(arrays["src"], np.int64), np.asarray(arrays["tgt"], np.int64)
    reasons = np.full(len(s), "", dtype=object)
    if doc_stats is not None:
        thresholds = config.prefilter or DEFAULT_THRESHOLDS
        feats = pair_features(*doc_stats, s, t, min_entities=thresholds.min_entities)
        if config.prefilter is not None:
            reasons = config.prefilter.reasons(feats)
        for ev, f in zip(evidence, feats.as_dicts(), strict=True):
            ev["prefilter"] = f
    order = np.argsort(-np.asarray(arrays["score"], np.float64), kind="stable")
    return DocumentMatch(
        s[order],
        t[order],
        np.asarray(arrays["cosine"], np.float64)[order],
        np.asarray(arrays["score"], np.float64)[order],
        reasons[order],
        [evidence[i] for i in order.tolist()],
        ranked,
        stats,
    )
