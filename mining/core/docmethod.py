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

    @property
    def needs_model(self) -> bool:
        """True for the methods that need a trained document model artefact."""
        return self in (DocMethod.HIDE, DocMethod.BOW)
