"""Readable words for the keys the app stores (run statistics, stages, parameters, pre-filter rules), so that pages
never show raw keys such as `kept_after_filters`."""

from __future__ import annotations

from typing import Any

WORDS = {
    # run statistics
    "candidates": "candidate pairs",
    "kept_after_filters": "kept after the pre-filters",
    "src_sentences": "source sentences",
    "tgt_sentences": "target sentences",
    "document_pairs": "document pairs",
    "artefact_id": "model id",
    "version": "model version",
    "labels": "labels",
    "train_pairs": "training pairs",
    "gold_pairs": "gold pairs",
    "gold_p_at_1": "P@1 on gold pairs",
    "p_at_1_before": "P@1 before",
    "p_at_1_after": "P@1 after",
    "f1_before": "F1 before",
    "f1_after": "F1 after",
    "default_threshold": "label-free default threshold",
    "held_out_margin": "held-out margin by epoch",
    # parameters
    "doc_threshold": "document-pair threshold",
    "updated": "pairs updated",
    # run parameters
    "filters": "pre-filters",
    # stages
    "embed": "embedding",
    "embed-src": "embedding the source",
    "embed-tgt": "embedding the target",
    "knn": "nearest neighbours",
    "plan": "planning",
    "index": "indexing",
    "search": "searching",
    "distributed": "run in shards",
    "score": "scoring",
    "filter": "pre-filtering",
    "write": "writing candidates",
    "match": "matching documents",
    "align": "aligning sentences",
    "cross-validate": "cross-validating",
    "fit": "fitting",
    "apply": "applying",
    "reading": "reading the files",
    # pre-filter rules
    "identical": "identical sides",
    "duplicate": "duplicate pair",
    "wrong_language": "wrong language",
    "too_short": "too short",
    "too_long": "too long",
    "length_ratio": "length ratio",
    "token_overlap": "token overlap (copied text)",
}


def readable(key: Any) -> str:
    """The words for a stored key; unknown keys lose their underscores."""
    text = str(key)
    return WORDS.get(text, text.replace("_", " "))


STAGE_ORDER = (
    "plan",
    "reading",
    "load",
    "labels",
    "embed",
    "embed-src",
    "embed-tgt",
    "index",
    "search",
    "knn",
    "score",
    "filter",
    "match",
    "align",
    "train",
    "fine-tune",
    "cross-validate",
    "fit",
    "evaluate",
    "apply",
    "write",
)


def ordered_timings(timings: dict[str, Any] | None) -> list[tuple[str, float]]:
    """(stage, seconds) in the order a job goes through its stages (the database returns JSON keys sorted by length,
    not as written); unknown stages after the known ones, by name."""
    rank = {name: i for i, name in enumerate(STAGE_ORDER)}
    items = [(str(k), float(v)) for k, v in (timings or {}).items() if isinstance(v, int | float)]
    return sorted(items, key=lambda kv: (rank.get(kv[0], len(rank)), kv[0]))


def shown(value: Any) -> str:
    """A stored value as a page prints it: flags as yes / no, nothing as "–", numbers with at most 4 decimals (so
    no 1.1733485460281372), anything else as it is."""
    if value is None or value == "":
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        text = f"{value:.4f}".rstrip("0").rstrip(".")
        return text if text not in ("", "-0") else "0"
    return str(value)
