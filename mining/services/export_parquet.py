"""A run's kept pairs as Parquet (pyarrow): what the datasets tooling of MT trainers reads directly.

One row per pair, written in batches (memory bounded by the batch, not the run): `translation` is a struct
{src_lang: text, tgt_lang: text} as Hugging Face translation datasets lay it out, beside flat columns with the
provenance: run, rank, scores, labels, sentence ids and the documents' URLs (empty where a document has none).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, BinaryIO

BATCH = 10_000


def _schema(src_lang: str, tgt_lang: str):
    import pyarrow as pa

    return pa.schema(
        [
            ("translation", pa.struct([(src_lang, pa.string()), (tgt_lang, pa.string())])),
            ("run", pa.int64()),
            ("rank", pa.int64()),
            ("score", pa.float64()),
            ("cosine", pa.float64()),
            ("confidence", pa.float64()),
            ("filter_reason", pa.string()),
            ("labels_good", pa.int64()),
            ("labels_bad", pa.int64()),
            ("src_id", pa.int64()),
            ("tgt_id", pa.int64()),
            ("src_url", pa.string()),
            ("tgt_url", pa.string()),
            ("src_doc", pa.string()),
            ("tgt_doc", pa.string()),
        ]
    )


def write_parquet(
    rows: Iterator[tuple],
    out: BinaryIO,
    *,
    run_id: int,
    src_lang: str,
    tgt_lang: str,
    metadata: dict[str, Any] | None = None,
) -> int:
    """Write export rows (`export._rows`' shape) to `out` as one Parquet file; returns the rows written. `metadata`
    (the export's statement: threshold, its source, the precision stated) goes into the schema's metadata as JSON
    under the key `pcapp`."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    if src_lang == tgt_lang:  # a struct cannot have two fields of one name
        tgt_lang = f"{tgt_lang}_tgt"
    schema = _schema(src_lang, tgt_lang)
    if metadata is not None:
        schema = schema.with_metadata({b"pcapp": json.dumps(metadata, sort_keys=True).encode()})
    n = 0
    with pq.ParquetWriter(out, schema, compression="zstd") as writer:
        batch: list[dict[str, Any]] = []
        for rank, s_id, t_id, src, tgt, score, cos, conf, reason, g, b, _cal, doc, urls in rows:
            batch.append(
                {
                    "translation": {src_lang: src, tgt_lang: tgt},
                    "run": run_id,
                    "rank": rank,
                    "score": score,
                    "cosine": cos,
                    "confidence": conf,
                    "filter_reason": reason,
                    "labels_good": g,
                    "labels_bad": b,
                    "src_id": s_id,
                    "tgt_id": t_id,
                    "src_url": urls[0] or "",
                    "tgt_url": urls[1] or "",
                    "src_doc": doc["src"] if doc else "",
                    "tgt_doc": doc["tgt"] if doc else "",
                }
            )
            if len(batch) >= BATCH:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                n += len(batch)
                batch = []
        if batch or n == 0:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            n += len(batch)
    return n
