"""Celery tasks of the mining app: thin wrappers that load rows, call one service, and return a small dict."""

from __future__ import annotations

from celery import shared_task

from .models import Corpus, MiningRun
from .services.corpora import corpus_refresh_stats
from .services.execute import execute_run_service


@shared_task(name="mining.refresh_corpus_stats")
def refresh_corpus_stats(corpus_id: int) -> dict:
    """Recount a corpus's documents, sentences and gold pairs."""
    corpus = Corpus.objects.get(pk=corpus_id)
    stats = corpus_refresh_stats(corpus=corpus)
    return {"corpus_id": corpus_id, "sentences": stats["sentences"]}


@shared_task(name="mining.execute_run", bind=True, acks_late=True)
def execute_run(self, run_id: int) -> dict:
    """Execute one MiningRun of any kind; resumable (finished shards are skipped)."""
    run = MiningRun.objects.get(pk=run_id)
    return execute_run_service(run=run, task_id=self.request.id or "")
