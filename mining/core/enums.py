"""The core's closed choices, in a module that imports no numeric library.

Forms, serializers, the admin and the run parameters name these choices; importing them from here (or from the
modules that use them, which re-export them) costs the web tier no numpy, torch, faiss, numba or scipy.
"""

from __future__ import annotations

import enum

from .docmethod import DocMethod

__all__ = ["DocMethod", "FilterReason", "IndexStore", "KnnMethod", "Margin", "SiteScope", "Strategy", "VoteForm"]


class Margin(enum.Enum):
    """How the cosine is compared with the neighbourhood average."""

    ABSOLUTE = "absolute"  # margin(a, b) = a  (plain cosine)
    DISTANCE = "distance"  # margin(a, b) = a - b  (CSLS-like)
    RATIO = "ratio"  # margin(a, b) = a / b  (best in the paper)


class Strategy(enum.Enum):
    """Which pairs become candidates."""

    FORWARD = "forward"
    BACKWARD = "backward"
    INTERSECTION = "intersection"
    MAX_SCORE = "max_score"


class KnnMethod(enum.Enum):
    """Which kNN engine to use."""

    EXACT = "exact"
    IVF = "ivf"


class SiteScope(enum.Enum):
    """Which pages a document run compares."""

    ALL = "all"  # every source page with every target page
    SITE = "site"  # pages of the same registered domain (example.co.uk: www., fr., docs. alike)
    HOST = "host"  # pages of the same host name


class VoteForm(enum.Enum):
    """How a sentence vote is counted (see ``mining.core.docvote``)."""

    COUNTED = "counted"  # c = N + 1, positions relative to document length
    PAPER = "paper"  # c = 0, raw sentence indices (Guo et al. 2018, eq. 3 as printed)


class FilterReason(enum.Enum):
    """Why a pair was rejected."""

    IDENTICAL = "identical"
    DUPLICATE = "duplicate"
    WRONG_LANGUAGE = "wrong_language"
    TOO_SHORT = "too_short"
    TOO_LONG = "too_long"
    LENGTH_RATIO = "length_ratio"
    TOKEN_OVERLAP = "token_overlap"


class IndexStore(enum.Enum):
    """How a sentence run stores its index shards: float32 rows (flat), compressed codes (pq), or chosen by size."""

    AUTO = "auto"
    FLAT = "flat"
    PQ = "pq"


class Rescore(enum.Enum):
    """How a sentence run re-ranks its candidates after the margin: not at all, or with a scorer trained on its own
    confident pairs from the margin, the cosine and the pairs' textual evidence (``evidence_rescore``)."""

    NONE = "none"
    EVIDENCE = "evidence"
