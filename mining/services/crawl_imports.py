"""Crawl imports (WARC / WARC.gz / WET files, a folder of saved HTML pages): one part per file, each imported in a
transaction of its own by whichever process claims it, so several workers share a large crawl.

The job's own task creates the corpus, records one `ImportPart` per file, asks the other workers for help (tasks
`mining.import_crawl_parts`, as many as there are other files) and then claims parts itself, one after the other,
until none is left; then it waits for parts others hold (taking over one whose holder stopped renewing its lease),
and finishes. With one worker, that worker imports every file; with N, the files spread over them.

A part streams its file (`mining.ingest.crawl.read_crawl`): pages are extracted, their language identified and their
sentences split, and written to a spool file on disk as they come, so memory stays flat in the file's size. Then,
holding the corpus's advisory lock (one writer per corpus at a time: the write is the short step), it drops pages
whose URL or text the corpus already has (from other files), and COPYs the rest. Bad records and pages are skipped
and counted by reason, with the first few kept as examples (offset, URL, what was seen); only a file of which not
one record can be read fails, and the job fails only when every file did.
"""

from __future__ import annotations

import logging
import os
import pickle
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Sum

from ..ingest.crawl import CrawlOptions, CrawlPage, Extractor, PageLimits, Skip, read_crawl
from ..ingest.errors import ImportFailure
from ..ingest.writer import CorpusWriter
from ..models import Corpus, Document, ImportJob, ImportPart, JobStatus
from .corpora import corpus_refresh_stats
from .jobs import job_mark_failed, job_mark_finished, lease_seconds, worker_name
from .progress import JobCancelled, ProgressReporter
from .uploads import public_message, unpack_upload

logger = logging.getLogger(__name__)

CRAWL_FORMATS = (ImportJob.Format.WARC, ImportJob.Format.HTML)
PARTS_TASK = "mining.import_crawl_parts"  # mining.tasks.import_crawl_parts_task, sent by name
EXAMPLES_PER_REASON = 3
_LOCK_SPACE = 28_0001  # first key of the advisory lock pg_advisory_xact_lock(space, corpus id)


def crawl_options(job: ImportJob) -> CrawlOptions:
    """The crawl reader's options from the job's (extractor, page size limit) and the settings."""
    opts = job.options or {}
    return CrawlOptions(
        extractor=Extractor(opts.get("extractor") or "resiliparse"),
        limits=PageLimits(max_bytes=int(opts.get("max_page_bytes") or settings.PCAPP_CRAWL_MAX_PAGE_BYTES)),
        max_chars=settings.PCAPP_MAX_SENTENCE_CHARS,
    )


def _corpus(job: ImportJob) -> Corpus:
    """The job's corpus, created (and committed) when it is new."""
    opts = job.options or {}
    with transaction.atomic():
        corpus = Corpus.objects.filter(name=job.corpus_name).first()
        if corpus is not None and not opts.get("into") and not job.parts.exists():
            raise ImportFailure(f"a corpus named '{job.corpus_name}' exists (import into it with --into)")
        if corpus is None:
            corpus = Corpus.objects.create(
                name=job.corpus_name,
                description=opts.get("description", ""),
                source=opts.get("source", "") or "web crawl",
                created_by=job.created_by,
            )
        ImportJob.objects.filter(pk=job.pk).update(corpus=corpus)
    return corpus


def _readable_paths(job: ImportJob) -> list[str]:
    """The job's paths as the parts read them: an uploaded zip of saved pages is unpacked here, in the task (never in
    the request), into a folder beside it."""
    if job.format == ImportJob.Format.HTML and (job.options or {}).get("upload_dir"):
        names = (job.options or {}).get("upload_names", {})
        return [unpack_upload(p, label=names.get(p)) for p in job.paths]
    return list(job.paths)


def _ensure_parts(job: ImportJob, paths: list[str]) -> list[ImportPart]:
    """One part per file (kept across retries: a finished part is not imported twice); unfinished parts of an
    earlier attempt are made pending again."""
    for n, path in enumerate(paths):
        ImportPart.objects.get_or_create(job=job, part_no=n, defaults={"path": path, "created_by": job.created_by})
    ImportPart.objects.filter(job=job).exclude(status=JobStatus.SUCCEEDED).update(
        status=JobStatus.PENDING, lease_owner="", lease_expires_at=None, error="", cancel_requested=False
    )
    return list(ImportPart.objects.filter(job=job))


def part_claim(job_id: int) -> ImportPart | None:
    """Take the next pending part of the job (or one whose holder's lease expired) for this process."""
    table = ImportPart._meta.db_table
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {table} SET status = 'running', lease_owner = %s, started_at = now(), "
            "lease_expires_at = now() + make_interval(secs => %s) "
            f"WHERE id = (SELECT id FROM {table} WHERE job_id = %s AND (status = 'pending' OR (status = 'running' "
            "AND lease_expires_at < now())) ORDER BY part_no LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id",
            [worker_name(), lease_seconds(), job_id],
        )
        row = cur.fetchone()
    return ImportPart.objects.get(pk=row[0]) if row else None


def parts_work(*, job_id: int) -> int:
    """Claim and import parts of the job until none is left (what a helper task does); returns how many."""
    job = ImportJob.objects.filter(pk=job_id).first()
    if job is None or job.status != JobStatus.RUNNING or job.corpus_id is None:
        return 0
    n = 0
    while (part := part_claim(job_id)) is not None:
        part_execute(job=job, part=part)
        n += 1
    return n


def check_crawl_paths(*, fmt: str, paths: list[str], uploaded: bool = False) -> None:
    """A saved-pages import reads one folder (an uploaded one is a zip that the task unpacks); a WARC import reads
    files (ImportFailure otherwise)."""
    for path in paths:
        if fmt == ImportJob.Format.HTML and not uploaded and not os.path.isdir(path):
            raise ImportFailure("is not a folder (a saved-pages import reads a folder of .html files)", path=path)
        if fmt == ImportJob.Format.WARC and os.path.isdir(path):
            raise ImportFailure("is a folder: give the WARC files in it", path=path)


def crawl_import(*, job: ImportJob, reporter: ProgressReporter, helpers: int = 0) -> dict:
    """Run a crawl import job (the job's own task): parts here and on up to `helpers` other workers, then the
    job's summary."""
    corpus = _corpus(job)
    job.refresh_from_db()
    parts = _ensure_parts(job, _readable_paths(job))
    reporter.update(stage="reading", done=0, total=sum(_size(p.path) for p in parts), force=True)
    helpers = min(len(parts) - 1, helpers)
    if helpers > 0:
        from pcapp.celery import app as celery_app

        for _ in range(helpers):
            celery_app.send_task(PARTS_TASK, args=[job.pk])
    while True:
        part = part_claim(job.pk)
        if part is not None:
            part_execute(job=job, part=part, on_bytes=lambda: _report(job.pk, reporter))
            continue
        if not ImportPart.objects.filter(job=job).exclude(status__in=[JobStatus.SUCCEEDED, JobStatus.FAILED]).exists():
            break
        _report(job.pk, reporter, force=True)  # raises JobCancelled when the job was cancelled
        time.sleep(1.0)
    reporter.update(stage="finishing", force=True)
    corpus_refresh_stats(corpus=corpus)
    return _summary(job, corpus)


def _size(path: str) -> int:
    from ..ingest.readers import total_bytes

    return total_bytes([path])


_last_report: dict[int, float] = {}


def _report(job_id: int, reporter: ProgressReporter, *, force: bool = False) -> None:
    """The job's bytes done, summed over its parts (one query at most every second: it is called per record)."""
    now = time.monotonic()
    if not force and now - _last_report.get(job_id, 0.0) < 1.0:
        return
    _last_report[job_id] = now
    done = ImportPart.objects.filter(job_id=job_id).aggregate(d=Sum("done"))["d"] or 0
    reporter.update(done=int(done), force=force)


def _summary(job: ImportJob, corpus: Corpus) -> dict:
    """The job's stats: counts summed over its parts, a few examples per skip reason, the files that failed."""
    parts = list(ImportPart.objects.filter(job=job).order_by("part_no"))
    names = (job.options or {}).get("upload_names") or {}
    failed = [{"file": public_message(p.path, names), "error": p.error} for p in parts if p.status == JobStatus.FAILED]
    if failed and len(failed) == len(parts):
        raise ImportFailure("; ".join(f["error"] for f in failed))
    totals: dict[str, int] = {}
    skipped: dict[str, int] = {}
    examples: dict[str, list] = {}
    for p in parts:
        for key, value in (p.stats or {}).items():
            if key == "skipped":
                for reason, n in value.items():
                    skipped[reason] = skipped.get(reason, 0) + n
            elif key == "examples":
                for reason, items in value.items():
                    room = EXAMPLES_PER_REASON - len(examples.setdefault(reason, []))
                    examples[reason] += [{**e, "file": public_message(p.path, names)} for e in items[: max(room, 0)]]
            elif isinstance(value, int) and not isinstance(value, bool):
                totals[key] = totals.get(key, 0) + value
    return {**totals, "skipped": skipped, "examples": examples, "files": len(parts), "failed_files": failed}


def part_execute(*, job: ImportJob, part: ImportPart, on_bytes=None) -> None:
    """Import one claimed part in its own transaction; its outcome is recorded on the part (never raised)."""
    names = (job.options or {}).get("upload_names") or {}
    try:
        with ProgressReporter(ImportPart, part.pk, lease_seconds=lease_seconds()) as own:
            watch = ProgressReporter(ImportJob, job.pk)  # raises JobCancelled once the job is cancelled
            try:
                stats = _import_part(job, part, own, watch, on_bytes)
            finally:
                watch.close()
    except JobCancelled:
        job_mark_failed(job=part, error="cancelled with its import", cancelled=True)
    except ImportFailure as exc:
        job_mark_failed(job=part, error=public_message(str(exc), names))
    except Exception as exc:  # a bug, or the database went away: the part fails, saying what happened
        logger.exception("import %s part %s failed", job.pk, part.part_no)
        job_mark_failed(job=part, error=public_message(f"{type(exc).__name__}: {exc}", names))
    else:
        job_mark_finished(job=part, stats=stats)


class _Tally:
    """Skip counts by reason and the first few examples of each."""

    def __init__(self) -> None:
        self.skipped: dict[str, int] = {}
        self.examples: dict[str, list[dict]] = {}

    def add(self, skip: Skip) -> None:
        self.skipped[skip.reason] = self.skipped.get(skip.reason, 0) + 1
        items = self.examples.setdefault(skip.reason, [])
        if len(items) < EXAMPLES_PER_REASON:
            items.append({"offset": skip.offset, "url": skip.url[:300], "detail": skip.detail[:300]})


@contextmanager
def _spool() -> Iterator:
    with tempfile.TemporaryFile(prefix="pcapp-crawl-", dir=settings.PCAPP_SPOOL_DIR or None) as fh:
        yield fh


def _spooled(fh) -> Iterator[CrawlPage]:
    fh.seek(0)
    while True:
        try:
            yield pickle.load(fh)
        except EOFError:
            return


def _import_part(job: ImportJob, part: ImportPart, own: ProgressReporter, watch: ProgressReporter, on_bytes) -> dict:
    tally = _Tally()
    pages = records = 0
    own.update(stage="reading", done=0, total=_size(part.path), force=True)
    with _spool() as fh:
        for event in read_crawl(part.path, crawl_options(job)):
            if isinstance(event, int):
                own.update(done=event)
                watch.update()
                if on_bytes is not None:
                    on_bytes()
                continue
            records += 1
            if records % 500 == 0:  # the part's row says how many records so far (its done / total are bytes)
                own.update(stage=f"reading: {records:,} records, {pages:,} pages")
            if isinstance(event, Skip):
                if event.reason != "not_page":
                    tally.add(event)
                continue
            pickle.dump(event, fh, protocol=pickle.HIGHEST_PROTOCOL)
            pages += 1
        own.update(stage="writing", force=True)
        written = _write_spool(job, fh, tally, own)
    stats = {"records": records, "pages_read": pages, **written, "skipped": tally.skipped, "examples": tally.examples}
    return stats


@transaction.atomic
def _write_spool(job: ImportJob, fh, tally: _Tally, own: ProgressReporter) -> dict:
    """COPY the spooled pages the corpus does not have yet, holding the corpus's lock until the commit."""
    with connection.cursor() as cur:
        cur.execute("SET LOCAL synchronous_commit TO OFF")
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_LOCK_SPACE, job.corpus_id])
    corpus = Corpus.objects.get(pk=job.corpus_id)
    urls, hashes = _known(corpus, fh)
    writer = CorpusWriter(
        corpus,
        langid_workers=(job.options or {}).get("langid_workers", settings.PCAPP_IMPORT_WORKERS),
        max_chars=settings.PCAPP_MAX_SENTENCE_CHARS,
        check_existing=False,
    )
    try:
        for page in _spooled(fh):
            if page.url in urls:
                tally.add(Skip("duplicate_url", page.offset, page.url, "already in the corpus (another file)"))
                continue
            if page.content_hash in hashes:
                tally.add(Skip("duplicate_content", page.offset, page.url, "the same text is in the corpus"))
                continue
            urls.add(page.url)
            hashes.add(page.content_hash)
            writer.write_page(page)
            own.update()
        stats = writer.finish()
    finally:
        writer.close()
    return {"documents": stats["documents_written"], "sentences": stats["sentences"]}


def _known(corpus: Corpus, fh) -> tuple[set[str], set[int]]:
    """The spooled pages' URLs and text hashes that the corpus already has (checked in chunks of 5,000)."""
    urls: set[str] = set()
    hashes: set[int] = set()
    batch: list[CrawlPage] = []

    def check() -> None:
        docs = Document.objects.filter(corpus=corpus)
        urls.update(docs.filter(url__in=[p.url for p in batch]).values_list("url", flat=True))
        hashes.update(
            docs.filter(content_hash__in=[p.content_hash for p in batch]).values_list("content_hash", flat=True)
        )
        batch.clear()

    for page in _spooled(fh):
        batch.append(page)
        if len(batch) >= 5000:
            check()
    if batch:
        check()
    return urls, hashes
