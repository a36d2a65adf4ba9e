"""Execute a run in this process: mark it started, report progress, call its handler, record success or failure.

Which handler a kind has is decided by the caller: pcapp.jobs holds the one kind -> handler map for the Celery task,
and a management command that starts one kind of run passes that kind's handler itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..models import MiningRun
from .jobs import lease_seconds
from .precision import precision_after_run
from .progress import JobCancelled, ProgressReporter
from .runs import run_mark_failed, run_mark_finished, run_mark_started, run_results_discard

logger = logging.getLogger(__name__)

RunHandler = Callable[[MiningRun, Any], dict]


def execute_run_service(*, run: MiningRun, handler: RunHandler, task_id: str = "") -> dict:
    """Run `run` to completion in this process with `handler`; returns a small summary dict."""
    if not run_mark_started(run=run, task_id=task_id):
        return {"run_id": run.pk, "status": run.status}
    try:
        with ProgressReporter(MiningRun, run.pk, lease_seconds=lease_seconds()) as reporter:
            stats = handler(run, reporter)
    except JobCancelled:
        run_mark_failed(run=run, error="cancelled by user", cancelled=True)
        return {"run_id": run.pk, "status": "cancelled"}
    except Exception as exc:  # the run page shows the error; a re-run resumes
        run_mark_failed(run=run, error=exc)
        return {"run_id": run.pk, "status": "failed", "error": str(exc)}
    if not run_mark_finished(run=run, stats=stats):  # cancelled while it wrote its results: they go too
        run_results_discard(run=run, stats=stats)
        return {"run_id": run.pk, "status": "cancelled"}
    precision_after_run(run)
    return {"run_id": run.pk, "status": "succeeded", **{k: v for k, v in stats.items() if isinstance(v, int)}}
