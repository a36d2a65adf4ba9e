"""Report lines of bench/document_quality.py: the rerank top-N sweep, issue 20's target line, and the pre-filter
used alone on a test condition."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from mining.core.doc_evaluation import (
    HIDE_DNN_POOL,
    RERANK_AVG,
    RERANK_HIDE,
    RUN_P1,
    SENTENCE_VOTE,
    Collection,
    evaluate_methods,
)
from mining.core.docembed import Hide, SentenceAvg, Side
from mining.core.docfilter import (
    DEFAULT_THRESHOLDS,
    document_stats,
    learn_thresholds,
    pair_features,
    surviving_pairs,
)
from mining.core.docmatch import Pooling
from mining.core.docrerank import retrieve
from mining.core.docrun import DocMatchConfig


def top_n_sweep(conds: dict, gold: np.ndarray, models, config: DocMatchConfig, ns: list[int]) -> list[str]:
    """How many target documents rerank must retrieve: per top N, the share of true pairs among the retrieved
    candidates (HiDE DNN->pooling retrieval, both ways, before the pre-filter), the candidates per source document,
    and rerank's run P@1 with that N."""
    hide = models.hide.get(Pooling.DNN_POOL.value)
    embedder = Hide(hide) if hide is not None else SentenceAvg()
    lines = []
    for cond, (s, t) in conds.items():
        u = embedder.embed_documents(s.as_documents(), Side.SOURCE)
        v = embedder.embed_documents(t.as_documents(), Side.TARGET)
        parts = []
        for n in ns:
            got = retrieve(u, v, n)
            hit = np.zeros(s.n_docs, bool)
            hit[got.src[got.tgt == gold[got.src]]] = True
            p1 = evaluate_methods(s, t, gold, models, config=replace(config, top_n=n), only=[RERANK_HIDE])
            parts.append(
                f"N={n}: recall {100 * hit.mean():.2f} %, {len(got.src) / s.n_docs:.1f} candidates/doc, "
                f"run P@1 {100 * p1[RERANK_HIDE][RUN_P1]:.1f}"
            )
        lines.append(f"  rerank top N ({embedder.name} retrieval), {cond}: " + "; ".join(parts))
    return lines


def targets_line(res: dict) -> str:
    """Issue 20's target per condition: rerank's run P@1 >= max(HiDE's, sentence-vote's) - 0.5 (points)."""
    parts = []
    for cond, rows in res.items():
        if RERANK_HIDE not in rows or HIDE_DNN_POOL not in rows:
            continue
        best = max(rows[HIDE_DNN_POOL][RUN_P1], rows[SENTENCE_VOTE][RUN_P1])
        got = max(rows[RERANK_HIDE][RUN_P1], rows.get(RERANK_AVG, {RUN_P1: 0.0})[RUN_P1])
        got_hide = rows[RERANK_HIDE][RUN_P1]
        verdict = "met" if 100 * got_hide >= 100 * best - 0.5 else "NOT MET"
        parts.append(
            f"{cond}: rerank (HiDE) {100 * got_hide:.1f} vs best of HiDE / sentence-vote {100 * best:.1f} - 0.5: "
            f"{verdict} (best rerank row {100 * got:.1f})"
        )
    return "  target (run P@1): " + "; ".join(parts)


def prefilter_line(cond: str, src: Collection, tgt: Collection, learnt) -> str:
    """The pre-filter used alone on a test condition: recall of the true pairs (doc i <-> doc i) and the share of all
    source x target pairs it prunes, with the defaults (what the rows above use) and with thresholds learnt on the
    training pages (another collection)."""
    s_stats, t_stats = document_stats(src.sentences, src.offsets), document_stats(tgt.sentences, tgt.offsets)
    n = src.n_docs
    feats = pair_features(s_stats, t_stats, np.arange(n), np.arange(n))
    out = []
    # as a run learns them: on a seeded half of the collection's own gold pairs, measured on the other half
    half = np.random.default_rng(0).permutation(n)
    own = learn_thresholds(feats.take(half[: n // 2]))
    rest = feats.take(half[n // 2 :])
    out.append(
        f"learnt on half of these pairs ({own.source}) keeps {100 * own.passes(rest).mean():.2f} % of the other half"
    )
    for name, th in (("default", DEFAULT_THRESHOLDS), ("learnt on training pages", learnt)):
        kept = th.passes(feats)
        s_idx, _ = surviving_pairs(s_stats, t_stats, th)
        lost = [f"{r}:{int((th.reasons(feats) == r).sum())}" for r in set(th.reasons(feats)[~kept])]
        out.append(
            f"{name} keeps {100 * kept.mean():.2f} % of true pairs (lost {', '.join(sorted(lost)) or 'none'}), "
            f"prunes {100 * (1 - len(s_idx) / (n * tgt.n_docs)):.1f} % of all pairs"
        )
    return f"  pre-filter, {cond}: " + "; ".join(out)
