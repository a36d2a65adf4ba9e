"""Document embeddings behind one interface (Guo et al. 2019): Sentence-Avg, Document BoW, HiDE.

The methods and their papers are summarised in docs/METHODS-NOTES.md.

A `DocumentEmbedder` turns a batch of one side's documents (`Documents`: the flat sentence texts and/or their frozen
sentence embeddings, grouped by `offsets`) into (n_docs, d) float32 rows, L2-normalised, so that retrieval over
them (`knn` + `margin` + `candidates`) is the same code whichever embedder made them.

- `SentenceAvg`: the mean of the document's sentence embeddings (`docmatch.sentence_avg`).
- `Hide`: a trained `docmatch.HideModel` (either pooling) over the sentence embeddings.
- `DocumentBow`: a DAN dual encoder over the document's word unigrams (sentence splits and word order play no
  part), trained on document pairs with in-batch negatives (`train_document_bow`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from .docmatch import HideModel, check_offsets, sentence_avg
from .encoders.base import Progress
from .encoders.dan import (
    DanConfig,
    DanDualEncoder,
    DanEncoder,
    Side,
    checkpoint_dict,
    load_checkpoint,
    save_checkpoint,
    torch_threads,
)
from .encoders.dan_train import train_dan

logger = logging.getLogger(__name__)

BOW_CHECKPOINT_KIND = "document-bow"

__all__ = [
    "DocumentBow",
    "DocumentEmbedder",
    "Documents",
    "Hide",
    "SentenceAvg",
    "Side",
    "document_bow_config",
    "train_document_bow",
]


@dataclasses.dataclass(frozen=True)
class Documents:
    """One side's documents: document i owns sentences (and embedding rows) offsets[i]:offsets[i + 1].

    Attributes:
        offsets: (n_docs + 1,) int64, from 0 to the number of sentences, non-decreasing.
        sentences: the flat sentence texts (what Document BoW reads), or None.
        emb: (n_sentences, d) float32 sentence embeddings, rows L2-normalised (what Sentence-Avg and HiDE read),
            or None.
        foreign: (n_docs,) each document's third-language share (`langshare`, what RERANK's foreign weight reads),
            or None.
    """

    offsets: np.ndarray
    sentences: Sequence[str] | None = None
    emb: np.ndarray | None = None
    foreign: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.sentences is None and self.emb is None:
            raise ValueError("documents need their sentence texts, their sentence embeddings, or both")
        n = len(self.sentences) if self.sentences is not None else len(self.emb)
        if self.sentences is not None and self.emb is not None and len(self.emb) != n:
            raise ValueError(f"{n} sentences but {len(self.emb)} embedding rows")
        object.__setattr__(self, "offsets", check_offsets(self.offsets, n))
        if self.foreign is not None and len(self.foreign) != len(self.offsets) - 1:
            raise ValueError(f"{len(self.offsets) - 1} documents but {len(self.foreign)} third-language shares")

    @property
    def n_docs(self) -> int:
        return len(self.offsets) - 1

    def texts(self) -> list[str]:
        """Each document's sentences joined with spaces (one text per document)."""
        if self.sentences is None:
            raise ValueError("these documents carry no sentence texts")
        s, off = self.sentences, self.offsets
        return [" ".join(s[a:b]) for a, b in zip(off[:-1].tolist(), off[1:].tolist(), strict=True)]

    def embeddings(self) -> np.ndarray:
        """The sentence embeddings (raises when absent)."""
        if self.emb is None:
            raise ValueError("these documents carry no sentence embeddings")
        return self.emb


class DocumentEmbedder(Protocol):
    """Anything that embeds a side's documents into comparable unit vectors."""

    name: str

    def embed_documents(self, docs: Documents, side: Side) -> np.ndarray:
        """(docs.n_docs, d) float32 document embeddings of `side`'s documents, rows L2-normalised (zero when
        a document is empty)."""
        ...


class SentenceAvg:
    """Sentence-Avg: needs no training and has no sides."""

    name = "sentence_avg"

    def embed_documents(self, docs: Documents, side: Side) -> np.ndarray:
        return sentence_avg(docs.embeddings(), docs.offsets)


class Hide:
    """A trained HiDE model (its source tower for `Side.SOURCE`, its target tower for `Side.TARGET`)."""

    name = "hide"

    def __init__(self, model: HideModel) -> None:
        self.model = model

    def embed_documents(self, docs: Documents, side: Side) -> np.ndarray:
        return self.model.embed(docs.embeddings(), docs.offsets, "src" if side is Side.SOURCE else "tgt")


def document_bow_config(**overrides: object) -> DanConfig:
    """Document BoW settings: the paper's DAN (hidden 320, 320, 500, 500) over unigrams, with small batches and
    more epochs than the sentence DAN since document pairs number hundreds rather than millions. 2**16 hashed
    unigram rows (not the sentence DAN's 2**18): the same P@1 on GIMP manual pages en-fr over three seeds (0.64 vs
    0.63) at a quarter of the memory (the 2**18 model file was 678 MB)."""
    base = {"batch_size": 32, "epochs": 40, "hard_epochs": 0, "margin": 0.3, "bigrams": False, "n_buckets": 2**16}
    return DanConfig(**{**base, **overrides})


class DocumentBow:
    """Document BoW: a DAN dual encoder over each document's word unigrams, trained on document pairs.

    Args:
        model: the trained dual encoder (unigram features: ``model.config.bigrams`` is False).
        src_lang, tgt_lang: the languages of its source and target towers.
        threads: torch intra-op threads while embedding (None: the process setting).
    """

    name = "bow"

    def __init__(self, model: DanDualEncoder, src_lang: str, tgt_lang: str, threads: int | None = 1) -> None:
        if model.config.bigrams:
            raise ValueError("Document BoW reads unigrams only; this DAN hashes bigrams too")
        self.encoder = DanEncoder(model, src_lang, tgt_lang, threads=threads)

    @property
    def src_lang(self) -> str:
        return self.encoder.src_lang

    @property
    def tgt_lang(self) -> str:
        return self.encoder.tgt_lang

    @property
    def dim(self) -> int:
        return self.encoder.dim

    def embed_texts(
        self, texts: Sequence[str], side: Side, *, batch_size: int = 64, progress: Progress | None = None
    ) -> np.ndarray:
        """(n, d) float32 embeddings of whole document texts with `side`'s tower, rows L2-normalised."""
        lang = self.src_lang if side is Side.SOURCE else self.tgt_lang
        return self.encoder.encode(list(texts), lang, batch_size=batch_size, progress=progress)

    def embed_documents(self, docs: Documents, side: Side) -> np.ndarray:
        out = self.embed_texts(docs.texts(), side)
        out[np.diff(docs.offsets) == 0] = 0.0
        return out

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the model atomically (a DAN checkpoint marked as a Document BoW)."""
        data = checkpoint_dict(self.encoder.model, self.src_lang, self.tgt_lang)
        save_checkpoint(path, {**data, "document_model": BOW_CHECKPOINT_KIND})

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, threads: int | None = 1) -> DocumentBow:
        """Load a model written by `save` (a sentence DAN checkpoint is refused)."""
        data = load_checkpoint(path)
        if data.get("document_model") != BOW_CHECKPOINT_KIND:
            raise ValueError(f"{path} is not a Document BoW model")
        model = DanDualEncoder(DanConfig.from_dict(data["config"]))
        model.load_state_dict(data["model"])
        return cls(model.eval(), data["src_lang"], data["tgt_lang"], threads=threads)


def train_document_bow(
    src_texts: Sequence[str],
    tgt_texts: Sequence[str],
    src_lang: str,
    tgt_lang: str,
    config: DanConfig | None = None,
    seed: int = 0,
    *,
    progress: Progress | None = None,
    threads: int | None = 1,
) -> DocumentBow:
    """Train Document BoW on document pairs (``src_texts[i]`` translates to ``tgt_texts[i]``).

    Args:
        src_texts, tgt_texts: n >= 2 whole documents each (sentences joined; splits do not matter).
        src_lang, tgt_lang: the towers' languages.
        config: DAN settings (`document_bow_config()` by default); its `bigrams` is forced off and its
            hard-negative stage skipped, so the model stays a bag of unigrams trained with in-batch negatives.
        seed: seeds the initial weights and the batch shuffles.
        progress: ``progress(done, total)`` in optimisation steps.
        threads: torch intra-op threads while training and embedding (None: the process setting).

    Returns:
        The trained model.
    """
    config = dataclasses.replace(config or document_bow_config(), bigrams=False)
    with torch_threads(threads):
        encoder = train_dan(
            src_texts,
            tgt_texts,
            src_lang=src_lang,
            tgt_lang=tgt_lang,
            config=config,
            seed=seed,
            progress=progress,
            hard_negatives=False,
        )
    return DocumentBow(encoder.model, encoder.src_lang, encoder.tgt_lang, threads=threads)
