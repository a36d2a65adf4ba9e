"""Run lifecycle: create and enqueue, start, progress, finish, fail, cancel, retry.

Each state change of a MiningRun goes through one function here; views, tasks and commands call these.
"""

from __future__ import annotations

import logging
import traceback
from typing import Any

from django.db import transaction
from django.utils import timezone

from pcapp.celery import app as celery_app

from ..models import Artefact, Corpus, JobStatus, MiningRun, RunKind, RunShard

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
    """Send the execute task of a run to the broker (now)."""
    celery_app.send_task(EXECUTE_RUN_TASK, args=[run_id])


def run_enqueue(*, run: MiningRun) -> None:
    """Send the run to a worker after the current transaction commits."""
    run_id = run.pk
    transaction.on_commit(lambda: send_run_task(run_id))


def check_can_cancel(run: MiningRun) -> None:
    """A finished run cannot be cancelled."""
    if run.is_finished:
        raise ValueError(f"run {run.pk} has already finished ({run.status})")


@transaction.atomic
def run_cancel(*, run: MiningRun) -> MiningRun:
    """Ask a run to stop: a pending run is cancelled at once, a running one stops at its next progress report."""
    check_can_cancel(run)
    updates: dict[str, Any] = {"cancel_requested": True}
    if run.status == JobStatus.PENDING:
        updates.update(status=JobStatus.CANCELLED, finished_at=timezone.now())
    MiningRun.objects.filter(pk=run.pk).update(**updates)
    run.refresh_from_db()
    return run


@transaction.atomic
def run_retry(*, run: MiningRun) -> MiningRun:
    """Re-run a failed or cancelled run; finished shards are kept, so it resumes where it stopped."""
    if run.status not in (JobStatus.FAILED, JobStatus.CANCELLED):
        raise ValueError(f"only failed or cancelled runs can be re-run (run {run.pk} is {run.status})")
    MiningRun.objects.filter(pk=run.pk).update(
        status=JobStatus.PENDING, error="", cancel_requested=False, finished_at=None
    )
    run.refresh_from_db()
    run_enqueue(run=run)
    return run


def run_mark_started(*, run: MiningRun, task_id: str = "") -> bool:
    """Move a pending (or re-queued) run to running; False if it was cancelled or already finished meanwhile."""
    n = MiningRun.objects.filter(pk=run.pk, status__in=[JobStatus.PENDING, JobStatus.RUNNING]).update(
        status=JobStatus.RUNNING, started_at=timezone.now(), celery_task_id=task_id, error=""
    )
    run.refresh_from_db()
    return bool(n)


def run_mark_finished(*, run: MiningRun, stats: dict | None = None) -> None:
    """Record success and the run's summary figures."""
    MiningRun.objects.filter(pk=run.pk).update(
        status=JobStatus.SUCCEEDED, finished_at=timezone.now(), stage="done", stats={**run.stats, **(stats or {})}
    )


def run_mark_failed(*, run: MiningRun, error: BaseException | str, cancelled: bool = False) -> None:
    """Record a failure (with the error text shown on the run page) or a cancellation."""
    if isinstance(error, BaseException):
        text = f"{type(error).__name__}: {error}"
        logger.error("run %s failed: %s", run.pk, "".join(traceback.format_exception(error)))
    else:
        text = error
    MiningRun.objects.filter(pk=run.pk).update(
        status=JobStatus.CANCELLED if cancelled else JobStatus.FAILED, finished_at=timezone.now(), error=text
    )


def run_record_timing(*, run: MiningRun, stage: str, seconds: float) -> None:
    """Add one stage's wall time to the run's timings (seconds)."""
    run.timings = {**run.timings, stage: round(seconds, 3)}
    MiningRun.objects.filter(pk=run.pk).update(timings=run.timings)


def shard_done(*, run: MiningRun, stage: str, shard_no: int) -> bool:
    """True if this shard of this stage already finished (a re-run skips it)."""
    return RunShard.objects.filter(run=run, stage=stage, shard_no=shard_no).exists()


def shard_mark_done(*, run: MiningRun, stage: str, shard_no: int, result: dict | None = None) -> None:
    """Record a finished shard (idempotent)."""
    RunShard.objects.update_or_create(run=run, stage=stage, shard_no=shard_no, defaults={"result": result or {}})
