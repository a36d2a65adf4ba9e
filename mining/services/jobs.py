"""The life cycle every long job shares (runs of every kind, corpus imports): the allowed status changes, the
holder's lease, and finding jobs whose worker died.

    pending -> running -> succeeded | failed | cancelled
    failed | cancelled | stalled (running, lease expired) -> pending      (retry)
    pending | running -> cancelled (at once; a running job's worker stops at its next progress report)

A finished job stays as it is: the worker of a job cancelled (or reaped) under it cannot mark it succeeded or failed
afterwards.

Each function changes one row with one conditional UPDATE, so two workers (or a worker and a user) racing on a job
cannot both win.
"""

from __future__ import annotations

import logging
import os
import socket
import traceback
from datetime import timedelta
from typing import Any, TypeVar
from urllib.parse import urlsplit

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from kombu.exceptions import OperationalError as KombuOperationalError

from pcapp.celery import app as celery_app

from ..models import Job, JobStatus

logger = logging.getLogger(__name__)

J = TypeVar("J", bound=Job)


class JobStateError(ValueError):
    """A status change the job's current status does not allow (the API answers 409)."""


def lease_seconds() -> int:
    """How long a job's holder may go without renewing its lease before the job counts as stalled."""
    return int(getattr(settings, "PCAPP_JOB_LEASE_SECONDS", 120))


def worker_name() -> str:
    """This process as a lease owner: host:pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _label(job: Job) -> str:
    return f"{job._meta.verbose_name} {job.pk}"


def _stalled_q() -> Q:
    return Q(status=JobStatus.RUNNING, lease_expires_at__lt=timezone.now())


def job_cancel(*, job: J) -> J:
    """Cancel a pending or running job at once: it shows as cancelled from now on. A running job's worker stops at
    its next progress report (ProgressReporter raises JobCancelled) and can no longer change its status."""
    if job.is_finished:
        raise JobStateError(f"{_label(job)} has already finished ({job.status})")
    n = (
        type(job)
        .objects.filter(pk=job.pk, status__in=[JobStatus.PENDING, JobStatus.RUNNING])
        .update(
            status=JobStatus.CANCELLED,
            cancel_requested=True,
            error="cancelled by user",
            finished_at=timezone.now(),
            lease_expires_at=None,
        )
    )
    job.refresh_from_db()
    if not n:
        raise JobStateError(f"{_label(job)} has already finished ({job.status})")
    return job


def job_reset_for_retry(*, job: J) -> J:
    """Move a failed, cancelled or stalled job back to pending (the caller enqueues it again)."""
    model = type(job)
    n = (
        model.objects.filter(pk=job.pk)
        .filter(Q(status__in=[JobStatus.FAILED, JobStatus.CANCELLED]) | _stalled_q())
        .update(
            status=JobStatus.PENDING,
            error="",
            progress=0.0,
            cancel_requested=False,
            finished_at=None,
            lease_owner="",
            lease_expires_at=None,
        )
    )
    job.refresh_from_db()
    if not n:
        raise JobStateError(f"only failed, cancelled or stalled jobs can be re-run ({_label(job)} is {job.status})")
    return job


def job_mark_started(*, job: J, task_id: str = "") -> bool:
    """Take a pending (or stalled) job for this process; False when it is finished, cancelled, or held by a live
    worker (a message delivered twice)."""
    model = type(job)
    now = timezone.now()
    n = (
        model.objects.filter(pk=job.pk)
        .filter(Q(status=JobStatus.PENDING) | _stalled_q())
        .update(
            status=JobStatus.RUNNING,
            started_at=now,
            celery_task_id=task_id,
            error="",
            lease_owner=worker_name(),
            lease_expires_at=now + timedelta(seconds=lease_seconds()),
        )
    )
    job.refresh_from_db()
    return bool(n)


def job_mark_finished(*, job: Job, stats: dict | None = None) -> bool:
    """Record success and the job's summary figures; False (nothing changed) when the job is no longer this
    attempt's: cancelled, reaped, or retried and started again (another `started_at`) under its worker."""
    return bool(
        type(job)
        .objects.filter(pk=job.pk, status=JobStatus.RUNNING, cancel_requested=False, started_at=job.started_at)
        .update(
            status=JobStatus.SUCCEEDED,
            finished_at=timezone.now(),
            stage="done",
            done=models.F("total"),
            progress=1.0,
            stats={**job.stats, **(stats or {})},
            lease_expires_at=None,
        )
    )


def job_mark_failed(*, job: Job, error: BaseException | str, cancelled: bool = False, **updates: Any) -> bool:
    """Record a failure (with the error text shown on the job's page) or a cancellation; False (nothing changed)
    when the job has finished already (a user's cancel or the reaper came first: their status stays) or was started
    again since."""
    if isinstance(error, BaseException):
        text = f"{type(error).__name__}: {error}"
        logger.error("%s failed: %s", _label(job), "".join(traceback.format_exception(error)))
    else:
        text = error
    return bool(
        type(job)
        .objects.filter(pk=job.pk, status__in=[JobStatus.PENDING, JobStatus.RUNNING], started_at=job.started_at)
        .update(
            status=JobStatus.CANCELLED if cancelled else JobStatus.FAILED,
            finished_at=timezone.now(),
            error=text,
            lease_expires_at=None,
            **updates,
        )
    )


def job_record_timing(*, job: Job, stage: str, seconds: float) -> None:
    """Add one stage's wall time to the job's timings (seconds)."""
    job.timings = {**job.timings, stage: round(seconds, 3)}
    type(job).objects.filter(pk=job.pk).update(timings=job.timings)


def jobs_reap_stalled(*, model: type[Job]) -> list[int]:
    """Mark failed every running job whose lease expired (its worker died), saying so; returns their ids.

    Run by each worker when it starts and by `manage.py reap_jobs`; the user can then retry them."""
    now = timezone.now()
    stalled = list(model.objects.filter(_stalled_q()).values_list("pk", "lease_owner", "lease_expires_at"))
    reaped = []
    for pk, owner, expired in stalled:
        n = model.objects.filter(_stalled_q(), pk=pk).update(
            status=JobStatus.FAILED,
            finished_at=now,
            error=f"the worker holding it ({owner or 'unknown'}) stopped renewing its lease at "
            f"{expired:%Y-%m-%d %H:%M:%S} UTC (killed or lost); retry to run it again",
            lease_expires_at=None,
        )
        if n:
            reaped.append(pk)
    if reaped:
        logger.warning("marked %d stalled %s failed: %s", len(reaped), model._meta.verbose_name_plural, reaped)
    return reaped


# Errors kombu and redis-py raise when the broker cannot be reached (refused, unknown host, timeout).
BROKER_ERRORS: tuple[type[BaseException], ...] = (KombuOperationalError, ConnectionError, OSError, TimeoutError)
# A request that creates a job waits at most a few seconds for a broker that is down, then says so.
BROKER_RETRY = {"max_retries": 2, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 1.0}


class BrokerUnavailable(RuntimeError):
    """The task broker could not be reached: the job was marked failed (retry it once the broker is back).
    The API answers 503 with this message, the pages show it."""


def broker_label() -> str:
    """The broker's address without its password, for messages."""
    url = urlsplit(str(celery_app.conf.broker_url or ""))
    return f"{url.scheme}://{url.hostname or ''}{f':{url.port}' if url.port else ''}{url.path}"


def send_task_or_fail(*, name: str, job: Job, args: list) -> None:
    """Send a job's task now; when the broker cannot be reached, mark the (pending) job failed, saying why, and
    raise BrokerUnavailable, so it is never left pending with no message to run it."""
    try:
        celery_app.send_task(name, args=args, retry=True, retry_policy=BROKER_RETRY)
    except BROKER_ERRORS as exc:
        error = (
            f"the task broker ({broker_label()}) could not be reached, so no worker was asked to run this "
            f"{job._meta.verbose_name}: {type(exc).__name__}: {exc}. Retry it once the broker is back."
        )
        type(job).objects.filter(pk=job.pk, status=JobStatus.PENDING).update(
            status=JobStatus.FAILED, error=error, finished_at=timezone.now()
        )
        logger.error("%s %s: %s", job._meta.verbose_name, job.pk, error)
        raise BrokerUnavailable(error) from exc
