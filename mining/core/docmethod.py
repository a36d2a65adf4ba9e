"""The closed set of document-matching methods a document run can use."""

from __future__ import annotations

import enum


class DocMethod(enum.Enum):
    """How a document run scores source x target document pairs."""

    SENTENCE_AVG = "sentence_avg"  # mean of the sentence embeddings, cosine + margin
    HIDE = "hide"  # hierarchical document embeddings (needs a trained document model)
    BOW = "bow"  # Document BoW embeddings (needs a trained document model)
    SENTENCE_VOTE = "sentence_vote"  # votes of mined sentence pairs
    COUNT = "count"  # count of aligned sentences (baseline)
    RERANK = "rerank"  # retrieve with HiDE (or Sentence-Avg), pre-filter, re-rank with sentence votes (docrerank)

    @property
    def needs_model(self) -> bool:
        """True for the methods that cannot run without a trained document model artefact (RERANK uses HiDE when
        one exists and Sentence-Avg otherwise)."""
        return self in (DocMethod.HIDE, DocMethod.BOW)

    @property
    def reads_sentence_embeddings(self) -> bool:
        """False only for Document BoW, which reads each document's words."""
        return self is not DocMethod.BOW

    @property
    def embeds_documents(self) -> bool:
        """True for the methods that rank by the cosine of document embeddings (then margin and selection)."""
        return self in (DocMethod.SENTENCE_AVG, DocMethod.HIDE, DocMethod.BOW)

    @property
    def votes(self) -> bool:
        """True for the methods that score by sentence kNN hits over every target sentence."""
        return self in (DocMethod.SENTENCE_VOTE, DocMethod.COUNT)

    @classmethod
    def parse(cls, value: str | DocMethod) -> DocMethod:
        """The member named by `value`; ValueError naming the known methods otherwise."""
        if isinstance(value, DocMethod):
            return value
        try:
            return cls(value)
        except ValueError:
            known = ", ".join(m.value for m in cls)
            raise ValueError(f"unknown document method '{value}' (known: {known})") from None
