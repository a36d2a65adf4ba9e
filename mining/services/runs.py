"""Run lifecycle: create and enqueue, start, progress, finish, fail, cancel, retry.

Each state change of a MiningRun goes through one function here; views, tasks and commands call these.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from ..models import Artefact, Corpus, JobStatus, MiningRun, RunKind, SentencePairCandidate
from .jobs import BrokerUnavailable as BrokerUnavailable  # the API and pages catch it from here
from .jobs import (
    JobStateError,
    job_cancel,
    job_mark_failed,
    job_mark_finished,
    job_mark_started,
    job_record_timing,
    job_reset_for_retry,
    send_task_or_fail,
)

logger = logging.getLogger(__name__)

# The Celery task that executes a run, sent by name: its kind -> handler map is in pcapp.jobs, above every app whose
# handlers it calls (mining never imports it).
EXECUTE_RUN_TASK = "pcapp.execute_run"


def check_run_start(
    *,
    kind: str,
    src_corpus: Corpus | None,
    tgt_corpus: Corpus | None,
    src_lang: str,
    tgt_lang: str,
    parent: MiningRun | None,
) -> dict[str, str]:
    """The rules of what a run may be started on, as {field: message} (empty when it may start)."""
    errors: dict[str, str] = {}
    tgt_corpus = tgt_corpus or src_corpus
    if src_corpus is not None and src_lang and src_lang not in (src_corpus.languages or []):
        errors["src_lang"] = f"Corpus {src_corpus} has no '{src_lang}' text."
    if tgt_corpus is not None and tgt_lang and tgt_lang not in (tgt_corpus.languages or []):
        errors["tgt_lang"] = f"Corpus {tgt_corpus} has no '{tgt_lang}' text."
    if src_corpus == tgt_corpus and src_lang and src_lang == tgt_lang:
        errors["tgt_lang"] = "Pick two different languages when mining a corpus against itself."
    if kind == RunKind.ALIGN and parent is None:
        errors["parent"] = "An alignment run needs a finished document run."
    return errors


@transaction.atomic
def run_create(
    *,
    kind: str,
    user: Any = None,
    src_corpus: Corpus | None = None,
    tgt_corpus: Corpus | None = None,
    src_lang: str = "",
    tgt_lang: str = "",
    encoder: Artefact | None = None,
    parent: MiningRun | None = None,
    params: dict | None = None,
    name: str = "",
    enqueue: bool = True,
) -> MiningRun:
    """Create a run and enqueue it once the transaction commits."""
    if kind not in RunKind.values:
        raise ValueError(f"unknown run kind {kind!r}")
    run = MiningRun.objects.create(
        kind=kind,
        name=name,
        created_by=user if user and user.is_authenticated else None,
        src_corpus=src_corpus,
        tgt_corpus=tgt_corpus or src_corpus,
        src_lang=src_lang,
        tgt_lang=tgt_lang,
        encoder=encoder,
        parent=parent,
        params=params or {},
    )
    if enqueue:
        run_enqueue(run=run)
    return run


def send_run_task(run_id: int) -> None:
    """Send the execute task of a run to the broker (now); BrokerUnavailable marks the run failed."""
    send_task_or_fail(name=EXECUTE_RUN_TASK, job=MiningRun(pk=run_id), args=[run_id])


def run_enqueue(*, run: MiningRun) -> None:
    """Send the run to a worker after the current transaction commits (BrokerUnavailable from the commit when the
    broker is down: the run is then failed, not pending)."""
    run_id = run.pk
    transaction.on_commit(lambda: send_run_task(run_id))


@transaction.atomic
def run_cancel(*, run: MiningRun) -> MiningRun:
    """Stop a run: a pending run is cancelled at once; so is a running sentence run on the workers (its shard tasks
    stop at their next check, and no further shard starts); a run executing in one process stops at its next
    progress report."""
    run = job_cancel(job=run)
    if run.stats.get("distributed"):
        MiningRun.objects.filter(pk=run.pk, status=JobStatus.RUNNING).update(
            status=JobStatus.CANCELLED, error="cancelled by user", finished_at=timezone.now(), lease_expires_at=None
        )
        run.refresh_from_db()
    return run


def run_delete(*, run: MiningRun) -> dict[str, int]:
    """Delete a run with its candidates and shard files, fast also for millions of candidates.

    Candidates that reviews or campaigns refer to go through the ORM (which deletes what refers to them); the rest
    go in one raw DELETE on the run's index, without loading them into Python. Returns the row counts.
    """
    run.refresh_from_db()
    if not run.is_finished and not run.is_stalled and run.status != JobStatus.PENDING:
        raise JobStateError(f"run {run.pk} is {run.status}: cancel it before deleting it")
    table = SentencePairCandidate._meta.db_table
    counts = {"candidates": 0}
    with transaction.atomic():
        MiningRun.objects.select_for_update().filter(pk=run.pk).first()
        referenced = SentencePairCandidate.objects.none()
        for rel in SentencePairCandidate._meta.related_objects:  # FKs of other apps onto candidates (reviews, items)
            referenced = referenced | SentencePairCandidate.objects.filter(
                run=run,
                pk__in=rel.related_model.objects.filter(**{f"{rel.field.name}__run": run}).values(rel.field.name),
            )
        n_ref, _ = referenced.delete()
        counts["candidates"] += n_ref
        with (
            connection.cursor() as cur
        ):  # one statement on the run's index (batches inside one transaction only add work)
            cur.execute(f"DELETE FROM {table} WHERE run_id = %s", [run.pk])
            counts["candidates"] += cur.rowcount
        _, by_model = MiningRun.objects.filter(pk=run.pk).delete()
        counts.update({label.split(".")[-1].lower(): n for label, n in by_model.items()})
    shutil.rmtree(Path(settings.PCAPP_DATA_DIR) / "runs" / f"run-{run.pk}", ignore_errors=True)
    return counts


@transaction.atomic
def run_retry(*, run: MiningRun) -> MiningRun:
    """Re-run a failed, cancelled or stalled run and enqueue it."""
    job_reset_for_retry(job=run)
    run_enqueue(run=run)
    return run


def run_mark_started(*, run: MiningRun, task_id: str = "") -> bool:
    """Take a pending (or stalled) run for this worker; False if it was cancelled, finished, or is held already."""
    return job_mark_started(job=run, task_id=task_id)


def run_mark_finished(*, run: MiningRun, stats: dict | None = None) -> None:
    """Record success and the run's summary figures."""
    job_mark_finished(job=run, stats=stats)


def run_mark_failed(*, run: MiningRun, error: BaseException | str, cancelled: bool = False) -> None:
    """Record a failure (with the error text shown on the run page) or a cancellation."""
    job_mark_failed(job=run, error=error, cancelled=cancelled)


def run_record_timing(*, run: MiningRun, stage: str, seconds: float) -> None:
    """Add one stage's wall time to the run's timings (seconds)."""
    job_record_timing(job=run, stage=stage, seconds=seconds)
