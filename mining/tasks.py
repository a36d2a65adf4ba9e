"""Celery tasks of the mining app: thin wrappers that load rows, call one service, and return a small dict."""

from __future__ import annotations

from celery import shared_task
from django import db

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
    run_id: int,
    fmt: str,
    mode: str = "threshold",
    threshold: float | None = None,
    include_filtered: bool = False,
    header: bool = False,
) -> dict:
    """Write a run's kept bitext to PCAPP_DATA_DIR/exports/ (for sets too large to stream comfortably)."""
    from .services.export import ExportFormat, KeepMode, KeepRule
    from .services.export_files import export_build_file

    run = MiningRun.objects.select_related("encoder").get(pk=run_id)
    rule = KeepRule(mode=KeepMode(mode), threshold=threshold, include_filtered=include_filtered)
    path, n = export_build_file(run=run, rule=rule, fmt=ExportFormat(fmt), header=header)
    return {"run_id": run_id, "file": path.name, "pairs": n}


@shared_task(name="mining.estimate_precision")
def estimate_precision(run_id: int, decoy_corpus_id: int | None = None, seed: int = 0) -> dict:
    """Estimate a succeeded sentence run's precision from decoy hits and store it in its stats."""
    from .services.precision import run_precision_estimate

    run = MiningRun.objects.select_related("src_corpus", "tgt_corpus", "encoder").get(pk=run_id)
    decoys = Corpus.objects.get(pk=decoy_corpus_id) if decoy_corpus_id is not None else None
    record = run_precision_estimate(run=run, decoy_corpus=decoys, seed=seed)
    return {"run_id": run_id, "precision": record["precision"], "reason": record["reason"]}


@shared_task(name="mining.import_corpus", bind=True, acks_late=True, reject_on_worker_lost=True)
def import_corpus_task(self, job_id: int) -> dict:
    """Run one corpus import job (all or nothing)."""
    from .models import ImportJob
    from .services.imports import import_execute

    job = ImportJob.objects.get(pk=job_id)
    job = import_execute(job=job, task_id=self.request.id or "", helpers=max(0, len(job.paths) - 1))
    return {"job_id": job_id, "status": job.status, "corpus_id": job.corpus_id}


@shared_task(name="mining.import_crawl_parts", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def import_crawl_parts_task(job_id: int) -> dict:
    """Help a running crawl import: claim and import its files until none is left (each file is claimed under a
    lease and imported in its own transaction, so a task delivered twice imports nothing twice)."""
    from .services.crawl_imports import parts_work

    return {"job_id": job_id, "parts": parts_work(job_id=job_id)}


def _shard(run_id: int, stage: str, shard_no: int) -> dict:
    from .services.shards import shard_task_body

    return shard_task_body(run_id, stage, shard_no)


# One shard of a sentence run per task. Four names for one body, so each stage's shards can be routed to their own
# queue (settings.CELERY_TASK_ROUTES). acks_late: a task whose worker dies before it finished comes back;
# reject_on_worker_lost: a pool process killed under it sends it back to the queue at once (safe: a shard is
# claimed with a lease and its output replaced atomically, so running it twice writes it once).
# A shard that finds the database away is sent again with a growing, jittered delay (1, 2, 4, 8, then 10 s or less)
# instead of being lost with its message.
_SHARD_OPTIONS = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "ignore_result": True,
    "autoretry_for": (db.OperationalError, db.InterfaceError),
    "retry_backoff": 1,
    "retry_backoff_max": 10,
    "max_retries": 100,
}


@shared_task(name="mining.shard_embed", **_SHARD_OPTIONS)
def shard_embed(run_id: int, stage: str, shard_no: int) -> dict:
    """Encode one side shard of a sentence run (queue `embed`)."""
    return _shard(run_id, stage, shard_no)


@shared_task(name="mining.shard_index", **_SHARD_OPTIONS)
def shard_index(run_id: int, stage: str, shard_no: int) -> dict:
    """Train a run's IVF quantizer or fill one index shard (queue `index`)."""
    return _shard(run_id, stage, shard_no)


@shared_task(name="mining.shard_search", **_SHARD_OPTIONS)
def shard_search(run_id: int, stage: str, shard_no: int) -> dict:
    """Search one query shard against every index shard of the other side (queue `search`)."""
    return _shard(run_id, stage, shard_no)


@shared_task(name="mining.shard_io", **_SHARD_OPTIONS)
def shard_io(run_id: int, stage: str, shard_no: int) -> dict:
    """Plan, score, filter, write (COPY) or finish a sentence run (queue `io`)."""
    return _shard(run_id, stage, shard_no)


@shared_task(name="mining.site_shard", **_SHARD_OPTIONS)
def site_shard(run_id: int, stage: str, shard_no: int) -> dict:
    """Plan, match a batch of sites, or write the candidates of a site-restricted document run (queue `search`)."""
    from .services.document_sites import site_shard_task_body

    return site_shard_task_body(run_id, stage, shard_no)
