"""Executing a shard, and running the stages: dispatched as Celery groups joined by the shard that completes a stage
(`sharded_run_start`, `shard_task_body`), kept alive by a keeper thread in every worker (`sharded_runs_keep`), or
one after the other in this process (`run_inline`)."""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from django.db import InterfaceError, OperationalError
from django.db.models import Max
from django.utils import timezone

from pcapp.celery import app as celery_app

from ...models import JobStatus, MiningRun, RunKind, RunShard
from ..jobs import job_mark_failed, job_mark_finished, keeper_seconds, lease_seconds, queue_length
from ..params import SentenceRunParams
from ..precision import precision_after_run
from ..progress import JobCancelled, ProgressReporter
from .context import Ctx
from .plan import STAGES, run_dir, run_files_delete
from .pqstages import held_groups, search_target
from .rows import (
    current_stage,
    done_count,
    plan_of,
    record_stage_timing,
    report_progress,
    run_progress,
    run_rows,
    shard_claim,
    shard_done,
    shard_release,
    stage_counts,
    todo_shards,
)
from .stages import STAGE_FN

logger = logging.getLogger(__name__)

# Which queue (pcapp/queues.py) takes each stage's shards, and the task name routed to it (settings.CELERY_TASK_ROUTES).
STAGE_QUEUE = {
    "plan": "io",
    "embed": "embed",
    "train": "index",
    "index": "index",
    "search": "search",
    "score": "io",
    "filter": "io",
    "write": "io",
    "finish": "io",
}
SHARD_TASK = {queue: f"mining.shard_{queue}" for queue in ("embed", "index", "search", "io")}


def shard_execute(run_id: int, stage: str, shard_no: int, *, reporter: ProgressReporter | None = None) -> str:
    """Do one shard of a run, unless it is done or held by a live worker; returns what happened.

    With `reporter` (the in-process path: this process holds the whole run) the shard is taken from any holder and
    an error propagates; without it (a Celery shard task) the shard holds its own lease, an error fails the run.
    """
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}")
    run = MiningRun.objects.select_related("encoder", "src_corpus", "tgt_corpus").filter(pk=run_id).first()
    if run is None:  # deleted (a message sent before the deletion): nothing to do, nothing to write
        return "gone"
    if run.status != JobStatus.RUNNING:
        return "skipped"
    try:
        return _shard_execute(run, stage, shard_no, reporter=reporter)
    finally:
        if reporter is None and not MiningRun.objects.filter(pk=run_id).exists():
            # deleted while this shard worked: what it wrote after the deletion removed the folder goes too
            run_files_delete(run_id)


def _shard_execute(run: MiningRun, stage: str, shard_no: int, *, reporter: ProgressReporter | None) -> str:
    run_id = run.pk
    state, shard_id = shard_claim(run_id, stage, shard_no, force=reporter is not None)
    if state != "claimed":
        return state
    t0 = time.perf_counter()
    rows = run_rows(run_id)
    own = None
    try:
        if reporter is None:
            own = ProgressReporter(MiningRun, run_id, lease_seconds=lease_seconds(), shard=(RunShard, shard_id))
        rep = reporter or own
        assert rep is not None
        ctx = Ctx(
            run=run,
            params=SentenceRunParams.from_dict(run.params),
            plan=plan_of(rows),
            folder=run_dir(run_id),
            check=lambda: rep.update(),
        )
        result = STAGE_FN[stage](ctx, shard_no, shard_id)
        result["seconds"] = round(time.perf_counter() - t0, 3)
        if stage != "write":  # a write shard is marked done in its COPY's transaction
            shard_done(shard_id, result)
    except JobCancelled:
        shard_release(shard_id)
        if reporter is not None:
            raise
        job_mark_failed(job=run, error="cancelled by user", cancelled=True)
        return "cancelled"
    except (OperationalError, InterfaceError):
        # the database went away: the task is sent again (mining.tasks) and the run goes on when it is back
        with contextlib.suppress(OperationalError, InterfaceError):
            shard_release(shard_id)
        raise
    except Exception as exc:
        shard_release(shard_id)
        if reporter is not None:
            raise
        job_mark_failed(job=run, error=f"{stage} shard {shard_no}: {type(exc).__name__}: {exc}")
        logger.exception("run %s: %s shard %s failed", run_id, stage, shard_no)
        return "failed"
    finally:
        if own is not None:
            own.close()
    rows = run_rows(run_id)
    report_progress(run_id, rows)
    return "done"


def _after_shard(run_id: int, stage: str) -> None:
    """A shard task finished: if its stage is complete, move the run on (one winner) and dispatch the next stage."""
    rows = run_rows(run_id)
    nxt = current_stage(rows)
    if nxt == stage or nxt is None:
        return
    if MiningRun.objects.filter(pk=run_id, status=JobStatus.RUNNING, stage=stage).update(stage=nxt):
        record_stage_timing(run_id, rows, stage)
        _dispatch_stage(run_id, rows, nxt)


def shard_task_body(run_id: int, stage: str, shard_no: int) -> dict:
    """What the Celery shard task does: the shard, then the stage's join."""
    outcome = shard_execute(run_id, stage, shard_no)
    if outcome in ("done",):
        try:
            _after_shard(run_id, stage)
        except Exception:  # the broker went away: the keeper re-dispatches the stage later
            logger.exception("run %s: could not dispatch after %s shard %s", run_id, stage, shard_no)
    return {"run_id": run_id, "stage": stage, "shard": shard_no, "outcome": outcome}


def _dispatch_stage(run_id: int, rows: dict[tuple[str, int], dict], stage: str) -> list[int]:
    """Send the unfinished, unheld shards of `stage` as one Celery group to the stage's queue (a compressed run's
    search shards: to their group's queue where a live worker holds that group, see `group_queues`)."""
    from celery import group

    todo = todo_shards(rows, stage)
    report_progress(run_id, rows, stage)
    if todo:
        task = SHARD_TASK[STAGE_QUEUE[stage]]
        plan = plan_of(rows)
        held = group_queues() if stage == "search" and plan is not None and plan.pq else {}
        options: dict[int, dict] = {}
        if held:
            assert plan is not None
            for n in todo:
                queue = held.get(search_target(plan, n)[2])
                if queue:
                    options[n] = {"queue": queue}
        group(celery_app.signature(task, args=(run_id, stage, n), **options.get(n, {})) for n in todo).apply_async()
        logger.info("run %s: dispatched %s shards %s (%d to their holders)", run_id, stage, todo, len(options))
    return todo


def _finish_from_rows(run_id: int, rows: dict[tuple[str, int], dict]) -> bool:
    """Mark a running run whose shards are all done succeeded, with the stats its finish shard recorded (the finish
    shard's own mark failed when a cancel, or a retry's new attempt, came between)."""
    run = MiningRun.objects.filter(pk=run_id, status=JobStatus.RUNNING).first()
    finish = rows.get(("finish", 0))
    if run is None or finish is None or finish["finished_at"] is None:
        return False
    if not job_mark_finished(job=run, stats=dict(finish["result"].get("stats", {}))):
        return False
    precision_after_run(run)
    return True


def group_queues() -> dict[int, str]:
    """{group: its queue} for the index groups a live worker holds (``./run worker --holds``; announced in the
    broker's Redis by each worker's keeper); empty when none does or the broker cannot say: then `search`."""
    try:
        return held_groups()
    except Exception:
        logger.exception("could not read which index groups the workers hold")
        return {}


def run_kick(run_id: int) -> tuple[str | None, list[int]]:
    """Re-plan a distributed run from its rows: set its current stage and dispatch that stage's missing shards.

    Safe to call any time (start, retry, a keeper that saw the run stop moving): shards already done or held are
    not sent again, and a shard sent twice runs once."""
    rows = run_rows(run_id)
    stage = current_stage(rows)
    if stage is None:  # every shard is done, the finish shard's too: the run succeeded (a retry or cancel raced it)
        _finish_from_rows(run_id, rows)
        return None, []
    MiningRun.objects.filter(pk=run_id, status=JobStatus.RUNNING).update(stage=stage)
    return stage, _dispatch_stage(run_id, rows, stage)


def sharded_run_start(*, run: MiningRun, task_id: str = "") -> dict:
    """Take a pending (or stalled) run for the workers and dispatch its first unfinished stage."""
    from ..runs import run_mark_started

    if not run_mark_started(run=run, task_id=task_id):
        return {"run_id": run.pk, "status": run.status}
    MiningRun.objects.filter(pk=run.pk).update(
        stats={**run.stats, "distributed": True}, lease_owner="workers", progress=0.0
    )
    try:
        stage, sent = run_kick(run.pk)
    except Exception as exc:
        job_mark_failed(job=run, error=exc)
        return {"run_id": run.pk, "status": "failed", "error": str(exc)}
    return {"run_id": run.pk, "status": "running", "stage": stage, "dispatched": len(sent)}


def _distributed_running() -> Any:
    return MiningRun.objects.filter(status=JobStatus.RUNNING, kind=RunKind.SENTENCE, stats__distributed=True)


_last_kick: dict[int, float] = {}
_lost_since: dict[tuple[int, str], float] = {}


def _queue_empty(stage: str) -> bool:
    """True when the broker says no message waits in `stage`'s queue (False when it cannot be asked)."""
    from django.conf import settings

    return queue_length(settings.PCAPP_STAGE_QUEUES[STAGE_QUEUE[stage]]) == 0


def _lost(run_id: int, stage: str, todo: list[int], grace: float) -> bool:
    """True once the stage's unheld, unfinished shards have had no message waiting in its queue for `grace`
    seconds: their messages were lost (a broker restarted without persistence, or workers that took them while
    the database was away and failed them); they are sent again."""
    key = (run_id, stage)
    if not todo or not _queue_empty(stage):
        _lost_since.pop(key, None)
        return False
    first = _lost_since.setdefault(key, time.monotonic())
    if time.monotonic() - first < grace:
        return False
    _lost_since.pop(key, None)
    return True


def sharded_runs_keep(*, grace: float | None = None) -> dict[str, list]:
    """One round of the keeper every worker runs (every few seconds, keeper_seconds()): renew the leases of the
    running distributed runs (a live worker will get to their queued shards), finish a run whose shards are all
    done, re-queue shards whose holder's lease expired, send again the shards of a stage whose messages were lost
    (unheld, unfinished, and nothing waiting in the stage's queue for `grace` seconds), and re-dispatch the current
    stage of a run none of whose shards started or finished for two leases."""
    lease = lease_seconds()
    grace = keeper_seconds() if grace is None else grace
    now = timezone.now()
    requeued: list = []
    kicked: list = []
    for run_id in list(_distributed_running().values_list("pk", flat=True)):
        MiningRun.objects.filter(pk=run_id, status=JobStatus.RUNNING).update(
            lease_expires_at=now + timezone.timedelta(seconds=lease)
        )
        rows = run_rows(run_id)
        stage = current_stage(rows)
        if stage is None:
            if _finish_from_rows(run_id, rows):
                logger.warning("run %s: every shard was done; marked it succeeded", run_id)
            continue
        dead = list(
            RunShard.objects.filter(run_id=run_id, finished_at__isnull=True, lease_expires_at__lt=now)
            .exclude(lease_owner="")
            .values_list("pk", "stage", "shard_no", "lease_owner")
        )
        for pk, dead_stage, shard_no, owner in dead:
            if RunShard.objects.filter(pk=pk, finished_at__isnull=True, lease_expires_at__lt=now).update(
                lease_owner="", lease_expires_at=None
            ):
                logger.warning("run %s: %s shard %s lost its holder %s; re-queued", run_id, dead_stage, shard_no, owner)
                celery_app.send_task(SHARD_TASK[STAGE_QUEUE[dead_stage]], args=(run_id, dead_stage, shard_no))
                requeued.append((run_id, dead_stage, shard_no))
        if not dead and _lost(run_id, stage, todo_shards(rows, stage), grace):
            logger.warning("run %s: no message waits for its %s shards; sending them again", run_id, stage)
            _last_kick[run_id] = time.monotonic()
            stage, sent = run_kick(run_id)
            kicked.append((run_id, stage, sent))
            continue
        last = RunShard.objects.filter(run_id=run_id).aggregate(s=Max("started_at"), f=Max("finished_at"))
        latest = max((t for t in (last["s"], last["f"]) if t is not None), default=None)
        idle = latest is None or (now - latest).total_seconds() > 2 * lease
        if idle and time.monotonic() - _last_kick.get(run_id, 0.0) > 2 * lease:
            _last_kick[run_id] = time.monotonic()
            stage, sent = run_kick(run_id)
            if sent:
                kicked.append((run_id, stage, sent))
    return {"requeued": requeued, "kicked": kicked}


def run_inline(run: MiningRun, reporter: ProgressReporter) -> dict:
    """Execute every stage's shards one after the other in this process (which holds the run); returns the stats."""
    while True:
        rows = run_rows(run.pk)
        stage = current_stage(rows)
        if stage is None:
            break
        todo = todo_shards(rows, stage, include_held=True)
        reporter.update(stage=stage, done=done_count(rows, stage), total=stage_counts(rows)[stage] or 0, force=True)
        for n in todo:
            shard_execute(run.pk, stage, n, reporter=reporter)
            reporter.update(done=done_count(run_rows(run.pk), stage), progress=run_progress(run_rows(run.pk)))
        record_stage_timing(run.pk, run_rows(run.pk), stage)
    finish = RunShard.objects.get(run_id=run.pk, stage="finish", shard_no=0)
    return dict(finish.result["stats"])
