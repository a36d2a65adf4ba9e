"""Corpus-level services."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q

from ..models import (
    Corpus,
    Document,
    DocumentPairCandidate,
    GoldDocumentPair,
    GoldSentencePair,
    ImportJob,
    JobStatus,
    MiningRun,
    Sentence,
    SentencePairCandidate,
)
from .runs import run_candidates_delete

ACTIVE = (JobStatus.PENDING, JobStatus.RUNNING)


@transaction.atomic
def corpus_refresh_stats(*, corpus: Corpus) -> dict:
    """Recount a corpus's documents, sentences and gold pairs per language and store them in `corpus.stats`."""
    per_lang = {
        row["lang"]: {"documents": row["n"]}
        for row in Document.objects.filter(corpus=corpus).values("lang").annotate(n=Count("id"))
    }
    for row in Sentence.objects.filter(corpus=corpus).values("lang").annotate(n=Count("id")):
        per_lang.setdefault(row["lang"], {"documents": 0})["sentences"] = row["n"]
    stats = {
        **corpus.stats,
        "documents": sum(v.get("documents", 0) for v in per_lang.values()),
        "sentences": sum(v.get("sentences", 0) for v in per_lang.values()),
        "gold_sentence_pairs": GoldSentencePair.objects.filter(corpus=corpus).count(),
        "gold_document_pairs": GoldDocumentPair.objects.filter(corpus=corpus).count(),
        "per_language": per_lang,
    }
    Corpus.objects.filter(pk=corpus.pk).update(stats=stats, languages=sorted(per_lang))
    corpus.stats, corpus.languages = stats, sorted(per_lang)
    return stats


@dataclass(frozen=True)
class CorpusDeletion:
    """What deleting a corpus removes: its runs (every kind that reads it) with their candidates and the labels and
    campaign items on those candidates, its documents, sentences and gold pairs; imports are kept, unlinked."""

    runs: int
    sentence_candidates: int
    document_candidates: int
    sentences: int
    documents: int
    gold_sentence_pairs: int
    blocking: tuple[str, ...]


def corpus_deletion_preview(*, corpus: Corpus) -> CorpusDeletion:
    """The counts a deletion would remove, and the pending or running jobs that forbid it now."""
    runs = MiningRun.objects.filter(Q(src_corpus=corpus) | Q(tgt_corpus=corpus))
    active = [f"run {r.pk} ({r.get_status_display().lower()})" for r in runs.filter(status__in=ACTIVE)[:10]]
    active += [
        f"import {j.pk} ({j.get_status_display().lower()})"
        for j in ImportJob.objects.filter(corpus=corpus, status__in=ACTIVE)[:10]
    ]
    return CorpusDeletion(
        runs=runs.count(),
        sentence_candidates=SentencePairCandidate.objects.filter(run__in=runs).count(),
        document_candidates=DocumentPairCandidate.objects.filter(run__in=runs).count(),
        sentences=int(corpus.stats.get("sentences", 0)),
        documents=int(corpus.stats.get("documents", 0)),
        gold_sentence_pairs=int(corpus.stats.get("gold_sentence_pairs", 0)),
        blocking=tuple(active),
    )


def corpus_delete(*, corpus: Corpus) -> CorpusDeletion:
    """Delete a corpus with everything built on it (see CorpusDeletion) and its embedding cache on disk.

    Raises ValueError naming the jobs when a run or import of the corpus is still pending or running.
    """
    preview = corpus_deletion_preview(corpus=corpus)
    if preview.blocking:
        raise ValueError(
            f"corpus '{corpus.name}' is in use by {', '.join(preview.blocking)}: cancel or wait for them first"
        )
    pk = corpus.pk
    with transaction.atomic():
        # Candidates first, in bulk (see run_candidates_delete): the collector would load every candidate row.
        runs = MiningRun.objects.select_for_update().filter(Q(src_corpus=corpus) | Q(tgt_corpus=corpus))
        run_ids = list(runs.values_list("pk", flat=True))
        run_candidates_delete(run_ids=run_ids)
        runs.delete()
        corpus.delete()
    shutil.rmtree(Path(settings.PCAPP_DATA_DIR) / "embeddings" / f"corpus-{pk}", ignore_errors=True)
    for run_id in run_ids:
        shutil.rmtree(Path(settings.PCAPP_DATA_DIR) / "runs" / f"run-{run_id}", ignore_errors=True)
    return preview
