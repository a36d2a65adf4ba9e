"""Document-matching evaluation of an imported corpus: load its documents and gold document pairs into the core's
collections (`mining.core.doc_evaluation`, which holds the evaluation itself) and evaluate them clean and re-split
by the app's sentence splitter.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.doc_evaluation import Collection, Encode, Models, Noise, evaluate_methods
from ..ingest.text import split_sentences
from ..models import Corpus
from .document_runs import doc_side, gold_doc_pairs


@dataclass(frozen=True)
class CorpusPairs:
    """Gold-paired documents of an imported corpus as collections: source doc i translates target doc gold[i];
    `tgt` holds ALL target documents of the corpus (the candidates P@N is measured against)."""

    src: Collection
    tgt: Collection
    gold: np.ndarray
    paired_tgt: Collection  # the gold target of each source document, in source order (training data)


def corpus_pairs(corpus: Corpus, src_lang: str, tgt_lang: str) -> CorpusPairs:
    """Load a corpus's documents in both languages and its gold document pairs."""
    src, tgt = doc_side(corpus, src_lang), doc_side(corpus, tgt_lang)
    s_index = {int(d): i for i, d in enumerate(src.doc_ids)}
    t_index = {int(d): i for i, d in enumerate(tgt.doc_ids)}
    gold = sorted(
        {
            (s_index[s], t_index[t])
            for s, t in gold_doc_pairs(corpus, src_lang, tgt_lang)
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

    return CorpusPairs(
        docs(src, src_lang, [g[0] for g in gold]),
        docs(tgt, tgt_lang, list(range(len(tgt.doc_ids)))),
        np.array([g[1] for g in gold]),
        docs(tgt, tgt_lang, [g[1] for g in gold]),
    )


def evaluate_corpus(
    pairs: CorpusPairs, encode: Encode, models: Models, *, noise: Noise = Noise.RESPLIT, window: int = 120
) -> dict[str, dict[str, dict]]:
    """{"clean": ..., "noisy (...)": ...}: each method's figures for a corpus's gold-paired source documents."""
    src, tgt = pairs.src.embedded(encode), pairs.tgt.embedded(encode)
    noisy_src = pairs.src.resplit(noise, window, split=split_sentences).embedded(encode)
    noisy_tgt = pairs.tgt.resplit(noise, window, split=split_sentences).embedded(encode)
    return {
        "clean": evaluate_methods(src, tgt, pairs.gold, models),
        f"noisy ({noise.value})": evaluate_methods(noisy_src, noisy_tgt, pairs.gold, models),
    }
