"""Corpus-level services."""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import Count, Max, Q
from django.db.models.expressions import RawSQL

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

logger = logging.getLogger(__name__)

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


DELETE_BATCH = 20_000
"""Rows per statement of a corpus's deletion: each batch is its own short transaction, so other runs' workers never
wait more than one batch on a lock the deletion holds."""


class _Clock:
    """Logs the seconds of each step of a long deletion."""

    def __init__(self, what: str) -> None:
        self.what, self.t = what, time.perf_counter()

    def lap(self, step: str) -> None:
        now = time.perf_counter()
        logger.info("deleting %s: %s in %.2f s", self.what, step, now - self.t)
        self.t = now


def _keyset_delete(table: str, where: str, params: list, *, batch: int, first: tuple[str, ...] = ()) -> int:
    """Delete the rows of `table` that `where` selects, `batch` at a time in id order, each batch in a transaction of
    its own; returns the rows deleted. Each batch starts after the last id of the one before, so it never walks over
    the rows already deleted (which stay in the indexes until vacuum: a LIMIT from the start would be quadratic).
    `first`: statements run in the batch's transaction before its DELETE, given the batch's ids as `%s` (an array,
    so that Postgres probes an index for each id rather than joining whole tables)."""
    total, last = 0, 0
    while True:
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute(
                f"SELECT id FROM {table} WHERE {where} AND id > %s ORDER BY id LIMIT %s", [*params, last, batch]
            )
            ids = [row[0] for row in cur.fetchall()]
            if not ids:
                return total
            for sql in first:
                cur.execute(sql, [ids])
            cur.execute(f"DELETE FROM {table} WHERE id = ANY(%s)", [ids])
        total += len(ids)
        last = ids[-1]


def _candidates_delete(model: type[models.Model], run_id: int, *, batch: int) -> int:
    """A run's candidates, `batch` ranks at a time (on the (run, rank) index), each batch its own transaction."""
    table = model._meta.db_table
    top = model.objects.filter(run_id=run_id).aggregate(m=Max("rank"))["m"] or 0
    total = 0
    for start in range(0, top + 1, batch):
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute(
                f"DELETE FROM {table} WHERE run_id = %s AND rank > %s AND rank <= %s",
                [run_id, start - 1, start + batch],
            )
            total += cur.rowcount
    with transaction.atomic(), connection.cursor() as cur:  # rows without a rank in range (none, normally)
        cur.execute(f"DELETE FROM {table} WHERE run_id = %s", [run_id])
        return total + cur.rowcount


def _referrers_delete(model: type[models.Model], ids_sql: str, params: list, skip: tuple) -> None:
    """Through the ORM (which handles what refers to them in turn), delete or unlink the rows of every other model
    that point at the `model` rows `ids_sql` selects (campaign items on a sentence, ...): few, and of any app."""
    for rel in model._meta.related_objects:
        if rel.related_model in skip:
            continue
        rows = rel.related_model.objects.filter(**{f"{rel.field.name}__in": RawSQL(ids_sql, params)})
        if rel.on_delete is models.CASCADE:
            rows.delete()
        elif rel.on_delete is models.SET_NULL:
            rows.update(**{rel.field.name: None})


def _runs_delete(run_ids: list[int], *, batch: int) -> None:
    """The runs' candidates in batches (labels and campaign items on them first), then the run rows themselves."""
    for run_id in run_ids:
        with transaction.atomic():
            run_candidates_delete(run_ids=[run_id], referred_only=True)
        for model in (SentencePairCandidate, DocumentPairCandidate):  # alignment candidates before document pairs
            _candidates_delete(model, run_id, batch=batch)
        with transaction.atomic():
            MiningRun.objects.filter(pk=run_id).delete()  # shard rows, exports and the like go with it


def corpus_delete(*, corpus: Corpus, batch: int = DELETE_BATCH) -> CorpusDeletion:
    """Delete a corpus with everything built on it (see CorpusDeletion) and its embedding cache on disk.

    In order and in batches, each its own short transaction, so the time is in proportion to the corpus's own rows
    and other runs' workers are never held up for long: the corpus is marked `deleting` first (no run or import may
    start on it), then its runs' candidates and runs, gold pairs, the rows of other tables that point at its
    sentences and documents, its sentences, its documents, and the corpus row. When the deletion stops half-way
    (a crash, the database restarting), the corpus stays marked and deleting it again finishes the work.

    Raises ValueError naming the jobs when a run or import of the corpus is still pending or running.
    """
    with transaction.atomic():
        locked = Corpus.objects.select_for_update().get(pk=corpus.pk)
        preview = corpus_deletion_preview(corpus=locked)
        if preview.blocking:
            raise ValueError(
                f"corpus '{corpus.name}' is in use by {', '.join(preview.blocking)}: cancel or wait for them first"
            )
        Corpus.objects.filter(pk=corpus.pk).update(deleting=True)
    pk = corpus.pk
    clock = _Clock(f"corpus {pk}")
    run_ids = list(
        MiningRun.objects.filter(Q(src_corpus_id=pk) | Q(tgt_corpus_id=pk)).order_by("pk").values_list("pk", flat=True)
    )
    _runs_delete(run_ids, batch=batch)
    clock.lap("runs and their candidates")
    gold_s, gold_d = GoldSentencePair._meta.db_table, GoldDocumentPair._meta.db_table
    sentences, documents = Sentence._meta.db_table, Document._meta.db_table
    for table in (gold_s, gold_d):
        _keyset_delete(table, "corpus_id = %s", [pk], batch=batch)
    clock.lap("gold pairs")
    own = (Sentence, Document, SentencePairCandidate, DocumentPairCandidate, GoldSentencePair, GoldDocumentPair)
    _referrers_delete(Sentence, f"SELECT id FROM {sentences} WHERE corpus_id = %s", [pk], own)
    _referrers_delete(Document, f"SELECT id FROM {documents} WHERE corpus_id = %s", [pk], own)
    clock.lap("rows of other tables")
    # No candidate points at these sentences or documents now (a run reads only its own corpora, and the corpus's
    # runs went first); each deleted row's foreign-key checks are index probes (sent_cand_src and the like).
    for table, rows in ((sentences, Sentence), (documents, Document)):
        for lang in sorted(set(rows.objects.filter(corpus_id=pk).values_list("lang", flat=True))):
            # (corpus, lang, id): the index each batch starts from
            _keyset_delete(table, "corpus_id = %s AND lang = %s", [pk, lang], batch=batch)
        if rows.objects.filter(corpus_id=pk).exists():  # a language added meanwhile (no import may start now)
            _keyset_delete(table, "corpus_id = %s", [pk], batch=batch)
        clock.lap(table)
    with transaction.atomic():
        Corpus.objects.filter(pk=pk).delete()  # imports are kept, unlinked
    shutil.rmtree(Path(settings.PCAPP_DATA_DIR) / "embeddings" / f"corpus-{pk}", ignore_errors=True)
    for run_id in run_ids:
        shutil.rmtree(Path(settings.PCAPP_DATA_DIR) / "runs" / f"run-{run_id}", ignore_errors=True)
    return preview
