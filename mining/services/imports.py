"""Corpus import: check the input, create the job, run it all or nothing.

The whole import runs in one transaction: on any error nothing of it remains (a new corpus disappears; an existing
corpus keeps exactly what it had), and the job records the error after the rollback.
"""

from __future__ import annotations

import gc
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction

from ..ingest.errors import ImportFailure
from ..ingest.languages import check_language
from ..ingest.readers import read_folder, read_jsonl, read_moses, read_po, read_tmx, read_tsv, total_bytes
from ..ingest.writer import CorpusWriter
from ..models import Corpus, ImportJob
from .corpora import corpus_refresh_stats
from .crawl_imports import CRAWL_FORMATS, check_crawl_paths, crawl_import
from .jobs import (
    JobStateError,
    job_mark_failed,
    job_mark_finished,
    job_mark_started,
    job_reset_for_retry,
    lease_seconds,
    send_task_or_fail,
)
from .progress import JobCancelled, ProgressReporter
from .uploads import job_upload_remove, public_message, unpack_upload

logger = logging.getLogger(__name__)
Format = ImportJob.Format
ALIGNED = {Format.TSV, Format.MOSES, Format.TMX, Format.PO}


def check_import(*, fmt: str, paths: list[str], options: dict, corpus_name: str) -> None:
    """Raise ImportFailure for anything wrong that can be seen before reading: missing files, sizes, languages."""
    if fmt not in Format.values:
        raise ImportFailure(f"unknown format '{fmt}' (known: {', '.join(Format.values)})")
    if not corpus_name.strip():
        raise ImportFailure("the corpus needs a name")
    max_name = Corpus._meta.get_field("name").max_length
    if len(corpus_name) > max_name:
        raise ImportFailure(f"the corpus name is {len(corpus_name)} characters, over the {max_name} allowed")
    expected = {Format.MOSES: 2, Format.FOLDER: 1, Format.HTML: 1}.get(fmt)
    if expected and len(paths) != expected:
        raise ImportFailure(f"{fmt} import takes {expected} path(s), got {len(paths)}")
    if not paths:
        raise ImportFailure("no input files")
    limit = settings.PCAPP_MAX_UPLOAD_BYTES
    for path in paths:
        if not os.path.exists(path):
            raise ImportFailure("no such file or folder", path=path)
        size = total_bytes([path])
        if size > limit:
            raise ImportFailure(
                f"is {size:,} bytes, over the limit of {limit:,} bytes (PCAPP_MAX_UPLOAD_BYTES)", path=path
            )
    if fmt in CRAWL_FORMATS:
        check_crawl_paths(fmt=fmt, paths=paths, uploaded=bool(options.get("upload_dir")))
    if fmt in ALIGNED:
        check_language(options.get("src_lang") or ("en" if fmt == Format.PO else ""))
        if fmt != Format.PO or options.get("tgt_lang"):
            check_language(options.get("tgt_lang") or "")
    if Corpus.objects.filter(name=corpus_name, deleting=True).exists():
        raise ImportFailure(f"corpus '{corpus_name}' is being deleted; import under another name")
    if options.get("into") is False and Corpus.objects.filter(name=corpus_name).exists():
        raise ImportFailure(f"a corpus named '{corpus_name}' exists (import into it with --into)")


def import_job_create(
    *, corpus_name: str, fmt: str, paths: list[str], options: dict | None = None, user=None
) -> ImportJob:
    """Validate and record an import job (the caller runs it inline or enqueues `mining.import_corpus`)."""
    options = dict(options or {})
    check_import(fmt=fmt, paths=paths, options=options, corpus_name=corpus_name)
    return ImportJob.objects.create(
        corpus_name=corpus_name,
        format=fmt,
        paths=[str(p) for p in paths],
        options=options,
        created_by=user if user and user.is_authenticated else None,
    )


IMPORT_TASK = "mining.import_corpus"  # mining.tasks.import_corpus_task, sent by name: tasks imports this module


def send_import_task(job_id: int) -> None:
    """Send an import job's task to the broker now; BrokerUnavailable marks the job failed."""
    send_task_or_fail(name=IMPORT_TASK, job=ImportJob(pk=job_id), args=[job_id])


def import_job_enqueue(*, job: ImportJob) -> None:
    """Run the job on a worker once the current transaction commits; when the broker cannot be reached the job is
    marked failed (saying so) and BrokerUnavailable is raised, so it is never left pending."""
    transaction.on_commit(lambda: send_import_task(job.pk))


def import_execute(*, job: ImportJob, task_id: str = "", helpers: int = 0) -> ImportJob:
    """Run an import job to the end; never raises for bad input (the job carries the error). An uploaded input is
    removed when the job ends either way: the corpus (or the error) is the record. A job that is not pending (a
    message delivered twice, a cancelled job) or is held by a live worker is left alone.

    A crawl import (WARC, saved HTML) imports file by file (mining.services.crawl_imports); `helpers`: how many other
    workers it may ask to share its files."""
    if not job_mark_started(job=job, task_id=task_id):
        return job
    try:
        with ProgressReporter(ImportJob, job.pk, lease_seconds=lease_seconds()) as reporter:
            if job.format in CRAWL_FORMATS:
                stats = crawl_import(job=job, reporter=reporter, helpers=helpers)
            else:
                stats = _import(job, reporter)
    except JobCancelled:
        job_mark_failed(job=job, error="cancelled by user", cancelled=True, corpus=None)
    except ImportFailure as exc:
        _fail(job, str(exc))
    except Exception as exc:  # unexpected: still all or nothing, and the job says what happened
        logger.exception("import %s failed", job.pk)
        _fail(job, f"{type(exc).__name__}: {exc}")
    else:
        job_mark_finished(job=job, stats=stats)
    finally:
        job_upload_remove(job=job)
    job.refresh_from_db()
    return job


@transaction.atomic
def import_retry(*, job: ImportJob) -> ImportJob:
    """Queue a failed, cancelled or stalled import again (JobStateError otherwise, or when its input is gone: an
    upload is removed once its import has run, so only an import that never ran, or one of files on the server, can
    be retried)."""
    missing = [p for p in job.paths if not os.path.exists(p)]
    if missing:
        names = (job.options or {}).get("upload_names") or {}
        raise JobStateError(
            public_message(f"import {job.pk} cannot be retried: its input is gone ({', '.join(missing)}); ", names)
            + "upload the files again"
        )
    job_reset_for_retry(job=job)
    import_job_enqueue(job=job)
    return job


def _fail(job: ImportJob, message: str) -> None:
    """Record the error, naming uploaded files as they were uploaded (never their path on the server)."""
    message = public_message(message, (job.options or {}).get("upload_names") or {})
    job_mark_failed(job=job, error=message, corpus=None)


@transaction.atomic
def _import(job: ImportJob, reporter: ProgressReporter) -> dict:
    opts = job.options
    for path in job.paths:
        if not os.path.exists(path):
            gone = " (an upload is removed when its import ends: upload it again)" if opts.get("upload_dir") else ""
            raise ImportFailure(f"no such file or folder{gone}", path=path)
    with connection.cursor() as cur:
        # The commit need not wait for the WAL flush of a bulk import: a crash in that instant loses the import
        # (the job shows it unfinished and it can be re-run), it never leaves half of it.
        cur.execute("SET LOCAL synchronous_commit TO OFF")
        # Foreign keys are checked as each COPY ends, on the COPY thread while the next batch is read, instead of
        # all at commit after the last batch; the writer sends rows after the rows they refer to.
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
    corpus = Corpus.objects.filter(name=job.corpus_name).first()
    if corpus is not None and corpus.deleting:
        raise ImportFailure(f"corpus '{job.corpus_name}' is being deleted; import under another name")
    if corpus is not None and not opts.get("into"):
        raise ImportFailure(f"a corpus named '{job.corpus_name}' exists (import into it with --into)")
    if corpus is None:
        corpus = Corpus.objects.create(
            name=job.corpus_name,
            description=opts.get("description", ""),
            source=opts.get("source", ""),
            created_by=job.created_by,
        )
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        reporter.update(done=done)

    reporter.update(stage="reading", done=0, total=_estimate_records(job), force=True)
    writer = CorpusWriter(
        corpus,
        langid_workers=opts.get("langid_workers", settings.PCAPP_IMPORT_WORKERS),
        batch_size=opts.get("batch_size", 20_000),
        progress=tick,
        max_chars=settings.PCAPP_MAX_SENTENCE_CHARS,
    )
    try:
        with _cyclic_gc_paused():
            _write(job, writer)
            reporter.update(stage="finishing", force=True)
            stats = writer.finish()
    finally:
        writer.close()
    if stats["sentences"] == 0:
        skipped = stats["skipped_empty_documents"]
        note = f" ({skipped} empty documents skipped)" if skipped else ""
        raise ImportFailure(f"the input holds no sentences{note}")
    corpus_refresh_stats(corpus=corpus)
    ImportJob.objects.filter(pk=job.pk).update(corpus=corpus)
    return stats


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: an import allocates millions of rows of strings and ints (no cycles;
    reference counting frees them), and collections triggered by them took ~14% of the importing process's time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _write(job: ImportJob, writer: CorpusWriter) -> None:
    opts, paths, fmt = job.options, job.paths, job.format
    src, tgt = opts.get("src_lang", "en" if fmt == Format.PO else ""), opts.get("tgt_lang", "")
    max_chars = writer.max_chars
    uploaded = opts.get("upload_names") or {}

    def name_of(path: str) -> str:
        """A document's name: the file's name as uploaded (or as given on the command line)."""
        return uploaded.get(path) or Path(path).name

    if fmt == Format.TSV:
        for path in paths:
            pairs = read_tsv(path, header=opts.get("header"), max_chars=max_chars)
            writer.write_pairs(pairs, src_lang=src, tgt_lang=tgt, name=name_of(path))
    elif fmt == Format.MOSES:
        pairs = read_moses(paths[0], paths[1], max_chars=max_chars)
        writer.write_pairs(pairs, src_lang=src, tgt_lang=tgt, name=Path(name_of(paths[0])).stem)
    elif fmt == Format.TMX:
        for path in paths:
            pairs = read_tmx(path, src, tgt, max_chars=max_chars)
            writer.write_pairs(pairs, src_lang=src, tgt_lang=tgt, name=name_of(path))
    elif fmt == Format.PO:
        _write_po(paths, src, tgt, opts, writer)
    elif fmt == Format.JSONL:
        for path in paths:
            writer.write_documents(read_jsonl(path))
    elif fmt == Format.FOLDER:  # an uploaded zip is unpacked here, in the task, not in the request
        folder = paths[0]
        if opts.get("upload_dir"):
            folder = unpack_upload(paths[0], label=uploaded.get(paths[0]))
            # errors name the unpacked files inside the zip as uploaded: 'docs.zip/fr/a.txt' (_fail reads this map)
            opts.setdefault("upload_names", {})[str(Path(paths[0]).parent / "folder")] = uploaded.get(paths[0], "")
        writer.write_documents(read_folder(folder))


def _write_po(paths: list[str], src: str, tgt: str, opts: dict, writer: CorpusWriter) -> None:
    """Catalogues of the same name share one source document; each file's language comes from the option, its
    header's Language field, or its locale/<lang>/LC_MESSAGES path."""
    shared: dict[str, tuple[int, dict[str, int]]] = {}
    names = opts.get("catalogue_names") or {}
    uploaded = opts.get("upload_names") or {}
    for path in paths:
        name = names.get(path) or Path(uploaded.get(path) or path).stem
        lang = tgt or _po_language(path)
        if name not in shared:
            shared[name] = (writer.new_document(src, name), {})
        src_doc, seen = shared[name]
        pairs = read_po(path, writer.stats, max_chars=writer.max_chars)
        writer.write_pairs(pairs, src_lang=src, tgt_lang=lang, name=name, src_doc=src_doc, src_seen=seen)


def _po_language(path: str) -> str:
    with open(path, "rb") as fh:
        head = fh.read(8192).decode("utf-8", errors="replace")
    match = re.search(r'"Language: *([A-Za-z_@-]+)\\n"', head)
    if match:
        return check_language(match.group(1).split("@")[0], path=path)
    parts = Path(path).parts
    if "LC_MESSAGES" in parts:
        return check_language(parts[parts.index("LC_MESSAGES") - 1], path=path)
    raise ImportFailure("cannot tell the target language (no Language header): give tgt_lang", path=path)


def _estimate_records(job: ImportJob) -> int:
    """Lines of line-based inputs (for the progress bar); 0 when unknown."""
    if job.format not in (Format.TSV, Format.MOSES, Format.JSONL):
        return 0
    paths = job.paths[:1] if job.format == Format.MOSES else job.paths
    return sum(_count_lines(p) for p in paths)


def _count_lines(path: str) -> int:
    n = 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            n += block.count(b"\n")
    return n
