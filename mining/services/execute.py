"""Execute a run: look up the handler for its kind, report progress, record timings, success or failure."""

from __future__ import annotations

import importlib
import logging

from ..models import MiningRun
from .progress import JobCancelled, ProgressReporter
from .runs import RUN_HANDLERS, run_mark_failed, run_mark_finished, run_mark_started

logger = logging.getLogger(__name__)

# Modules that register run handlers (imported lazily so nothing heavy loads at import time).
HANDLER_MODULES = (
    "mining.services.mining_runs",
    "mining.services.document_runs",
    "mining.services.training_runs",
    "mining.services.calibration",
    "mining.services.fine_tuning",
)


def _load_handlers() -> None:
    for name in HANDLER_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise


def execute_run_service(*, run: MiningRun, task_id: str = "") -> dict:
    """Run `run` to completion in this process; returns a small summary dict."""
    _load_handlers()
    handler = RUN_HANDLERS.get(run.kind)
    if handler is None:
        run_mark_failed(run=run, error=f"no handler for run kind {run.kind!r}")
        return {"run_id": run.pk, "status": "failed"}
    if not run_mark_started(run=run, task_id=task_id):
        return {"run_id": run.pk, "status": run.status}
    try:
        with ProgressReporter(MiningRun, run.pk) as reporter:
            stats = handler(run, reporter)
    except JobCancelled:
        run_mark_failed(run=run, error="cancelled by user", cancelled=True)
        return {"run_id": run.pk, "status": "cancelled"}
    except Exception as exc:  # the run page shows the error; a re-run resumes
        run_mark_failed(run=run, error=exc)
        return {"run_id": run.pk, "status": "failed", "error": str(exc)}
    run_mark_finished(run=run, stats=stats)
    return {"run_id": run.pk, "status": "succeeded", **{k: v for k, v in stats.items() if isinstance(v, int)}}
