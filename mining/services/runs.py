"""Run lifecycle: create and enqueue, start, progress, finish, fail, cancel, retry.

Each state change of a MiningRun goes through one function here; views, tasks and commands call these.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from ..models import (
    Artefact,
    Corpus,
    DocumentPairCandidate,
    JobStatus,
    MiningRun,
    RunKind,
    RunShard,
    SentencePairCandidate,
)
from ..params import ParamsError, RunParams, params_class
from .jobs import BrokerUnavailable as BrokerUnavailable  # the API and pages catch it from here
from .jobs import (
    JobStateError,
    job_cancel,
    job_mark_failed,
    job_mark_finished,
    job_mark_started,
    job_may,
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
    """The rules of what a run may be started on, as {field: message} (empty when it may start). Every entry point
    (the run form, the API, the commands, the pages that start runs) goes through `run_create`, which applies them.

    An alignment run aligns its document run's pairs: its languages and corpora are the parent's, so a language or
    corpus given that differs from the parent's is refused, naming it."""
    errors: dict[str, str] = {}
    if kind == RunKind.ALIGN:
        if parent is None:
            errors["parent"] = "An alignment run needs a finished document run."
        elif parent.kind != RunKind.DOCUMENT or parent.status != JobStatus.SUCCEEDED:
            errors["parent"] = f"Run {parent.pk} is not a finished document run."
        else:
            given = {"src_lang": src_lang, "tgt_lang": tgt_lang, "src_corpus": src_corpus, "tgt_corpus": tgt_corpus}
            for name, value in given.items():
                own = getattr(parent, name)
                if value and value != own:
                    errors[name] = (
                        f"An alignment run aligns its document run's {name.replace('_', ' ')}: run {parent.pk} has "
                        f"'{own}', not '{value}' (leave it out)."
                    )
        return errors
    tgt_corpus = tgt_corpus or src_corpus
    for field, corpus in (("src_corpus", src_corpus), ("tgt_corpus", tgt_corpus)):
        if corpus is not None and corpus.deleting:
            errors[field] = f"Corpus {corpus} is being deleted."
    if src_corpus is not None and src_lang and src_lang not in (src_corpus.languages or []):
        errors["src_lang"] = f"Corpus {src_corpus} has no '{src_lang}' text."
    if tgt_corpus is not None and tgt_lang and tgt_lang not in (tgt_corpus.languages or []):
        errors["tgt_lang"] = f"Corpus {tgt_corpus} has no '{tgt_lang}' text."
    if src_corpus == tgt_corpus and src_lang and src_lang == tgt_lang:
        errors["tgt_lang"] = "Pick two different languages when mining a corpus against itself."
    return errors


class RunStartError(ParamsError):
    """A run that may not start: `errors` maps each field (a parameter, a language, the parent) to its message."""


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
    params: RunParams | dict | None = None,
    name: str = "",
    enqueue: bool = True,
) -> MiningRun:
    """Create a run and enqueue it once the transaction commits.

    `params` is the kind's typed parameters (`mining.params`); a dict is checked by that class first. The start rules
    (`check_run_start`) are applied here, so no entry point skips them: RunStartError (a ParamsError) names each
    broken one. An alignment run takes its corpora and languages from its parent document run."""
    cls = params_class(kind)
    if params is None or isinstance(params, dict):
        params = cls.from_dict(params)
    elif not isinstance(params, cls):
        raise TypeError(f"a {kind} run takes {cls.__name__}, not {type(params).__name__}")
    errors = check_run_start(
        kind=kind, src_corpus=src_corpus, tgt_corpus=tgt_corpus, src_lang=src_lang, tgt_lang=tgt_lang, parent=parent
    )
    if errors:
        raise RunStartError(errors)
    if kind == RunKind.ALIGN and parent is not None:
        src_corpus, tgt_corpus = parent.src_corpus, parent.tgt_corpus
        src_lang, tgt_lang = parent.src_lang, parent.tgt_lang
        encoder = encoder or parent.encoder
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
        params=params.to_dict(),
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
    """Cancel a pending or running run of any kind at once (the page shows it cancelled); its worker, or each of a
    sharded run's shard tasks, stops at its next progress check, and no further shard starts."""
    return job_cancel(job=run)


def run_candidates_delete(*, run_ids: list[int], referred_only: bool = False) -> int:
    """Delete every sentence- and document-pair candidate of the runs, with what refers to them; returns the count.
    With `referred_only`, only the candidates that something refers to (the caller deletes the rest in batches).

    Precondition: inside a transaction, the runs locked or not running. Candidates that labels, campaign items or
    alignment candidates refer to go through the ORM (which deletes those first); the rest go in one raw DELETE per
    table on its (run, ...) index. Labels and items are guarded by a statement trigger, not a per-row foreign key
    (annotation migration 0004), so a million rows cost one DELETE and one join.
    """
    deleted = 0
    for model in (SentencePairCandidate, DocumentPairCandidate):
        of_runs = model.objects.filter(run_id__in=run_ids)
        referred = Q()
        for rel in model._meta.related_objects:  # reviews, campaign items, alignment candidates
            name = rel.field.name
            referred |= Q(pk__in=rel.related_model.objects.filter(**{f"{name}__run_id__in": run_ids}).values(name))
        _, by_model = of_runs.filter(referred).delete()
        n_referred = by_model.get(model._meta.label, 0)
        if referred_only:
            deleted += n_referred
            continue
        with connection.cursor() as cur:  # one statement: batches inside one transaction only add work
            cur.execute(f"DELETE FROM {model._meta.db_table} WHERE run_id = ANY(%s)", [list(run_ids)])
            deleted += n_referred + cur.rowcount
    return deleted


def _live_shards(run_id: int) -> int:
    """Shards of the run a live worker holds (its lease not expired)."""
    return (
        RunShard.objects.filter(run_id=run_id, finished_at__isnull=True, lease_expires_at__gt=timezone.now())
        .exclude(lease_owner="")
        .count()
    )


def run_delete(*, run: MiningRun, wait_seconds: float = 10.0) -> dict[str, int]:
    """Delete a run with its candidates, shard rows and files, in well under 5 s for a million candidates.

    Allowed by TRANSITIONS["delete"]: a pending, finished or stalled run; raises JobStateError for a running one
    (cancel it first). The shards a cancel stopped let go of their leases at their next check: the deletion waits
    up to `wait_seconds` for them, and a shard still at work afterwards finds its run gone and removes the run's
    folder itself (shard_execute). All rows go in one transaction (nothing is half-deleted on error), then the
    run's folder. Returns the row counts by model.
    """
    deadline = time.monotonic() + wait_seconds
    while (
        _live_shards(run.pk)
        and time.monotonic() < deadline
        and MiningRun.objects.filter(pk=run.pk, status__in=[JobStatus.CANCELLED, JobStatus.FAILED]).exists()
    ):
        time.sleep(0.2)
    with transaction.atomic():
        run = MiningRun.objects.select_for_update().get(pk=run.pk)
        if not job_may(run, "delete"):
            raise JobStateError(f"run {run.pk} is {run.status}: cancel it before deleting it")
        counts = {"candidates": run_candidates_delete(run_ids=[run.pk])}
        _, by_model = MiningRun.objects.filter(pk=run.pk).delete()
        counts.update({label.split(".")[-1].lower(): n for label, n in by_model.items()})
    shutil.rmtree(Path(settings.PCAPP_DATA_DIR) / "runs" / f"run-{run.pk}", ignore_errors=True)
    return counts


def runs_orphan_folders_delete(*, min_age_seconds: float = 60.0) -> list[int]:
    """Remove the folders under PCAPP_DATA_DIR/runs/ of runs that no longer exist (a shard killed while it wrote after
    its run was deleted), once untouched for `min_age_seconds`; returns the run ids."""
    root = Path(settings.PCAPP_DATA_DIR) / "runs"
    if not root.is_dir():
        return []
    found = {}
    for path in root.glob("run-*"):
        suffix = path.name[4:]
        if suffix.isdigit() and path.is_dir() and time.time() - path.stat().st_mtime > min_age_seconds:
            found[int(suffix)] = path
    alive = set(MiningRun.objects.filter(pk__in=list(found)).values_list("pk", flat=True))
    gone = sorted(set(found) - alive)
    for run_id in gone:
        shutil.rmtree(found[run_id], ignore_errors=True)
    if gone:
        logger.warning("removed the folders of deleted runs %s", gone)
    return gone


@transaction.atomic
def run_results_discard(*, run: MiningRun, stats: dict) -> None:
    """Remove what a run's handler wrote when the run was cancelled while it wrote them (after its last progress
    check): its candidates, and the model it registered (`stats["artefact_id"]`) with its file. Nothing is removed
    when the run was retried and started again meanwhile (the new attempt owns the run's rows)."""
    current = MiningRun.objects.select_for_update().filter(pk=run.pk).first()
    if current is None or not current.is_finished or current.started_at != run.started_at:
        return
    run_candidates_delete(run_ids=[run.pk])
    artefact = Artefact.objects.filter(pk=stats.get("artefact_id")).first()
    if artefact is not None and not MiningRun.objects.filter(encoder=artefact).exists():
        path = Path(settings.PCAPP_DATA_DIR) / artefact.path if artefact.path else None
        artefact.delete()
        if path is not None and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        elif path is not None:
            path.unlink(missing_ok=True)


@transaction.atomic
def run_retry(*, run: MiningRun) -> MiningRun:
    """Re-run a failed, cancelled or stalled run and enqueue it."""
    job_reset_for_retry(job=run)
    run_enqueue(run=run)
    return run


def run_mark_started(*, run: MiningRun, task_id: str = "") -> bool:
    """Take a pending (or stalled) run for this worker; False if it was cancelled, finished, or is held already."""
    return job_mark_started(job=run, task_id=task_id)


def run_mark_finished(*, run: MiningRun, stats: dict | None = None) -> bool:
    """Record success and the run's summary figures; False when the run was cancelled (or reaped) meanwhile."""
    return job_mark_finished(job=run, stats=stats)


def run_mark_failed(*, run: MiningRun, error: BaseException | str, cancelled: bool = False) -> bool:
    """Record a failure (with the error text shown on the run page) or a cancellation; False when the run had
    finished already (a cancel came first)."""
    return job_mark_failed(job=run, error=error, cancelled=cancelled)


def run_record_timing(*, run: MiningRun, stage: str, seconds: float) -> None:
    """Add one stage's wall time to the run's timings (seconds)."""
    job_record_timing(job=run, stage=stage, seconds=seconds)
