"""Celery tasks of the mining app: thin wrappers that load rows, call one service, and return a small dict."""

from __future__ import annotations

from celery import shared_task

from .models import Corpus
from .services.corpora import corpus_refresh_stats


@shared_task(name="mining.refresh_corpus_stats")
def refresh_corpus_stats(corpus_id: int) -> dict:
    """Recount a corpus's documents, sentences and gold pairs."""
    corpus = Corpus.objects.get(pk=corpus_id)
    stats = corpus_refresh_stats(corpus=corpus)
    return {"corpus_id": corpus_id, "sentences": stats["sentences"]}
