"""Celery tasks of the mining app: thin wrappers that load rows, call one service, and return a small dict."""

from __future__ import annotations

from celery import shared_task

from .models import Corpus, MiningRun
from .services.corpora import corpus_refresh_stats


@shared_task(name="mining.refresh_corpus_stats")
def refresh_corpus_stats(corpus_id: int) -> dict:
    """Recount a corpus's documents, sentences and gold pairs."""
    corpus = Corpus.objects.get(pk=corpus_id)
    stats = corpus_refresh_stats(corpus=corpus)
    return {"corpus_id": corpus_id, "sentences": stats["sentences"]}


@shared_task(name="mining.export_run")
def export_run(
    run_id: int, fmt: str, mode: str = "threshold", threshold: float | None = None, include_filtered: bool = False
) -> dict:
    """Write a run's kept bitext to PCAPP_DATA_DIR/exports/ (for sets too large to stream comfortably)."""
    from .services.export import ExportFormat, KeepMode, KeepRule, export_build_file

    run = MiningRun.objects.select_related("encoder").get(pk=run_id)
    rule = KeepRule(mode=KeepMode(mode), threshold=threshold, include_filtered=include_filtered)
    path, n = export_build_file(run=run, rule=rule, fmt=ExportFormat(fmt))
    return {"run_id": run_id, "file": path.name, "pairs": n}


@shared_task(name="mining.import_corpus")
def import_corpus_task(job_id: int) -> dict:
    """Run one corpus import job (all or nothing)."""
    from .models import ImportJob
    from .services.imports import import_execute

    job = import_execute(job=ImportJob.objects.get(pk=job_id))
    return {"job_id": job_id, "status": job.status, "corpus_id": job.corpus_id}
