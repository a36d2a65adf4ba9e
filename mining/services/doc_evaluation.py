"""Document-matching evaluation: P@1, P@3, P@10 of every method over ALL target documents, on the documents' own
sentence splits and on a noisy re-split, laid out like the HiDE paper's Table 3.

The array-level part (`Collection`, `resplit`, `evaluate_methods`, `format_table`) needs no database and is shared
with bench/document_quality.py; `evaluate_corpus` loads an imported corpus and its gold document pairs.
Models (HiDE, Document BoW) are always trained on a different set of documents than the ones evaluated.
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..core.docembed import Documents, Side, document_bow_config, train_document_bow
from ..core.docmatch import HideConfig, HideValidation, Pooling, sentence_avg, train_hide
from ..core.docvote import VoteForm, aligned_sentence_count, document_positions, sentence_vote
from ..core.encoders.dan import DanConfig
from ..core.knn import knn_exact
from ..core.metrics import precision_at

logger = logging.getLogger(__name__)

Encode = Callable[[list[str], str], np.ndarray]
NS = (1, 3, 10)

SENTENCE_AVG = "Sentence-Avg"
DOC_BOW = "Document BoW"
HIDE_DNN_POOL = "HiDE DNN->pooling"
HIDE_POOL_DNN = "HiDE pooling->DNN"
SENTENCE_VOTE = "sentence-vote"
SENTENCE_VOTE_PAPER = "sentence-vote (eq.3)"  # the printed form: -rank, raw sentence indices
COUNT = "count baseline"
METHOD_NAMES = (SENTENCE_AVG, DOC_BOW, HIDE_DNN_POOL, HIDE_POOL_DNN, SENTENCE_VOTE, SENTENCE_VOTE_PAPER, COUNT)


class Noise(enum.Enum):
    """How a document's sentences are re-split for the noisy condition."""

    RESPLIT = "resplit"  # join all sentences with spaces and split again with the app's splitter (sentencex)
    WINDOW = "window"  # join and cut at the first space after every `window` characters (harsher)


def resplit(sentences: Sequence[str], lang: str, noise: Noise = Noise.RESPLIT, window: int = 120) -> list[str]:
    """A document's sentences joined into one text and split again (block/heading boundaries are lost)."""
    text = " ".join(s.strip() for s in sentences if s.strip())
    if not text:
        return []
    if noise is Noise.RESPLIT:
        from ..ingest.text import split_sentences

        return split_sentences(text, lang)
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

    def embedded(self, encode: Encode) -> Collection:
        """A copy with sentence embeddings (each distinct text encoded once)."""
        uniq, inverse = np.unique(np.array(self.sentences, dtype=object), return_inverse=True)
        emb = encode(list(uniq), self.lang)[inverse] if len(uniq) else np.zeros((0, 1), np.float32)
        return Collection(self.lang, self.sentences, self.offsets, np.ascontiguousarray(emb, dtype=np.float32))

    def resplit(self, noise: Noise = Noise.RESPLIT, window: int = 120) -> Collection:
        """The noisy-split copy (no embeddings)."""
        return Collection.from_documents([resplit(d, self.lang, noise, window) for d in self.documents()], self.lang)


def ranking(u: np.ndarray, v: np.ndarray, n: int = max(NS)) -> np.ndarray:
    """(n_src, n) int64: the n nearest target documents of each source document by cosine (-1 padding)."""
    _, ids = knn_exact(np.ascontiguousarray(u, np.float32), np.ascontiguousarray(v, np.float32), n)
    if ids.shape[1] < n:
        ids = np.hstack([ids, np.full((len(ids), n - ids.shape[1]), -1, np.int64)])
    return ids


def vote_ranking(
    src: Collection,
    tgt: Collection,
    *,
    count: bool = False,
    neighbours: int = 10,
    w1: float = 5.0,
    w2: float = -2.0,
    n: int = max(NS),
    form: VoteForm = VoteForm.COUNTED,
) -> np.ndarray:
    """(n_src_docs, n) target documents ranked by sentence-vote (or by the count of aligned sentences)."""
    sims, ids = knn_exact(src.emb, tgt.emb, neighbours)
    tgt_doc = np.repeat(np.arange(tgt.n_docs), np.diff(tgt.offsets))
    src_doc = np.repeat(np.arange(src.n_docs), np.diff(src.offsets))
    if count:
        scores = aligned_sentence_count(ids, src_doc, tgt_doc, n_tgt_docs=tgt.n_docs)
    else:
        scores = sentence_vote(
            ids,
            sims,
            src_doc,
            document_positions(src.offsets, form),
            tgt_doc,
            document_positions(tgt.offsets, form),
            n_tgt_docs=tgt.n_docs,
            w1=w1,
            w2=w2,
            form=form,
        )
    return scores.ranked_targets(src.n_docs, n)


@dataclass(frozen=True)
class Models:
    """Document models trained on documents other than the evaluated ones (None: that row is skipped)."""

    hide: dict[str, object] = field(default_factory=dict)  # pooling value -> HideModel
    bow: object | None = None  # docembed.DocumentBow (a unigram DAN over whole documents)


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
) -> Models:
    """HiDE (both poolings) on the training pairs' sentence embeddings (doc i <-> doc i), plus Document BoW.

    `extra` adds more aligned collections (e.g. the same training documents re-split) to HiDE's training data;
    `validation`, embedded aligned collections on which HiDE keeps its best epoch (`train_hide`).
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
        cfg = HideConfig(**{**hide_config.__dict__, "pooling": pooling.value})
        hide[pooling.value] = train_hide(s_emb, s_off, t_emb, t_off, config=cfg, seed=seed, validation=val)
    bow_model = None
    if bow:
        bow_model = train_document_bow(
            train_src.texts(),
            train_tgt.texts(),
            train_src.lang,
            train_tgt.lang,
            bow_config or bow_defaults(),
            seed,
            threads=None,
        )
    return Models(hide, bow_model)


def bow_defaults() -> DanConfig:
    """Document BoW settings: the paper's DAN (hidden 320, 320, 500, 500) with small batches, since document pairs
    number hundreds rather than millions; unigrams only (`docembed.document_bow_config`)."""
    return document_bow_config()


def _concat_offsets(parts: Sequence[np.ndarray]) -> np.ndarray:
    out, base = [np.zeros(1, np.int64)], 0
    for off in parts:
        out.append(off[1:] + base)
        base += int(off[-1])
    return np.concatenate(out)


def evaluate_methods(
    src: Collection, tgt: Collection, gold: np.ndarray, models: Models, *, neighbours: int = 10
) -> dict[str, dict[int, float]]:
    """P@1/3/10 per method for the source documents (with embeddings) against ALL target documents.

    Args:
        src, tgt: embedded collections.
        gold: (src.n_docs,) int target document of each source document.
        models: trained document models; rows without a model are left out.
    """
    out: dict[str, dict[int, float]] = {}
    out[SENTENCE_AVG] = precision_at(
        ranking(sentence_avg(src.emb, src.offsets), sentence_avg(tgt.emb, tgt.offsets)), gold, NS
    )
    if models.bow is not None:
        u = models.bow.embed_documents(Documents(src.offsets, src.sentences), Side.SOURCE)
        v = models.bow.embed_documents(Documents(tgt.offsets, tgt.sentences), Side.TARGET)
        out[DOC_BOW] = precision_at(ranking(u, v), gold, NS)
    for name, pooling in ((HIDE_DNN_POOL, Pooling.DNN_POOL), (HIDE_POOL_DNN, Pooling.POOL_DNN)):
        model = models.hide.get(pooling.value)
        if model is not None:
            u = model.embed(src.emb, src.offsets, "src")
            v = model.embed(tgt.emb, tgt.offsets, "tgt")
            out[name] = precision_at(ranking(u, v), gold, NS)
    out[SENTENCE_VOTE] = precision_at(vote_ranking(src, tgt, neighbours=neighbours), gold, NS)
    out[SENTENCE_VOTE_PAPER] = precision_at(
        vote_ranking(src, tgt, neighbours=neighbours, form=VoteForm.PAPER), gold, NS
    )
    out[COUNT] = precision_at(vote_ranking(src, tgt, count=True, neighbours=neighbours), gold, NS)
    return out


def format_table(results: dict[str, dict[str, dict[int, float]]], title: str = "") -> str:
    """A text table: one row per method, P@1/P@3/P@10 for each condition (e.g. "clean", "noisy")."""
    conds = list(results)
    head = f"{'method':<20}" + "".join(f" | {c[:22]:^22}" for c in conds)
    sub = f"{'':<20}" + "".join(" | " + " ".join(f"{'P@' + str(n):>6}" for n in NS) + "  " for _ in conds)
    lines = ([title] if title else []) + [head, sub, "-" * len(sub)]
    for m in METHOD_NAMES:
        if not any(m in results[c] for c in conds):
            continue
        cells = []
        for c in conds:
            r = results[c].get(m)
            cells.append(" | " + (" ".join(f"{100 * r[n]:6.1f}" for n in NS) if r else f"{'-':^20}") + "  ")
        lines.append(f"{m:<20}" + "".join(cells))
    return "\n".join(lines)


# -- an imported corpus ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CorpusPairs:
    """Gold-paired documents of an imported corpus as collections: source doc i translates target doc gold[i];
    `tgt` holds ALL target documents of the corpus (the candidates P@N is measured against)."""

    src: Collection
    tgt: Collection
    gold: np.ndarray
    paired_tgt: Collection  # the gold target of each source document, in source order (training data)


def corpus_pairs(corpus, src_lang: str, tgt_lang: str) -> CorpusPairs:
    """Load a corpus's documents in both languages and its gold document pairs."""
    from .document_runs import _gold_doc_pairs, doc_side

    src, tgt = doc_side(corpus, src_lang), doc_side(corpus, tgt_lang)
    s_index = {int(d): i for i, d in enumerate(src.doc_ids)}
    t_index = {int(d): i for i, d in enumerate(tgt.doc_ids)}
    gold = sorted(
        {
            (s_index[s], t_index[t])
            for s, t in _gold_doc_pairs(corpus, src_lang, tgt_lang)
            if s in s_index and t in t_index
        }
    )
    if not gold:
        raise ValueError(
            f"corpus '{corpus}' has no gold {src_lang}-{tgt_lang} document pairs with sentences "
            "(import documents that share an id across languages)"
        )
    seen: set[int] = set()
    gold = [g for g in gold if not (g[0] in seen or seen.add(g[0]))]  # one gold target per source document

    def docs(side, lang: str, which: list[int]) -> Collection:
        return Collection.from_documents([side.texts[side.offsets[i] : side.offsets[i + 1]] for i in which], lang)

    all_tgt = docs(tgt, tgt_lang, list(range(len(tgt.doc_ids))))
    return CorpusPairs(
        docs(src, src_lang, [g[0] for g in gold]),
        all_tgt,
        np.array([g[1] for g in gold]),
        docs(tgt, tgt_lang, [g[1] for g in gold]),
    )


def evaluate_corpus(
    pairs: CorpusPairs, encode: Encode, models: Models, *, noise: Noise = Noise.RESPLIT, window: int = 120
) -> dict[str, dict[str, dict[int, float]]]:
    """{"clean": ..., "noisy (...)": ...} P@N per method for a corpus's gold-paired source documents."""
    src, tgt = pairs.src.embedded(encode), pairs.tgt.embedded(encode)
    noisy_src = pairs.src.resplit(noise, window).embedded(encode)
    noisy_tgt = pairs.tgt.resplit(noise, window).embedded(encode)
    return {
        "clean": evaluate_methods(src, tgt, pairs.gold, models),
        f"noisy ({noise.value})": evaluate_methods(noisy_src, noisy_tgt, pairs.gold, models),
    }
