"""Document-matching evaluation: every method scored as a run applies it (`docrun.match_documents`: margin and
selection) beside its raw ranking (P@1, P@3, P@10 over ALL target documents), on the documents' own sentence splits
and on a noisy re-split, laid out like the HiDE paper's Table 3.

No database: `Collection` holds one language's documents as arrays; the services load an imported corpus into them
and bench/document_quality.py builds them from files. Models (HiDE, Document BoW) are trained on other documents
than the evaluated ones, and so is RERANK's vote weight (`train_models`); the pre-filter uses its defaults.
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .docembed import (
    DocumentBow,
    DocumentEmbedder,
    Documents,
    Hide,
    SentenceAvg,
    document_bow_config,
    train_document_bow,
)
from .docfilter import DEFAULT_THRESHOLDS, PrefilterThresholds, document_stats
from .docmatch import HideConfig, HideModel, HideValidation, Pooling, train_hide
from .docmethod import DocMethod
from .docrun import DocMatchConfig, DocumentMatch, match_documents
from .docvote import VoteForm
from .encoders.dan import DanConfig
from .metrics import precision_at

logger = logging.getLogger(__name__)

Encode = Callable[[list[str], str], np.ndarray]
Split = Callable[[str, str], list[str]]  # (text, lang) -> sentences
NS = (1, 3, 10)
RUN_P1, RUN_PREC = "run P@1", "run prec"

SENTENCE_AVG = "Sentence-Avg"
DOC_BOW = "Document BoW"
HIDE_DNN_POOL = "HiDE DNN->pooling"
HIDE_POOL_DNN = "HiDE pooling->DNN"
SENTENCE_VOTE = "sentence-vote"
SENTENCE_VOTE_PAPER = "sentence-vote (eq.3)"  # the printed form: -rank, raw sentence indices
COUNT = "count baseline"
RERANK_HIDE = "rerank (HiDE)"
RERANK_AVG = "rerank (Sentence-Avg)"
METHOD_NAMES = (
    SENTENCE_AVG,
    DOC_BOW,
    HIDE_DNN_POOL,
    HIDE_POOL_DNN,
    SENTENCE_VOTE,
    SENTENCE_VOTE_PAPER,
    COUNT,
    RERANK_HIDE,
    RERANK_AVG,
)


class Noise(enum.Enum):
    """How a document's sentences are re-split for the noisy condition."""

    RESPLIT = "resplit"  # join all sentences with spaces and split again with the app's splitter (sentencex)
    WINDOW = "window"  # join and cut at the first space after every `window` characters (harsher)


def resplit(
    sentences: Sequence[str], lang: str, noise: Noise = Noise.RESPLIT, window: int = 120, *, split: Split | None = None
) -> list[str]:
    """A document's sentences joined into one text and split again (block/heading boundaries are lost); RESPLIT
    needs the sentence splitter `split(text, lang)`."""
    text = " ".join(s.strip() for s in sentences if s.strip())
    if not text:
        return []
    if noise is Noise.RESPLIT:
        if split is None:
            raise ValueError("the resplit noise needs a sentence splitter")
        return split(text, lang)
    pieces = re.findall(rf"\S.{{{max(0, window - 1)},}}?(?=\s|$)|\S.*$", text)
    return [p.strip() for p in pieces if p.strip()]


@dataclass(frozen=True)
class Collection:
    """Documents of one language: sentences grouped by document (document i owns rows offsets[i]:offsets[i+1])."""

    lang: str
    sentences: list[str]
    offsets: np.ndarray  # (n_docs + 1,) int64
    emb: np.ndarray | None = None  # (n_sents, d) float32, rows L2-normalised

    @classmethod
    def from_documents(cls, docs: Sequence[Sequence[str]], lang: str) -> Collection:
        lengths = np.array([len(d) for d in docs], dtype=np.int64)
        return cls(lang, [s for d in docs for s in d], np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))

    @property
    def n_docs(self) -> int:
        return len(self.offsets) - 1

    def documents(self) -> list[list[str]]:
        return [self.sentences[a:b] for a, b in zip(self.offsets[:-1], self.offsets[1:], strict=True)]

    def texts(self) -> list[str]:
        """Each document as one text (for Document BoW, which does not use sentence splits)."""
        return [" ".join(d) for d in self.documents()]

    def as_documents(self) -> Documents:
        """The core's view (texts, and embeddings when present)."""
        return Documents(self.offsets, self.sentences, self.emb)

    def embedded(self, encode: Encode) -> Collection:
        """A copy with sentence embeddings (each distinct text encoded once)."""
        uniq, inverse = np.unique(np.array(self.sentences, dtype=object), return_inverse=True)
        emb = encode(list(uniq), self.lang)[inverse] if len(uniq) else np.zeros((0, 1), np.float32)
        return Collection(self.lang, self.sentences, self.offsets, np.ascontiguousarray(emb, dtype=np.float32))

    def resplit(self, noise: Noise = Noise.RESPLIT, window: int = 120, *, split: Split | None = None) -> Collection:
        """The noisy-split copy (no embeddings)."""
        return Collection.from_documents(
            [resplit(d, self.lang, noise, window, split=split) for d in self.documents()], self.lang
        )


@dataclass(frozen=True)
class Models:
    """What is learnt on documents other than the evaluated ones (an absent model: its rows are skipped).

    Attributes:
        hide: pooling value -> HideModel.
        bow: Document BoW.
        rerank_weight: retrieval embedder name ("hide", "sentence_avg") -> RERANK's vote weight.
        prefilter: the pre-filter's thresholds.
    """

    hide: dict[str, HideModel] = field(default_factory=dict)
    bow: DocumentBow | None = None
    rerank_weight: dict[str, float] = field(default_factory=dict)
    prefilter: PrefilterThresholds = DEFAULT_THRESHOLDS


def _concat_offsets(parts: Sequence[np.ndarray]) -> np.ndarray:
    out, base = [np.zeros(1, np.int64)], 0
    for off in parts:
        out.append(off[1:] + base)
        base += int(off[-1])
    return np.concatenate(out)


def tune_rerank(
    src: Collection,
    tgt: Collection,
    embedder: DocumentEmbedder,
    prefilter: PrefilterThresholds,
    config: DocMatchConfig | None = None,
) -> float:
    """RERANK's vote weight learnt on aligned embedded collections (source doc i translates target doc i)."""
    stats = (document_stats(src.sentences, src.offsets), document_stats(tgt.sentences, tgt.offsets))
    result = match_documents(
        DocMethod.RERANK,
        src.as_documents(),
        tgt.as_documents(),
        replace(config or DocMatchConfig(), prefilter=prefilter),
        embedder=embedder,
        doc_stats=stats,
        learn_from={i: i for i in range(src.n_docs)},
        tune_weight=True,
    )
    logger.info("RERANK weight (%s): %s", embedder.name, result.stats["rerank_weight_source"])
    return float(result.stats["rerank_weight"])


def train_models(
    train_src: Collection,
    train_tgt: Collection,
    *,
    hide_config: HideConfig | None = None,
    bow_config: DanConfig | None = None,
    seed: int = 0,
    bow: bool = True,
    extra: Sequence[tuple[Collection, Collection]] = (),
    validation: tuple[Collection, Collection] | None = None,
    rerank: bool = True,
    rerank_config: DocMatchConfig | None = None,
) -> Models:
    """HiDE (both poolings) on the training pairs' sentence embeddings (doc i <-> doc i), plus Document BoW, and
    RERANK's vote weight (retrieving with HiDE DNN->pooling and with Sentence-Avg) on `validation`, else on the
    training pairs (where HiDE, having seen them, looks better than on new documents). The pre-filter keeps its
    default thresholds: thresholds learnt on one collection did not carry over to another (on the bench, learnt on
    GIMP manual pages they kept 87 % of the man pages' true pairs, 73.5 % re-split; the defaults 100 and 99.5 %).

    `extra` adds more aligned collections (e.g. the same training documents re-split) to HiDE's training data;
    `validation`, embedded aligned collections on which HiDE keeps its best epoch (`train_hide`);
    `rerank_config`, the settings RERANK's weight is learnt under (top_n, ...).
    """
    val = (
        None
        if validation is None
        else HideValidation(validation[0].emb, validation[0].offsets, validation[1].emb, validation[1].offsets)
    )
    hide_config = hide_config or HideConfig()
    pairs = [(train_src, train_tgt), *extra]
    s_emb = np.concatenate([p[0].emb for p in pairs])
    t_emb = np.concatenate([p[1].emb for p in pairs])
    s_off = _concat_offsets([p[0].offsets for p in pairs])
    t_off = _concat_offsets([p[1].offsets for p in pairs])
    hide = {}
    for pooling in Pooling:
        cfg = replace(hide_config, pooling=pooling.value)
        hide[pooling.value] = train_hide(s_emb, s_off, t_emb, t_off, config=cfg, seed=seed, validation=val)
    bow_model = None
    if bow:
        bow_model = train_document_bow(
            train_src.texts(),
            train_tgt.texts(),
            train_src.lang,
            train_tgt.lang,
            bow_config or document_bow_config(),
            seed,
            threads=None,
        )
    prefilter = DEFAULT_THRESHOLDS
    weights: dict[str, float] = {}
    if rerank:
        tune_on = validation or (train_src, train_tgt)
        for embedder in (Hide(hide[Pooling.DNN_POOL.value]), SentenceAvg()):
            weights[embedder.name] = tune_rerank(*tune_on, embedder, prefilter, rerank_config)
    return Models(hide, bow_model, weights, prefilter)


def selection_figures(result: DocumentMatch, gold: dict[int, int]) -> dict[str, Any]:
    """How a run's output fares on gold pairs (source index -> gold target index):

    - p_at_1: share of gold source documents whose kept pair (selected, not filtered) is their gold target;
    - p_at_3: share whose gold target is among the method's 3 best-ranked targets;
    - precision: share of kept pairs of gold source documents that are gold.
    Empty ({"pairs": 0}) without gold pairs."""
    if not gold:
        return {"pairs": 0}
    kept = result.filter_reason == ""
    chosen = dict(zip(result.src[kept].tolist(), result.tgt[kept].tolist(), strict=True))
    srcs = np.fromiter(gold.keys(), np.int64, len(gold))
    tgts = np.fromiter(gold.values(), np.int64, len(gold))
    hits = sum(chosen.get(s) == t for s, t in gold.items())
    judged = sum(s in chosen for s in gold)
    top3 = result.ranked[srcs, : min(3, result.ranked.shape[1])]
    return {
        "pairs": len(gold),
        "p_at_1": round(hits / len(gold), 4),
        "p_at_3": round(float((top3 == tgts[:, None]).any(axis=1).mean()), 4),
        "precision": round(hits / judged, 4) if judged else None,
    }


def _row(result: DocumentMatch, gold: np.ndarray) -> dict[Any, float]:
    raw = precision_at(result.ranked, gold, NS)
    sel = selection_figures(result, dict(enumerate(gold.tolist())))
    return {**raw, RUN_P1: sel["p_at_1"], RUN_PREC: sel["precision"] if sel["precision"] is not None else 0.0}


def evaluate_methods(
    src: Collection,
    tgt: Collection,
    gold: np.ndarray,
    models: Models,
    *,
    config: DocMatchConfig | None = None,
    only: Sequence[str] | None = None,
) -> dict[str, dict[Any, float]]:
    """P@1/3/10 of each method's raw ranking, and P@1 and precision of its selection as a run makes it, for the source
    documents (with embeddings) against ALL target documents.

    Args:
        src, tgt: embedded collections.
        gold: (src.n_docs,) int target document of each source document.
        models: what was learnt elsewhere; rows without their model are left out.
        config: the run's settings (defaults: a run's; `ranked` is raised to 10 for P@10).
        only: the rows to compute (METHOD_NAMES' names); all by default.
    """
    config = replace(config or DocMatchConfig(), ranked=max(NS), prefilter=models.prefilter)
    stats = (document_stats(src.sentences, src.offsets), document_stats(tgt.sentences, tgt.offsets))
    s_docs, t_docs = src.as_documents(), tgt.as_documents()
    hide_dnn = models.hide.get(Pooling.DNN_POOL.value)
    rows: list[tuple[str, DocMethod, DocumentEmbedder | None, DocMatchConfig]] = [
        (SENTENCE_AVG, DocMethod.SENTENCE_AVG, SentenceAvg(), config)
    ]
    if models.bow is not None:
        rows.append((DOC_BOW, DocMethod.BOW, models.bow, config))
    for name, pooling in ((HIDE_DNN_POOL, Pooling.DNN_POOL), (HIDE_POOL_DNN, Pooling.POOL_DNN)):
        if pooling.value in models.hide:
            rows.append((name, DocMethod.HIDE, Hide(models.hide[pooling.value]), config))
    rows += [
        (SENTENCE_VOTE, DocMethod.SENTENCE_VOTE, None, config),
        (SENTENCE_VOTE_PAPER, DocMethod.SENTENCE_VOTE, None, replace(config, vote_form=VoteForm.PAPER)),
        (COUNT, DocMethod.COUNT, None, config),
    ]
    for name, embedder in ((RERANK_HIDE, Hide(hide_dnn) if hide_dnn else None), (RERANK_AVG, SentenceAvg())):
        if embedder is not None:
            weight = models.rerank_weight.get(embedder.name, config.rerank_weight)
            rows.append((name, DocMethod.RERANK, embedder, replace(config, rerank_weight=weight)))
    out: dict[str, dict[Any, float]] = {}
    for name, method, embedder, cfg in rows:
        if only is not None and name not in only:
            continue
        result = match_documents(method, s_docs, t_docs, cfg, embedder=embedder, doc_stats=stats)
        out[name] = _row(result, gold)
    return out


def format_table(results: dict[str, dict[str, dict[Any, float]]], title: str = "") -> str:
    """A text table: one row per method; for each condition (e.g. "clean", "noisy") P@1/P@3/P@10 of the raw
    ranking, then P@1 and precision of the run's selection (margin, one-to-one)."""
    conds = list(results)
    cols = [*(f"P@{n}" for n in NS), RUN_P1, RUN_PREC]
    width = 9 * len(cols)
    head = f"{'method':<22}" + "".join(f" | {c[:width]:^{width}}" for c in conds)
    sub = f"{'':<22}" + "".join(" | " + "".join(f"{c:>9}" for c in cols) for _ in conds)
    lines = ([title] if title else []) + [head, sub, "-" * len(sub)]
    for m in METHOD_NAMES:
        if not any(m in results[c] for c in conds):
            continue
        cells = []
        for c in conds:
            r = results[c].get(m)
            keys = [*NS, RUN_P1, RUN_PREC]
            cells.append(" | " + ("".join(f"{100 * r[k]:9.1f}" for k in keys) if r else f"{'-':^{width}}"))
        lines.append(f"{m:<22}" + "".join(cells))
    lines.append(
        "P@N: the raw ranking (cosine / votes, before margin and selection); run P@1 and prec: the pairs a run keeps "
        "(margin and one-to-one selection; pre-filtered pairs not kept)."
    )
    return "\n".join(lines)
