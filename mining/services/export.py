"""Export a run's kept bitext as TSV, Moses, TMX 1.4 or JSONL with provenance (run, encoder, scores, calibrated
confidence and the calibration model's version, labels).

Moses is one sentence per line per side, plus a line-aligned `.scores` side (tab-separated rank, score, cosine,
confidence, calibration: line n describes pair n); the built file is a zip of the three.

A document run exports its document pairs (`export_documents`): JSONL one record per pair (document ids, titles,
URLs, score, rank, evidence, labels, and the aligned sentence pairs when an alignment run exists); TSV, Moses and TMX
the aligned sentence pairs of its latest alignment run, or each document pair's two texts before any alignment, with
the two documents' ids (TSV columns 8-9, TMX `x-src-doc` / `x-tgt-doc` / `x-doc-rank`).

Every export says what it is (``export_statement``: the threshold it keeps at, the threshold's source and the precision
stated for it with its interval, or why none is): TMX in its header's props (`x-threshold`, `x-threshold-source`,
`x-precision`, `x-precision-low`, `x-precision-high`, `x-precision-reason`, `x-statement` as JSON), Parquet in its
schema's metadata (key `pcapp`), the Moses zip in a `metadata.json` beside the three sides, a built TSV or JSONL file in
`<file>.meta.json` beside it, and every streamed download in its `X-Pcapp-Threshold` response header.

Rows are read with a server-side cursor in chunks, so a stream or a file of any size uses constant memory.
Large sets are written by the `mining.export_run` task to PCAPP_DATA_DIR/exports/ (temporary file, then os.replace).
"""

from __future__ import annotations

import enum
import itertools
import json
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from django.db import models
from django.db.models import QuerySet

from ..models import MiningRun, RunKind, SentencePairCandidate
from ..params import default_encoder_name
from ..selectors import annotate_labels, kept_q, run_threshold
from ..selectors.precision import statement_json, statement_line, threshold_statement
from .export_documents import SENTENCE_ROW_FIELDS, DocumentKeep, bitext_rows, document_records
from .export_parquet import write_parquet

CHUNK = 2000
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


class ExportFormat(enum.Enum):
    TSV = "tsv"
    MOSES = "moses"
    TMX = "tmx"
    JSONL = "jsonl"
    PARQUET = "parquet"


class KeepMode(enum.Enum):
    THRESHOLD = "threshold"  # score >= threshold
    GOOD = "good"  # more GOOD than BAD labels
    BOTH = "both"  # both of the above


@dataclass(frozen=True)
class KeepRule:
    """Which candidates an export keeps; `threshold` None means the run's own threshold (or none)."""

    mode: KeepMode = KeepMode.THRESHOLD
    threshold: float | None = None
    include_filtered: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"mode": self.mode.value, "threshold": self.threshold, "include_filtered": self.include_filtered}


def export_statement(*, run: MiningRun, rule: KeepRule) -> dict[str, Any]:
    """What the export keeps: the run's threshold statement (``selectors.precision.threshold_statement``) at the
    threshold the rule keeps at, with the rule itself (a rule that keeps by labels alone uses no threshold)."""
    statement = threshold_statement(run, threshold=rule.threshold)
    if rule.mode is KeepMode.GOOD:
        statement = {**statement, "reason": statement["reason"] or "kept by labels, not by the threshold"}
    return {**statement, "run": run.pk, "keep": rule.as_dict()}


def export_queryset(*, run: MiningRun, rule: KeepRule) -> QuerySet:
    """The kept candidates as value rows (one query, streamed with `.iterator()`), in rank order."""
    threshold = rule.threshold if rule.threshold is not None else run_threshold(run)
    use_threshold = rule.mode in (KeepMode.THRESHOLD, KeepMode.BOTH)
    qs = SentencePairCandidate.objects.filter(
        kept_q(threshold=threshold if use_threshold else None, include_filtered=rule.include_filtered), run=run
    )
    qs = annotate_labels(qs)
    if rule.mode in (KeepMode.GOOD, KeepMode.BOTH):
        qs = qs.filter(n_good__gt=models.F("n_bad"))
    return qs.order_by("rank").values_list(*SENTENCE_ROW_FIELDS)


def _document_keep(run: MiningRun, rule: KeepRule) -> DocumentKeep:
    threshold = rule.threshold if rule.threshold is not None else run_threshold(run)
    return DocumentKeep(
        threshold=threshold if rule.mode in (KeepMode.THRESHOLD, KeepMode.BOTH) else None,
        good_only=rule.mode in (KeepMode.GOOD, KeepMode.BOTH),
        include_filtered=rule.include_filtered,
    )


def export_rows(run: MiningRun, rule: KeepRule) -> Iterator[tuple]:
    """Export rows: rank, src id, tgt id, src, tgt, score, cosine, confidence, filter reason, n_good, n_bad, the
    calibration model as (id, name, version) or None (joined in the same query, so no query per row), the document
    pair (a dict with its documents' ids and rank) for a document run's rows, else None, and the two documents' URLs
    (source, target; '' where a document has none)."""
    if run.kind == RunKind.DOCUMENT:
        yield from bitext_rows(run=run, rule=_document_keep(run, rule))
        return
    for row in export_queryset(run=run, rule=rule).iterator(chunk_size=CHUNK):
        yield (*row[:11], None if row[11] is None else row[11:14], None, row[14:16])


def _calibration(model: tuple | None) -> str:
    """The calibration model's name and version ('calibration-en-fr v3'), empty when the pair has none."""
    return "" if model is None else f"{model[1]} v{model[2]}"


def _one_line(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ").replace("\t", " ")


def _label(n_good: int, n_bad: int) -> str:
    if n_good > n_bad:
        return "GOOD"
    if n_bad > n_good:
        return "BAD"
    return "" if n_good == 0 else "TIE"


def _conf(conf: float | None) -> str:
    return "" if conf is None else f"{conf:.4f}"


def _tsv(run: MiningRun, rule: KeepRule) -> Iterator[str]:
    """src, tgt, score, cosine, confidence, calibration, label (and for a document run the source and target
    documents' ids): one pair per line, tabs and newlines in text become spaces; confidence and calibration are
    empty when no calibration was applied."""
    for _rank, _s, _t, src, tgt, score, cos, conf, _f, g, b, cal, doc, _urls in export_rows(run, rule):
        docs = "" if doc is None else f"\t{_one_line(doc['src'])}\t{_one_line(doc['tgt'])}"
        yield (
            f"{_one_line(src)}\t{_one_line(tgt)}\t{score:.6f}\t{cos:.6f}\t{_conf(conf)}\t{_calibration(cal)}\t"
            f"{_label(g, b)}{docs}\n"
        )


MOSES_SIDES = ("src", "tgt", "scores")


def moses_lines(run: MiningRun, rule: KeepRule, side: str) -> Iterator[str]:
    """One side of the bitext, one sentence per line (line n of every side is pair n); the `scores` side holds
    rank, score, cosine, confidence and calibration, tab-separated."""
    if side == "scores":
        for rank, _s, _t, _src, _tgt, score, cos, conf, _f, _g, _b, cal, _doc, _urls in export_rows(run, rule):
            yield f"{rank}\t{score:.6f}\t{cos:.6f}\t{_conf(conf)}\t{_calibration(cal)}\n"
        return
    column = 3 if side == "src" else 4
    for row in export_rows(run, rule):
        yield _one_line(row[column]) + "\n"


def _xml(text: str) -> str:
    return escape(_XML_INVALID.sub("", text))


def _encoder_name(run: MiningRun) -> str:
    return str(run.encoder) if run.encoder_id else default_encoder_name()


def _statement_props(statement: dict[str, Any]) -> str:
    """The TMX header props of an export's statement."""
    t = statement["threshold"]
    props = [("x-threshold", "none" if t is None else f"{t:.6f}"), ("x-threshold-source", statement["source_label"])]
    if statement["precision"] is not None:
        props += [
            ("x-precision", f"{statement['precision']:.4f}"),
            ("x-precision-low", f"{statement['low']:.4f}"),
            ("x-precision-high", f"{statement['high']:.4f}"),
        ]
    else:
        props.append(("x-precision-reason", statement["reason"]))
    checked = statement.get("checked")
    if checked:
        props += [
            ("x-precision-checked", f"{checked['precision']:.4f}"),
            ("x-precision-checked-low", f"{checked['low']:.4f}"),
            ("x-precision-checked-high", f"{checked['high']:.4f}"),
            ("x-precision-checked-source", checked["source_label"]),
        ]
    props.append(("x-statement", statement_json(statement)))
    return "".join(f'<prop type="{t}">{_xml(str(v))}</prop>' for t, v in props)


def _tmx(run: MiningRun, rule: KeepRule) -> Iterator[str]:
    """TMX 1.4 with one <tu> per pair and its provenance in <prop type="x-...">."""
    yield '<?xml version="1.0" encoding="UTF-8"?>\n<tmx version="1.4">\n'
    yield (
        f'<header creationtool="pcapp" creationtoolversion="1" segtype="sentence" o-tmf="pcapp" '
        f'adminlang="en" srclang={quoteattr(run.src_lang)} datatype="plaintext">\n'
        f'<prop type="x-run">{run.pk}</prop><prop type="x-encoder">{_xml(_encoder_name(run))}</prop>'
        f'<prop type="x-keep">{_xml(json.dumps(rule.as_dict()))}</prop>'
        f"{_statement_props(export_statement(run=run, rule=rule))}\n</header>\n<body>\n"
    )
    for rank, s_id, t_id, src, tgt, score, cos, conf, reason, g, b, cal, doc, urls in export_rows(run, rule):
        props = [
            ("x-run", run.pk),
            ("x-rank", rank),
            ("x-score", f"{score:.6f}"),
            ("x-cosine", f"{cos:.6f}"),
            ("x-src-id", s_id),
            ("x-tgt-id", t_id),
            ("x-good", g),
            ("x-bad", b),
        ]
        if conf is not None:
            props.append(("x-confidence", f"{conf:.4f}"))
        if cal is not None:
            props.append(("x-calibration", _calibration(cal)))
        if reason:
            props.append(("x-filter", reason))
        if doc is not None:
            props += [("x-src-doc", doc["src"]), ("x-tgt-doc", doc["tgt"]), ("x-doc-rank", doc["rank"])]
        props += [(name, url) for name, url in zip(("x-src-url", "x-tgt-url"), urls, strict=True) if url]
        prop_xml = "".join(f'<prop type="{t}">{_xml(str(v))}</prop>' for t, v in props)
        yield (
            f'<tu tuid="{run.pk}-{rank}">{prop_xml}'
            f"<tuv xml:lang={quoteattr(run.src_lang)}><seg>{_xml(src)}</seg></tuv>"
            f"<tuv xml:lang={quoteattr(run.tgt_lang)}><seg>{_xml(tgt)}</seg></tuv></tu>\n"
        )
    yield "</body>\n</tmx>\n"


def _jsonl(run: MiningRun, rule: KeepRule) -> Iterator[str]:
    """One JSON object per pair with its provenance (a document run: per document pair)."""
    encoder = _encoder_name(run)
    if run.kind == RunKind.DOCUMENT:
        for record in document_records(run=run, rule=_document_keep(run, rule), encoder=encoder):
            yield json.dumps(record, ensure_ascii=False) + "\n"
        return
    for rank, s_id, t_id, src, tgt, score, cos, conf, reason, g, b, cal, _doc, urls in export_rows(run, rule):
        yield (
            json.dumps(
                {
                    "run": run.pk,
                    "encoder": encoder,
                    "src_lang": run.src_lang,
                    "tgt_lang": run.tgt_lang,
                    "rank": rank,
                    "src_id": s_id,
                    "tgt_id": t_id,
                    "src": src,
                    "tgt": tgt,
                    "score": score,
                    "cosine": cos,
                    "confidence": conf,
                    "calibration": None if cal is None else dict(zip(("id", "name", "version"), cal, strict=True)),
                    "filter_reason": reason,
                    "labels": {"good": g, "bad": b},
                    **({"src_url": urls[0], "tgt_url": urls[1]} if any(urls) else {}),
                },
                ensure_ascii=False,
            )
            + "\n"
        )


def parquet_chunks(*, run: MiningRun, rule: KeepRule, chunk: int = 1 << 20) -> Iterator[bytes]:
    """The Parquet export as bytes: written to a temporary file (Parquet's footer comes last), then read back."""
    with tempfile.TemporaryFile() as fh:
        write_parquet(
            export_rows(run, rule),
            fh,
            run_id=run.pk,
            src_lang=run.src_lang,
            tgt_lang=run.tgt_lang,
            metadata=export_statement(run=run, rule=rule),
        )
        fh.seek(0)
        while block := fh.read(chunk):
            yield block


TSV_HEADER = "src\ttgt\tscore\tcosine\tconfidence\tcalibration\tlabel\n"
"""The first line of a TSV export with a header (`header=True`, the CLI's --header, the export page's checkbox)."""


def export_stream(
    *, run: MiningRun, rule: KeepRule, fmt: ExportFormat, side: str = "src", header: bool = False
) -> Iterator[str]:
    """The export as text chunks (Moses: one `side`, 'src', 'tgt' or 'scores'; Parquet: bytes). `header`: a TSV
    export starts with TSV_HEADER (the other formats name their fields themselves)."""
    if fmt is ExportFormat.PARQUET:
        return parquet_chunks(run=run, rule=rule)  # type: ignore[return-value]
    if fmt is ExportFormat.TSV:
        return itertools.chain([TSV_HEADER], _tsv(run, rule)) if header else _tsv(run, rule)
    if fmt is ExportFormat.MOSES:
        if side not in MOSES_SIDES:
            raise ValueError("Moses side must be 'src', 'tgt' or 'scores'")
        return moses_lines(run, rule, side)
    if fmt is ExportFormat.TMX:
        return _tmx(run, rule)
    return _jsonl(run, rule)


CONTENT_TYPES = {
    ExportFormat.TSV: "text/tab-separated-values; charset=utf-8",
    ExportFormat.MOSES: "text/plain; charset=utf-8",
    ExportFormat.TMX: "application/x-tmx+xml; charset=utf-8",
    ExportFormat.JSONL: "application/x-ndjson; charset=utf-8",
    ExportFormat.PARQUET: "application/vnd.apache.parquet",
}


@dataclass(frozen=True)
class ExportDownload:
    """A streamed download: its text chunks, content type and file name (the page and the API both serve it)."""

    chunks: Iterator[str]
    content_type: str
    filename: str
    statement: str = ""  # the export's statement in one ASCII line (the X-Pcapp-Threshold header)


def export_download(
    *, run: MiningRun, rule: KeepRule, fmt: ExportFormat, side: str = "src", header: bool = False
) -> ExportDownload:
    """The export as a download (Moses: one `side`; TSV: with a first line naming the columns when `header`)."""
    return ExportDownload(
        export_stream(run=run, rule=rule, fmt=fmt, side=side, header=header),
        CONTENT_TYPES[fmt],
        export_filename(run=run, rule=rule, fmt=fmt, side=side if fmt is ExportFormat.MOSES else None),
        statement_line(export_statement(run=run, rule=rule)),
    )


def export_filename(*, run: MiningRun, rule: KeepRule, fmt: ExportFormat, side: str | None = None) -> str:
    """A download name such as `run12-en-fr-threshold.tmx`."""
    base = f"run{run.pk}-{run.src_lang}-{run.tgt_lang}-{rule.mode.value}"
    if fmt is ExportFormat.MOSES:
        if not side:
            return f"{base}.zip"
        ext = {"src": run.src_lang, "tgt": run.tgt_lang}.get(side, side)
        return f"{base}.{ext}"
    return f"{base}.{fmt.value}"
