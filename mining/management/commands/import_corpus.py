"""`manage.py import_corpus NAME FORMAT PATH...`: import a corpus (inline, or on a worker with --async)."""

from django.core.management.base import BaseCommand, CommandError

from mining.ingest.errors import ImportFailure
from mining.models import ImportJob, JobStatus
from mining.services.imports import import_execute, import_job_create, import_job_enqueue


class Command(BaseCommand):
    help = (
        "Import a corpus: tsv FILE... | moses SRC_FILE TGT_FILE | tmx FILE... | po FILE... | jsonl FILE... | "
        "folder DIR | warc FILE... (WARC, WARC.gz, WET) | html DIR (saved pages). Aligned formats need --src/--tgt "
        "(po: --src defaults to en, --tgt to the file's Language)."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="corpus name")
        parser.add_argument("format", choices=ImportJob.Format.values)
        parser.add_argument("paths", nargs="+")
        parser.add_argument("--src", dest="src_lang", help="source language (aligned formats)")
        parser.add_argument("--tgt", dest="tgt_lang", help="target language (aligned formats)")
        parser.add_argument("--header", action="store_true", default=None, help="TSV: the first line is a header")
        parser.add_argument("--into", action="store_true", help="add to an existing corpus of that name")
        parser.add_argument("--description", default="")
        parser.add_argument(
            "--extractor",
            choices=["resiliparse", "trafilatura"],
            help="warc/html: main-text extractor (default resiliparse: ~20x faster, see docs/IMPORT.md)",
        )
        parser.add_argument("--async", dest="run_async", action="store_true", help="run on a Celery worker")

    def handle(self, *args, name, format, paths, run_async, **o):
        keys = ("src_lang", "tgt_lang", "header", "description", "extractor")
        options = {k: o[k] for k in keys if o[k] not in (None, "")}
        options["into"] = o["into"]
        try:
            job = import_job_create(corpus_name=name, fmt=format, paths=paths, options=options)
        except ImportFailure as exc:
            raise CommandError(str(exc)) from exc
        if run_async:
            import_job_enqueue(job=job)
            self.stdout.write(f"Import job {job.pk} enqueued.")
            return
        job = import_execute(job=job)
        if job.status != JobStatus.SUCCEEDED:
            raise CommandError(job.error)
        s = job.stats
        if format in ("warc", "html"):
            self.stdout.write(self.style.SUCCESS(crawl_summary(name, s)))
            return
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported corpus '{name}': {s['documents']} documents, {s['sentences']} sentences, "
                f"{s['gold_sentence_pairs']} gold sentence pairs, {s['gold_document_pairs']} gold document pairs; "
                f"skipped {s['skipped_empty_documents']} empty documents and {s['skipped_empty_pairs']} empty pairs."
                + (
                    f" Cut {s['long_sentences_split']} sentences over {s['max_sentence_chars']} characters at sentence"
                    " or clause boundaries."
                    if s.get("long_sentences_split")
                    else ""
                )
            )
        )


def crawl_summary(name: str, s: dict) -> str:
    """One paragraph on a crawl import: pages stored, records read, pages skipped by reason, files that failed."""
    skipped = ", ".join(f"{n} {reason}" for reason, n in sorted(s.get("skipped", {}).items(), key=lambda x: -x[1]))
    failed = "".join(f"\n  failed: {f['file']}: {f['error']}" for f in s.get("failed_files", []))
    return (
        f"Imported crawl into '{name}': {s.get('documents', 0)} pages ({s.get('sentences', 0)} sentences) from "
        f"{s.get('records', 0)} records in {s.get('files', 0)} file(s); skipped: {skipped or 'none'}.{failed}"
    )
