"""The one map from a run's kind to the function that executes it, and the Celery task that executes a run.

It sits in pcapp, beside the apps, because its handlers come from several of them (mining's runs, the feedback app's
calibration and fine-tuning): mining sends the task by name (`mining.services.runs.EXECUTE_RUN_TASK`) and never
imports this module.
"""

from __future__ import annotations

import logging
import threading

from celery import shared_task
from celery.signals import worker_ready, worker_shutting_down
from django import db

from mining.models import ImportJob, MiningRun, RunKind
from mining.services.execute import RunHandler, execute_run_service
from mining.services.jobs import jobs_reap_stalled, jobs_send_unsent, keeper_seconds
from mining.services.runs import EXECUTE_RUN_TASK, run_mark_failed, runs_orphan_folders_delete, send_run_task

# A task that finds the database away (restarting, failing over) is sent again with a growing, jittered delay
# (1, 2, 4, 8, then every 10 s or less, for about 15 minutes) instead of being lost: its message is acknowledged
# only when the retry's own message is out.
DB_ERRORS = (db.OperationalError, db.InterfaceError)
DB_RETRY = {"autoretry_for": DB_ERRORS, "retry_backoff": 1, "retry_backoff_max": 10, "max_retries": 100}

logger = logging.getLogger(__name__)


def run_handlers() -> dict[str, RunHandler]:
    """kind -> handler. Imported on first use, so a web process that only enqueues runs never loads torch or faiss."""
    from feedback.services.calibration import execute_calibrate
    from feedback.services.fine_tuning import execute_fine_tune
    from mining.services.align_runs import execute_align_run
    from mining.services.calibrators import execute_apply_calibration
    from mining.services.doc_models import execute_train_doc_model
    from mining.services.document_sites import execute_document_any
    from mining.services.mining_runs import execute_sentence_run
    from mining.services.self_training import execute_self_train_run
    from mining.services.training_runs import execute_train_encoder

    return {
        RunKind.SENTENCE: execute_sentence_run,
        RunKind.DOCUMENT: execute_document_any,
        RunKind.ALIGN: execute_align_run,
        RunKind.TRAIN_ENCODER: execute_train_encoder,
        RunKind.TRAIN_DOC_MODEL: execute_train_doc_model,
        RunKind.CALIBRATE: execute_calibrate,
        RunKind.APPLY_CALIBRATION: execute_apply_calibration,
        RunKind.FINE_TUNE: execute_fine_tune,
        RunKind.SELF_TRAIN: execute_self_train_run,
    }


def execute_job(*, run: MiningRun, task_id: str = "") -> dict:
    """Execute a run of any kind in this process with its kind's handler; a kind without one fails the run."""
    handler = run_handlers().get(run.kind)
    if handler is None:
        run_mark_failed(run=run, error=f"no handler for run kind {run.kind!r}")
        return {"run_id": run.pk, "status": "failed"}
    return execute_run_service(run=run, handler=handler, task_id=task_id)


@shared_task(name=EXECUTE_RUN_TASK, bind=True, acks_late=True, reject_on_worker_lost=True, **DB_RETRY)
def execute_run(self, run_id: int) -> dict:
    """Start one MiningRun of any kind (the task `mining.services.runs.run_enqueue` sends): a sentence run is handed
    to the workers as stages of shard tasks; every other kind runs here, in this task."""
    run = MiningRun.objects.filter(pk=run_id).first()
    if run is None:  # deleted while its message waited
        return {"run_id": run_id, "status": "gone"}
    if run.kind == RunKind.SENTENCE:
        from mining.services.shards import sharded_run_start

        return sharded_run_start(run=run, task_id=self.request.id or "")
    if run.kind == RunKind.DOCUMENT:
        from mining.services.document_sites import is_site_run, site_run_start

        if is_site_run(run):  # pages matched within their sites: one shard task per batch of sites
            return site_run_start(run=run, task_id=self.request.id or "")
    return execute_job(run=run, task_id=self.request.id or "")


def reap_stalled_jobs() -> dict[str, list[int]]:
    """Mark failed the runs and imports whose worker died (lease expired); they can then be retried."""
    return {"runs": jobs_reap_stalled(model=MiningRun), "imports": jobs_reap_stalled(model=ImportJob)}


def keep_jobs() -> dict:
    """One round of the keeper: the distributed runs' leases, lost and dead shards (sharded_runs_keep,
    site_runs_keep), pending runs and imports whose task was never sent or was lost (jobs_send_unsent), and the
    folders of deleted runs that a shard wrote into after the deletion."""
    from django.conf import settings

    from mining.services.document_sites import site_runs_keep
    from mining.services.imports import send_import_task
    from mining.services.shards import sharded_runs_keep

    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    return {
        "shards": sharded_runs_keep(),
        "sites": site_runs_keep(),
        "runs_sent": jobs_send_unsent(model=MiningRun, send=send_run_task, queue=queue),
        "imports_sent": jobs_send_unsent(model=ImportJob, send=send_import_task, queue=queue),
        "orphans": runs_orphan_folders_delete(),
    }


def _keeper(stop: threading.Event, queues: list[str]) -> None:
    """At once, then every few seconds (keeper_seconds()): say which index groups this worker holds (the group queues
    it listens on: holds_announce), then one round of keep_jobs."""
    from mining.services.shards.pqstages import holds_announce

    first = True
    while first or not stop.wait(keeper_seconds()):
        first = False
        try:
            holds_announce(queues)
        except Exception:  # the broker cannot be asked: the job keeping below must not wait for it
            logger.exception("could not announce the index groups this worker holds; trying again")
        try:
            keep_jobs()
        except Exception:  # the database or broker is away for a moment: the next round tries again
            logger.exception("the job keeper failed; trying again")
        finally:
            db.connection.close()


_KEEPER_STOP = threading.Event()


@worker_ready.connect
def _reap_on_worker_start(sender: object = None, **_: object) -> None:
    """A worker that starts (after a crash, or on a new machine) frees the jobs a dead worker left running, then
    keeps the shard leases of distributed runs while it lives."""
    reap_stalled_jobs()
    db.connection.close()
    try:
        queues = sorted(sender.app.amqp.queues.consume_from or {})  # type: ignore[attr-defined]
    except AttributeError:
        queues = []
    threading.Thread(target=_keeper, args=(_KEEPER_STOP, queues), name="pcapp-shard-keeper", daemon=True).start()


@worker_shutting_down.connect
def _stop_keeper(**_: object) -> None:
    _KEEPER_STOP.set()
