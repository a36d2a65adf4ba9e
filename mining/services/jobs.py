"""The life cycle every long job shares (runs of every kind, corpus imports): one table of the allowed status changes
(TRANSITIONS), the holder's lease, and finding jobs whose worker died or whose task was never sent.

    pending -> running -> succeeded | failed | cancelled
    failed | cancelled | stalled (running, lease expired) | unsent (pending, no task published) -> pending  (retry)
    pending | running -> cancelled (at once; a running job's worker stops at its next progress report)
    pending | succeeded | failed | cancelled | stalled -> (deleted)

A finished job stays as it is: the worker of a job cancelled (or reaped) under it cannot mark it succeeded or failed
afterwards.

Every status change is one conditional UPDATE (`job_transition`: `filter(status__in=allowed).update(...)`), so two
workers (or a worker and a user) racing on a job cannot both win: the loser's UPDATE changes no row.
"""

from __future__ import annotations

import logging
import os
import socket
import traceback
from collections.abc import Callable
from dataclasses import dataclass
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


def keeper_seconds() -> float:
    """How often each worker's keeper thread looks after the running jobs (leases, lost messages, unsent jobs)."""
    return min(float(getattr(settings, "PCAPP_KEEPER_SECONDS", 5)), max(0.5, lease_seconds() / 4))


def unsent_seconds() -> int:
    """How long a pending job may wait for its task to be published before it counts as unsent (the web process
    died between the commit and the publish): the keeper sends it then, and Retry may."""
    return int(getattr(settings, "PCAPP_UNSENT_SECONDS", 30))


def worker_name() -> str:
    """This process as a lease owner: host:pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _label(job: Job) -> str:
    return f"{job._meta.verbose_name} {job.pk}"


def _stalled_q() -> Q:
    return Q(status=JobStatus.RUNNING, lease_expires_at__lt=timezone.now())


def _unsent_q() -> Q:
    """Pending with no task published this attempt, for longer than unsent_seconds()."""
    cutoff = timezone.now() - timedelta(seconds=unsent_seconds())
    return Q(status=JobStatus.PENDING, enqueued_at__isnull=True) & (
        Q(queued_at__lt=cutoff) | Q(queued_at__isnull=True, created_at__lt=cutoff)
    )


@dataclass(frozen=True)
class Transition:
    """An allowed status change: from `source` (or a row `also` matches) to `target` (None: the row is deleted)."""

    source: tuple[str, ...]
    target: str | None
    also: str = ""  # "stalled" or "unsent": the rows of that condition may take it too

    def q(self) -> Q:
        """The rows that may take this transition now."""
        q = Q(status__in=self.source)
        if self.also == "stalled":
            q |= _stalled_q()
        elif self.also == "unsent":
            q |= _stalled_q() | _unsent_q()
        return q


P, R, S, F, C = (JobStatus.PENDING, JobStatus.RUNNING, JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)
TRANSITIONS: dict[str, Transition] = {
    "start": Transition((P,), R, also="stalled"),  # a stalled job is taken over by the next worker
    "finish": Transition((R,), S),
    "fail": Transition((P, R), F),
    "cancel": Transition((P, R), C),
    "reap": Transition((), F, also="stalled"),
    "retry": Transition((F, C), P, also="unsent"),
    "delete": Transition((P, S, F, C), None, also="stalled"),
}
"""Every status change of a job, by name; services change a status only through job_transition."""


def job_transition(model: type[Job], pk: int, action: str, *, where: Q | None = None, **updates: Any) -> bool:
    """Apply TRANSITIONS[action] to one job with one conditional UPDATE (`where` narrows it further); True when it
    applied, False when the job's status (changed by someone else meanwhile) does not allow it."""
    t = TRANSITIONS[action]
    if t.target is None:
        raise ValueError(f"{action} deletes the row: use job_may({action!r}) under a row lock")
    rows = model.objects.filter(t.q(), pk=pk)
    if where is not None:
        rows = rows.filter(where)
    return bool(rows.update(status=t.target, **updates))


def job_may(job: Job, action: str) -> bool:
    """Whether the job as loaded allows TRANSITIONS[action] (to check a row locked with select_for_update)."""
    return type(job).objects.filter(TRANSITIONS[action].q(), pk=job.pk).exists()


def job_cancel(*, job: J) -> J:
    """Cancel a pending or running job at once: it shows as cancelled from now on. A running job's worker stops at
    its next progress report (ProgressReporter raises JobCancelled) and can no longer change its status."""
    n = job_transition(
        type(job),
        job.pk,
        "cancel",
        cancel_requested=True,
        error="cancelled by user",
        finished_at=timezone.now(),
        lease_expires_at=None,
    )
    job.refresh_from_db()
    if not n:
        raise JobStateError(f"{_label(job)} has already finished ({job.status})")
    return job


def job_reset_for_retry(*, job: J) -> J:
    """Move a failed, cancelled, stalled or unsent job back to pending (the caller enqueues it again)."""
    n = job_transition(
        type(job),
        job.pk,
        "retry",
        error="",
        progress=0.0,
        cancel_requested=False,
        finished_at=None,
        lease_owner="",
        lease_expires_at=None,
        queued_at=timezone.now(),
        enqueued_at=None,
    )
    job.refresh_from_db()
    if not n:
        raise JobStateError(f"only failed, cancelled or stalled jobs can be re-run ({_label(job)} is {job.status})")
    return job


def job_mark_started(*, job: J, task_id: str = "") -> bool:
    """Take a pending (or stalled) job for this process; False when it is finished, cancelled, or held by a live
    worker (a message delivered twice)."""
    now = timezone.now()
    n = job_transition(
        type(job),
        job.pk,
        "start",
        started_at=now,
        celery_task_id=task_id,
        error="",
        lease_owner=worker_name(),
        lease_expires_at=now + timedelta(seconds=lease_seconds()),
    )
    job.refresh_from_db()
    return bool(n)


def job_mark_finished(*, job: Job, stats: dict | None = None) -> bool:
    """Record success and the job's summary figures; False (nothing changed) when the job is no longer this
    attempt's: cancelled, reaped, or retried and started again (another `started_at`) under its worker."""
    return job_transition(
        type(job),
        job.pk,
        "finish",
        where=Q(cancel_requested=False, started_at=job.started_at),
        finished_at=timezone.now(),
        stage="done",
        done=models.F("total"),
        progress=1.0,
        stats={**job.stats, **(stats or {})},
        lease_expires_at=None,
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
    return job_transition(
        type(job),
        job.pk,
        "cancel" if cancelled else "fail",
        where=Q(started_at=job.started_at),
        finished_at=timezone.now(),
        error=text,
        lease_expires_at=None,
        **updates,
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
        n = job_transition(
            model,
            pk,
            "reap",
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
# A request that creates a job waits at most a few seconds for a broker that is down or frozen, then says so: two
# tries, each bounded by the broker's socket timeouts (settings.PCAPP_BROKER_TIMEOUT).
BROKER_RETRY = {"max_retries": 1, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 1.0}


class BrokerUnavailable(RuntimeError):
    """The task broker could not be reached: the job was marked failed (retry it once the broker is back).
    The API answers 503 with this message, the pages show it."""


def broker_label() -> str:
    """The broker's address without its password, for messages."""
    url = urlsplit(str(celery_app.conf.broker_url or ""))
    return f"{url.scheme}://{url.hostname or ''}{f':{url.port}' if url.port else ''}{url.path}"


def send_task_or_fail(*, name: str, job: Job, args: list) -> None:
    """Send a job's task now and record when (`enqueued_at`); when the broker cannot be reached within a few seconds
    (settings: the broker's socket timeouts and BROKER_RETRY), mark the (pending) job failed, saying why, and raise
    BrokerUnavailable, so it is never left pending with no message to run it, and Retry sends it again."""
    try:
        celery_app.send_task(name, args=args, retry=True, retry_policy=BROKER_RETRY)
    except BROKER_ERRORS as exc:
        error = (
            f"the task broker ({broker_label()}) could not be reached, so no worker was asked to run this "
            f"{job._meta.verbose_name}: {type(exc).__name__}: {exc}. Retry it once the broker is back."
        )
        job_transition(
            type(job), job.pk, "fail", where=Q(status=JobStatus.PENDING), error=error, finished_at=timezone.now()
        )
        logger.error("%s %s: %s", job._meta.verbose_name, job.pk, error)
        raise BrokerUnavailable(error) from exc
    type(job).objects.filter(pk=job.pk, status=JobStatus.PENDING).update(enqueued_at=timezone.now())


def queue_length(queue: str) -> int | None:
    """Messages waiting in a broker queue (not those a worker holds); None when the broker cannot be asked."""
    from kombu.exceptions import ChannelError

    try:
        with celery_app.connection_for_read() as conn:
            conn.ensure_connection(max_retries=1)
            return int(conn.default_channel.queue_declare(queue=queue, passive=True).message_count)
    except ChannelError:  # no such queue: nothing waits in it
        return 0
    except BROKER_ERRORS:
        return None


def jobs_send_unsent(*, model: type[Job], send: Callable[[int], None], queue: str) -> list[int]:
    """Send (`send(pk)`, which raises BrokerUnavailable when it cannot) the task of every pending job that no worker
    will get, and return their ids: those never published
    (the web process died between the commit and the publish, `unsent_seconds()` ago), and those published longer
    ago than that while `queue` is empty (the broker lost the message: restarted without persistence, or a worker
    took it and died before starting it). A message sent twice runs once (`job_mark_started` is conditional)."""
    cutoff = timezone.now() - timedelta(seconds=unsent_seconds())
    todo = set(model.objects.filter(_unsent_q()).values_list("pk", flat=True))
    published = model.objects.filter(status=JobStatus.PENDING, enqueued_at__lt=cutoff)
    if published.exists() and queue_length(queue) == 0:
        todo |= set(published.values_list("pk", flat=True))
    sent = []
    for pk in sorted(todo):
        try:
            send(pk)
        except BrokerUnavailable:
            break
        sent.append(pk)
    if sent:
        logger.warning("sent the task of %d pending %s again: %s", len(sent), model._meta.verbose_name_plural, sent)
    return sent
