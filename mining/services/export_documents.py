"""What a document run exports: its kept document pairs (ids, titles, URLs, score, rank, evidence, labels), and for
the line formats (TSV, Moses, TMX) the sentence pairs of its latest alignment run inside those document pairs, or,
before any alignment, each document pair's two texts (its sentences joined) as one segment.

The keep rule applies to the document pairs (their score, pre-filter reason and labels); aligned sentence pairs
flagged by the aligner (identical sides, wrong language) are left out unless the rule includes filtered pairs.
Rows are streamed in rank order with server-side cursors; document texts are read one chunk of pairs at a time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from django.db import models
from django.db.models import QuerySet

from ..models import DocumentPairCandidate, JobStatus, MiningRun, RunKind, Sentence, SentencePairCandidate
from ..selectors import annotate_labels, kept_q

# The columns of one exported sentence pair, in the order every format reads them (export.py uses them too).
SENTENCE_ROW_FIELDS = (
    "rank",
    "src_id",
    "tgt_id",
    "src__text",
    "tgt__text",
    "score",
    "cosine",
    "confidence",
    "filter_reason",
    "n_good",
    "n_bad",
    "calibration_id",
    "calibration__name",
    "calibration__version",
    "src__document__url",
    "tgt__document__url",
)

CHUNK = 500


@dataclass(frozen=True)
class DocumentKeep:
    """Which document pairs an export keeps (`export.KeepRule` resolved against the run)."""

    threshold: float | None = None  # score >= threshold (None: any score)
    good_only: bool = False  # more GOOD than BAD labels
    include_filtered: bool = False  # also pairs a pre-filter rule marked


DOC_FIELDS = (
    "pk",
    "rank",
    "src_id",
    "tgt_id",
    "src__external_id",
    "tgt__external_id",
    "src__title",
    "tgt__title",
    "src__url",
    "tgt__url",
    "score",
    "cosine",
    "confidence",
    "filter_reason",
    "evidence",
    "n_good",
    "n_bad",
)


def latest_alignment(run: MiningRun) -> MiningRun | None:
    """The newest succeeded alignment run of a document run, or None."""
    return MiningRun.objects.filter(parent=run, kind=RunKind.ALIGN, status=JobStatus.SUCCEEDED).order_by("-pk").first()


def kept_document_pairs(*, run: MiningRun, rule: DocumentKeep) -> QuerySet:
    """The document pairs the rule keeps, with label counts, in rank order (one query)."""
    qs = DocumentPairCandidate.objects.filter(
        kept_q(threshold=rule.threshold, include_filtered=rule.include_filtered), run=run
    )
    qs = annotate_labels(qs)
    if rule.good_only:
        qs = qs.filter(n_good__gt=models.F("n_bad"))
    return qs.order_by("rank")


def document_pairs(*, run: MiningRun, rule: DocumentKeep) -> Iterator[dict[str, Any]]:
    """The kept document pairs as dicts of DOC_FIELDS."""
    yield from kept_document_pairs(run=run, rule=rule).values(*DOC_FIELDS).iterator(chunk_size=CHUNK)


def _doc(row: dict[str, Any]) -> dict[str, Any]:
    """The document-pair part of an exported row: both documents' ids and the pair's rank."""
    return {"src": row["src__external_id"], "tgt": row["tgt__external_id"], "rank": row["rank"]}


def aligned_sentence_rows(*, run: MiningRun, align: MiningRun, rule: DocumentKeep) -> Iterator[tuple]:
    """The alignment run's sentence pairs inside the kept document pairs, by document-pair rank then bead rank, in
    the shape of `export`'s rows: ..., (doc-pair id, its document ids and rank), (source URL, target URL)."""
    kept = kept_document_pairs(run=run, rule=rule).values("pk")
    qs = SentencePairCandidate.objects.filter(run=align, doc_pair__in=kept)
    if not rule.include_filtered:
        qs = qs.filter(filter_reason="")
    qs = annotate_labels(qs).order_by("doc_pair__rank", "rank")
    fields = (
        *SENTENCE_ROW_FIELDS,
        "doc_pair_id",
        "doc_pair__src__external_id",
        "doc_pair__tgt__external_id",
        "doc_pair__rank",
    )
    for row in qs.values_list(*fields).iterator(chunk_size=CHUNK):
        cal = None if row[11] is None else row[11:14]
        yield (*row[:11], cal, {"id": row[16], "src": row[17], "tgt": row[18], "rank": row[19]}, row[14:16])


def _texts(doc_ids: set[int]) -> dict[int, str]:
    """Each document's sentences joined with spaces (one query)."""
    parts: dict[int, list[str]] = defaultdict(list)
    rows = Sentence.objects.filter(document_id__in=doc_ids).order_by("document_id", "position")
    for d, text in rows.values_list("document_id", "text").iterator(chunk_size=5_000):
        parts[d].append(text)
    return {d: " ".join(p) for d, p in parts.items()}


def document_text_rows(*, run: MiningRun, rule: DocumentKeep) -> Iterator[tuple]:
    """Each kept document pair as one segment pair (its two texts), in the shape of `export`'s rows plus the pair."""
    pairs = document_pairs(run=run, rule=rule)
    while chunk := list(islice(pairs, CHUNK)):
        texts = _texts({r["src_id"] for r in chunk} | {r["tgt_id"] for r in chunk})
        for r in chunk:
            yield (
                r["rank"],
                r["src_id"],
                r["tgt_id"],
                texts.get(r["src_id"], ""),
                texts.get(r["tgt_id"], ""),
                r["score"],
                r["cosine"],
                r["confidence"],
                r["filter_reason"],
                r["n_good"],
                r["n_bad"],
                None,
                {"id": r["pk"], **_doc(r)},
                (r["src__url"], r["tgt__url"]),
            )


def bitext_rows(*, run: MiningRun, rule: DocumentKeep) -> Iterator[tuple]:
    """The line formats' rows of a document run: aligned sentence pairs when an alignment run exists, else whole
    documents."""
    align = latest_alignment(run)
    if align is not None:
        return aligned_sentence_rows(run=run, align=align, rule=rule)
    return document_text_rows(run=run, rule=rule)


def document_records(*, run: MiningRun, rule: DocumentKeep, encoder: str) -> Iterator[dict[str, Any]]:
    """JSONL records of a document run: one per kept document pair, with its aligned sentence pairs when an
    alignment run exists (merged from a second stream in the same rank order: two queries in all)."""
    align = latest_alignment(run)
    aligned = iter(aligned_sentence_rows(run=run, align=align, rule=rule)) if align else iter(())
    pending = next(aligned, None)
    for r in document_pairs(run=run, rule=rule):
        record = {
            "run": run.pk,
            "encoder": encoder,
            "src_lang": run.src_lang,
            "tgt_lang": run.tgt_lang,
            "rank": r["rank"],
            "score": r["score"],
            "cosine": r["cosine"],
            "confidence": r["confidence"],
            "filter_reason": r["filter_reason"],
            "labels": {"good": r["n_good"], "bad": r["n_bad"]},
            "src": {
                "id": r["src_id"],
                "external_id": r["src__external_id"],
                "title": r["src__title"],
                "url": r["src__url"],
            },
            "tgt": {
                "id": r["tgt_id"],
                "external_id": r["tgt__external_id"],
                "title": r["tgt__title"],
                "url": r["tgt__url"],
            },
            "evidence": r["evidence"],
        }
        if align is not None:
            pairs = []
            while pending is not None and pending[12]["id"] == r["pk"]:
                pairs.append({"src": pending[3], "tgt": pending[4], "score": pending[5], "filter_reason": pending[8]})
                pending = next(aligned, None)
            record["alignment_run"] = align.pk
            record["sentence_pairs"] = pairs
        yield record
