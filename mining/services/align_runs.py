"""Alignment runs: sentence pairs inside the document pairs a document run matched (each pair's sentences aligned
with `core.align`), written as sentence-pair candidates that point at their document pair."""

from __future__ import annotations

import time

import numpy as np
from django.db import transaction

from ..core.align import AlignConfig, align, sentence_pairs
from ..db.bulk import copy_rows
from ..models import DocumentPairCandidate, MiningRun, RunKind, SentencePairCandidate
from ..params import AlignRunParams
from .document_runs import DocSide, doc_side, embed_doc_side
from .encoders import encoder_default
from .progress import ProgressReporter
from .runs import run_record_timing


def execute_align_run(run: MiningRun, reporter: ProgressReporter) -> dict:
    """Align the sentences of the parent document run's pairs scoring >= params.doc_threshold (all when unset); the
    languages and corpora are the parent's."""
    parent = run.parent
    if parent is None or parent.kind != RunKind.DOCUMENT:
        raise ValueError("an alignment run needs a document-matching run as its parent")
    if run.encoder is None:
        MiningRun.objects.filter(pk=run.pk).update(encoder=parent.encoder or encoder_default())
        run.refresh_from_db()
    params = AlignRunParams.from_stored(run.params)
    pairs = DocumentPairCandidate.objects.filter(run=parent)
    if params.doc_threshold is not None:
        pairs = pairs.filter(score__gte=params.doc_threshold)
    pairs = list(pairs.order_by("rank").values_list("id", "src_id", "tgt_id"))
    src = doc_side(parent.src_corpus, parent.src_lang)
    tgt = doc_side(parent.tgt_corpus, parent.tgt_lang)
    reporter.update(stage="embed", force=True)
    s_emb = embed_doc_side(run, parent.src_corpus, parent.src_lang, src, reporter)
    t_emb = embed_doc_side(run, parent.tgt_corpus, parent.tgt_lang, tgt, reporter)
    s_index = {int(d): i for i, d in enumerate(src.doc_ids)}
    t_index = {int(d): i for i, d in enumerate(tgt.doc_ids)}
    reporter.update(stage="align", done=0, total=len(pairs), force=True)
    t0 = time.perf_counter()
    out = []
    for n, (pair_id, s_doc, t_doc) in enumerate(pairs):
        out.extend(_align_pair(pair_id, src, tgt, s_emb, t_emb, s_index[s_doc], t_index[t_doc], run))
        reporter.update(done=n + 1)
    run_record_timing(run=run, stage="align", seconds=time.perf_counter() - t0)
    return {"candidates": _write_aligned(run, out), "document_pairs": len(pairs)}


def _align_pair(pair_id: int, src: DocSide, tgt: DocSide, s_emb, t_emb, i: int, j: int, run: MiningRun) -> list:
    a0, a1 = src.offsets[i], src.offsets[i + 1]
    b0, b1 = tgt.offsets[j], tgt.offsets[j + 1]
    s_texts, t_texts = src.texts[a0:a1], tgt.texts[b0:b1]
    beads = sentence_pairs(
        align(
            s_emb[a0:a1],
            t_emb[b0:b1],
            np.array([len(t) for t in s_texts]),
            np.array([len(t) for t in t_texts]),
            AlignConfig(),
        )
    )
    rows = []
    for b in beads:
        s_text = " ".join(s_texts[b.src_start : b.src_end])
        t_text = " ".join(t_texts[b.tgt_start : b.tgt_end])
        reason = ""
        if s_text.strip() == t_text.strip():
            reason = "identical"
        elif {src.detected[a0 + k] for k in range(b.src_start, b.src_end)} - {run.src_lang, ""} or {
            tgt.detected[b0 + k] for k in range(b.tgt_start, b.tgt_end)
        } - {run.tgt_lang, ""}:
            reason = "wrong_language"
        rows.append(
            (
                pair_id,
                int(src.sent_ids[a0 + b.src_start]),
                int(tgt.sent_ids[b0 + b.tgt_start]),
                b.cosine,
                reason,
                {
                    "bead": [b.src_end - b.src_start, b.tgt_end - b.tgt_start],
                    "src_rows": [int(x) for x in src.sent_ids[a0 + b.src_start : a0 + b.src_end]],
                    "tgt_rows": [int(x) for x in tgt.sent_ids[b0 + b.tgt_start : b0 + b.tgt_end]],
                },
            )
        )
    return rows


@transaction.atomic
def _write_aligned(run: MiningRun, rows: list) -> int:
    """Sentence-pair candidates of an alignment run, each pointing at its document pair (one row per bead; merged
    beads keep their first sentences as src/tgt and list all rows in the evidence)."""
    SentencePairCandidate.objects.filter(run=run).delete()
    seen, uniq = set(), []
    for r in sorted(rows, key=lambda r: -r[3]):
        if (r[1], r[2]) not in seen:
            seen.add((r[1], r[2]))
            uniq.append(r)
    return copy_rows(
        SentencePairCandidate,
        [
            "run_id",
            "src_id",
            "tgt_id",
            "cosine",
            "score",
            "rank",
            "strategy",
            "filter_reason",
            "doc_pair_id",
            "evidence",
        ],
        (
            (run.pk, s, t, cos, cos, i + 1, "align", reason, pair, ev)
            for i, (pair, s, t, cos, reason, ev) in enumerate(uniq)
        ),
        ["int8", "int8", "int8", "float8", "float8", "int4", "text", "text", "int8", "jsonb"],
    )
