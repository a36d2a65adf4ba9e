"""Reads of a mining run: its progress bar, progress and the run lists (its threshold: `thresholds`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from ..models import JobStatus, MiningRun
from ..words import readable


@dataclass(frozen=True)
class JobBar:
    """What a progress bar of a job (run or import) shows: the percent done and what it is a percent of.

    `overall` is True when the percent is the share of the whole job (its `progress` field, or 100 once it
    succeeded), False when only the current stage's done/total is known (then `label` names the stage)."""

    percent: float | None
    overall: bool
    label: str


def job_bar(job: Any) -> JobBar:
    """The progress bar of a run or import: 100 % once it succeeded; else its share over all stages when the worker
    reports one; else the current stage's done/total, labelled with the stage; else nothing to draw."""
    stage = readable(job.stage) if job.stage and job.stage != "done" else ""
    if job.status == JobStatus.SUCCEEDED:
        return JobBar(100.0, True, "done")
    if job.status == JobStatus.PENDING:
        return JobBar(None, True, "queued")
    if job.progress and job.progress > 0:
        pct = min(100.0, 100.0 * float(job.progress))
        where = f" · {stage}" if stage else ""
        return JobBar(pct, True, f"{pct:.0f} % of the whole job{where}")
    if job.total > 0:
        pct = min(100.0, 100.0 * job.done / job.total)
        return JobBar(pct, False, f"{stage or 'stage'}: {job.done:,} / {job.total:,} ({pct:.0f} % of this stage)")
    return JobBar(None, False, stage or job.get_status_display().lower())


@dataclass(frozen=True)
class RunProgress:
    """What the run page shows while a run works: stage, done/total, elapsed seconds, items per second."""

    status: str
    stage: str
    done: int
    total: int
    elapsed_s: float | None
    rate: float | None
    percent: float | None
    finished: bool
    bar: JobBar | None = None


def run_progress(*, run: MiningRun, now: datetime | None = None) -> RunProgress:
    """Progress of a run from its row: the rate is the current stage's done over the time spent in that stage."""
    now = now or timezone.now()
    elapsed = None
    if run.started_at is not None:
        elapsed = max(0.0, ((run.finished_at or now) - run.started_at).total_seconds())
    rate = None
    if elapsed is not None and run.done > 0:
        spent_before = sum(float(v) for k, v in (run.timings or {}).items() if k != run.stage)
        stage_time = elapsed - spent_before
        rate = run.done / stage_time if stage_time > 0 else None
    bar = job_bar(run)
    percent = bar.percent
    return RunProgress(
        status=run.status,
        stage=run.stage,
        done=run.done,
        total=run.total,
        elapsed_s=elapsed,
        rate=rate,
        percent=percent,
        finished=run.is_finished,
        bar=bar,
    )


def run_get(*, pk: int) -> MiningRun:
    """One run with its corpora and encoder (one query)."""
    return MiningRun.objects.select_related("src_corpus", "tgt_corpus", "encoder", "parent").get(pk=pk)


def run_list(*, limit: int = 50, kinds: tuple[str, ...] | None = None, status: str | None = None) -> list[MiningRun]:
    """Recent runs (of the given kinds and status, if given) with corpora and encoder joined."""
    qs = MiningRun.objects.select_related("src_corpus", "tgt_corpus", "encoder").order_by("-created_at")
    if kinds is not None:
        qs = qs.filter(kind__in=kinds)
    if status is not None:
        qs = qs.filter(status=status)
    return list(qs[:limit])
