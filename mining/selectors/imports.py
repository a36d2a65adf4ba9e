"""What the import pages read of a crawl import: its files' parts and its skips with their examples."""

from __future__ import annotations

from pathlib import Path

from ..models import ImportJob, ImportPart


def crawl_import_view(*, job: ImportJob) -> dict:
    """{'crawl': True, 'parts': each file's part (named as uploaded), 'skipped': (reason, count, examples) by count}
    for a crawl import; {} for any other."""
    if job.format not in (ImportJob.Format.WARC, ImportJob.Format.HTML):
        return {}
    names = (job.options or {}).get("upload_names") or {}
    parts = list(ImportPart.objects.filter(job=job).order_by("part_no"))
    for part in parts:
        part.name = names.get(part.path) or Path(part.path).name
    stats = job.stats or {}
    examples = stats.get("examples") or {}
    skipped = sorted(
        ((reason, n, examples.get(reason, [])) for reason, n in (stats.get("skipped") or {}).items()),
        key=lambda r: (-r[1], r[0]),
    )
    return {"crawl": True, "parts": parts, "skipped": skipped}
