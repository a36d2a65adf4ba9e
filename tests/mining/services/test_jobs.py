"""The job life cycle shared by runs and imports: allowed status changes, the holder's lease, stalled jobs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from mining.models import ImportJob, JobStatus, MiningRun, RunKind
from mining.services.jobs import (
    JobStateError,
    job_cancel,
    job_mark_failed,
    job_mark_finished,
    job_mark_started,
    job_reset_for_retry,
    jobs_reap_stalled,
    worker_name,
)
from mining.services.progress import ProgressReporter

pytestmark = pytest.mark.django_db


def _run(**fields) -> MiningRun:
    return MiningRun.objects.create(kind=RunKind.SENTENCE, **fields)


def test_start_takes_a_pending_job_with_a_lease_and_refuses_a_second_taker() -> None:
    run = _run()
    assert job_mark_started(job=run, task_id="t1")
    assert (run.status, run.lease_owner, run.celery_task_id) == (JobStatus.RUNNING, worker_name(), "t1")
    assert run.lease_expires_at > timezone.now()
    # the same message delivered again while the holder is alive: not taken twice
    assert not job_mark_started(job=run, task_id="t2")
    assert run.celery_task_id == "t1"


def test_a_stalled_job_can_be_taken_over_and_retried() -> None:
    expired = timezone.now() - timedelta(seconds=1)
    run = _run(status=JobStatus.RUNNING, lease_owner="gone:1", lease_expires_at=expired)
    assert run.is_stalled and run.can_retry
    assert job_mark_started(job=run, task_id="t3")
    assert run.lease_owner == worker_name() and not run.is_stalled

    other = _run(status=JobStatus.RUNNING, lease_owner="gone:2", lease_expires_at=expired)
    job_reset_for_retry(job=other)
    assert (other.status, other.lease_owner, other.lease_expires_at) == (JobStatus.PENDING, "", None)


def test_retry_is_refused_for_live_and_finished_jobs() -> None:
    live = _run(status=JobStatus.RUNNING, lease_expires_at=timezone.now() + timedelta(minutes=5))
    done = _run(status=JobStatus.SUCCEEDED)
    for job in (live, done):
        with pytest.raises(JobStateError, match="only failed, cancelled or stalled jobs can be re-run"):
            job_reset_for_retry(job=job)
    assert MiningRun.objects.get(pk=live.pk).status == JobStatus.RUNNING


def test_cancel_pending_and_running_at_once_finished_refused() -> None:
    pending, running, done = _run(), _run(status=JobStatus.RUNNING), _run(status=JobStatus.FAILED)
    assert job_cancel(job=pending).status == JobStatus.CANCELLED
    running = job_cancel(job=running)
    assert (running.status, running.cancel_requested, running.error) == (JobStatus.CANCELLED, True, "cancelled by user")
    assert running.finished_at is not None and running.lease_expires_at is None
    with pytest.raises(JobStateError, match="has already finished"):
        job_cancel(job=done)


def test_the_worker_of_a_cancelled_or_restarted_job_cannot_change_its_status() -> None:
    run = _run()
    assert job_mark_started(job=run)
    cancelled = job_cancel(job=MiningRun.objects.get(pk=run.pk))
    assert not job_mark_finished(job=run, stats={"candidates": 3})
    assert not job_mark_failed(job=run, error="late")
    run.refresh_from_db()
    assert (run.status, run.error, run.finished_at, run.stats) == (
        JobStatus.CANCELLED,
        "cancelled by user",
        cancelled.finished_at,
        {},
    )
    stale = MiningRun.objects.get(pk=run.pk)  # retried and started again: the old attempt's worker changes nothing
    job_reset_for_retry(job=run)
    assert job_mark_started(job=MiningRun.objects.get(pk=run.pk))
    MiningRun.objects.filter(pk=run.pk).update(started_at=stale.started_at + timedelta(seconds=1))
    stale.status = JobStatus.RUNNING
    assert not job_mark_finished(job=stale) and not job_mark_failed(job=stale, error="late")
    assert MiningRun.objects.get(pk=run.pk).status == JobStatus.RUNNING


def test_reaper_fails_only_jobs_whose_lease_expired_and_names_the_worker() -> None:
    now = timezone.now()
    dead = _run(status=JobStatus.RUNNING, lease_owner="host-a:42", lease_expires_at=now - timedelta(seconds=5))
    alive = _run(status=JobStatus.RUNNING, lease_owner="host-b:7", lease_expires_at=now + timedelta(minutes=1))
    dead_import = ImportJob.objects.create(
        corpus_name="c", format="tsv", status=JobStatus.RUNNING, lease_expires_at=now - timedelta(seconds=5)
    )
    assert jobs_reap_stalled(model=MiningRun) == [dead.pk]
    assert jobs_reap_stalled(model=ImportJob) == [dead_import.pk]
    dead.refresh_from_db()
    alive.refresh_from_db()
    assert dead.status == JobStatus.FAILED and "host-a:42" in dead.error and "retry" in dead.error
    assert alive.status == JobStatus.RUNNING
    assert jobs_reap_stalled(model=MiningRun) == []


@pytest.mark.django_db(transaction=True)
def test_progress_reporter_holds_the_lease_while_open() -> None:
    run = _run()
    job_mark_started(job=run)
    MiningRun.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    with ProgressReporter(MiningRun, run.pk, lease_seconds=600):
        run.refresh_from_db()
        assert run.lease_expires_at > timezone.now() + timedelta(seconds=500)
        assert not run.is_stalled
