"""Export files: the `mining.export_run` task builds an export into PCAPP_DATA_DIR/exports/ (a temporary name, then an
atomic rename), with its statement beside it (`<file>.meta.json` for TSV and JSONL; inside the file for TMX, Moses
and Parquet); the pages and the API list and serve them. The rows and formats themselves are `export`'s."""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from pathlib import Path
from typing import Any, BinaryIO

from django.conf import settings
from django.db import transaction

from mining.core.files import atomic_path, write_text_atomic
from pcapp.celery import app as celery_app

from ..models import MiningRun
from ..selectors.precision import statement_json
from .export import (
    MOSES_SIDES,
    ExportFormat,
    KeepRule,
    export_filename,
    export_rows,
    export_statement,
    export_stream,
    moses_lines,
)
from .export_parquet import write_parquet

_FILE_NAME = re.compile(r"^run(\d+)-[a-z0-9]+-[0-9a-f]{10}\.(tsv|tmx|jsonl|zip|parquet)$")


EXPORT_TASK = "mining.export_run"  # mining.tasks.export_run, sent by name (the tasks module imports the services)


def send_export_task(*args: Any) -> None:
    """Send the export task to the broker (now)."""
    celery_app.send_task(EXPORT_TASK, args=list(args))


def export_enqueue(*, run: MiningRun, rule: KeepRule, fmt: ExportFormat, header: bool = False) -> Path:
    """Have the export task build the file once the current transaction commits; returns where it will be."""
    header = header and fmt is ExportFormat.TSV
    args = (run.pk, fmt.value, rule.mode.value, rule.threshold, rule.include_filtered) + ((True,) if header else ())
    transaction.on_commit(lambda: send_export_task(*args))
    return export_file_path(run=run, rule=rule, fmt=fmt, header=header)


def exports_dir() -> Path:
    return Path(settings.PCAPP_DATA_DIR) / "exports"


def export_file_path(*, run: MiningRun, rule: KeepRule, fmt: ExportFormat, header: bool = False) -> Path:
    """Where the task writes this export (deterministic: the same request reuses the same file)."""
    key = [fmt.value, rule.as_dict()] + (["header"] if header and fmt is ExportFormat.TSV else [])
    digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]
    ext = "zip" if fmt is ExportFormat.MOSES else fmt.value
    return exports_dir() / f"run{run.pk}-{fmt.value}-{digest}.{ext}"


def export_build_file(*, run: MiningRun, rule: KeepRule, fmt: ExportFormat, header: bool = False) -> tuple[Path, int]:
    """Write the export to its file (a temporary name beside it, then an atomic rename: `atomic_path`); returns (path,
    pairs written). `header`: a TSV file starts with TSV_HEADER."""
    header = header and fmt is ExportFormat.TSV
    path = export_file_path(run=run, rule=rule, fmt=fmt, header=header)
    statement = export_statement(run=run, rule=rule)
    with atomic_path(path) as tmp:
        n = _write_export(tmp, run=run, rule=rule, fmt=fmt, header=header, statement=statement)
    if fmt in (ExportFormat.TSV, ExportFormat.JSONL):
        write_statement(path, statement)
    return path, n


def write_run_parquet(out: BinaryIO, *, run: MiningRun, rule: KeepRule, statement: dict[str, Any]) -> int:
    """The run's kept pairs as one Parquet file on `out`, the export's statement in its schema metadata; returns the
    pairs written (the export task and `manage.py export` both write Parquet through this)."""
    return write_parquet(
        export_rows(run, rule), out, run_id=run.pk, src_lang=run.src_lang, tgt_lang=run.tgt_lang, metadata=statement
    )


def _write_export(
    tmp: Path, *, run: MiningRun, rule: KeepRule, fmt: ExportFormat, header: bool, statement: dict[str, Any]
) -> int:
    """Write the export to `tmp` (the statement inside Parquet's metadata, the Moses zip's metadata.json); returns
    the pairs written."""
    n = 0
    if fmt is ExportFormat.PARQUET:
        with tmp.open("wb") as fh:
            n = write_run_parquet(fh, run=run, rule=rule, statement=statement)
    elif fmt is ExportFormat.MOSES:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("metadata.json", statement_json(statement) + "\n")
            for side in MOSES_SIDES:
                with zf.open(export_filename(run=run, rule=rule, fmt=fmt, side=side), "w") as fh:
                    n = 0
                    for line in moses_lines(run, rule, side):
                        fh.write(line.encode())
                        n += 1
    else:
        with tmp.open("w", encoding="utf-8") as fh:
            for chunk in export_stream(run=run, rule=rule, fmt=fmt, header=header):
                fh.write(chunk)
                n += 1
        n -= 1 if header else 0
        if fmt is ExportFormat.TMX:
            n -= 3  # prologue, header and closing chunks
    return n


def statement_path(path: Path) -> Path:
    """The metadata file beside a TSV or JSONL export file."""
    return path.with_name(path.name + ".meta.json")


def write_statement(path: Path, statement: dict[str, Any]) -> Path:
    """Write an export's statement to its metadata file (temporary name, then os.replace)."""
    meta = statement_path(path)
    write_text_atomic(meta, statement_json(statement) + "\n")
    return meta


def export_files(*, run: MiningRun) -> list[Path]:
    """Finished export files of a run, newest first."""
    folder = exports_dir()
    if not folder.is_dir():
        return []
    files = [p for p in folder.glob(f"run{run.pk}-*") if _FILE_NAME.match(p.name)]
    return sorted(files, key=lambda p: p.stat().st_mtime, reverse=True)


def export_file_for_download(*, run: MiningRun, name: str) -> Path | None:
    """The run's export file called `name`, or None (the name is checked, so no path can escape the folder)."""
    match = _FILE_NAME.match(name)
    if not match or int(match.group(1)) != run.pk:
        return None
    path = exports_dir() / name
    return path if path.is_file() else None
