"""A sentence run as stages of checkpointed shard tasks, executed by any number of workers or in one process.

    plan -> embed (src shards, tgt shards) -> [IVF: train (1) -> index (one per base shard, each side)]
         -> search (src query shards vs the tgt index shards, tgt query shards vs the src ones; top-k merged)
         -> score (1) -> filter (candidate chunks) -> write (candidate chunks, COPY) -> finish (1)

Every shard is one `RunShard` row: a worker claims it with a lease (renewed while it works), writes its output
under PCAPP_DATA_DIR/runs/run-<id>/ (temp file, then an atomic rename) and then sets `finished_at` (a write shard
does its COPY and sets `finished_at` in one transaction). A shard whose row is done is skipped; one whose lease
expired is taken over. So a retried, re-delivered or re-planned shard never runs twice to completion, and which
stage comes next, and which of its shards are missing, is read from the rows alone (`run_kick`).

Distributed (the Celery path): `sharded_run_start` takes the run and dispatches the first stage as a Celery group of
shard tasks, each routed to its stage's queue (`embed`, `index`, `search`, `io`). The shard that completes a stage
moves `run.stage` on with a conditional UPDATE, and only that shard dispatches the next stage's group (a join
counted in Postgres instead of a chord's counter in a result backend, so it needs none and survives redelivery).
A keeper thread in every worker (`sharded_runs_keep`) renews the leases of the running distributed runs, re-queues
shards whose holder died, and re-dispatches a stage that stopped moving; when no worker is left, the run's lease
expires and the run shows as stalled (retry resumes it).

In one process (`run_inline`, what `manage.py mine` and the tests' `execute_job` use) the same shard functions run
one after the other, so both paths write the same candidates. Embeddings are always searched as the float16 values
the embedding cache holds, so a resumed run equals an uninterrupted one.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Max, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from pcapp.celery import app as celery_app

from ..core.candidates import mine_candidates
from ..core.filters import FilterReason, apply_filters, check_language
from ..core.hw import cpu_compute
from ..core.knn import KnnMethod
from ..core.knn.shards import (
    IVF_TRAIN_PER_LIST,
    ivf_assign,
    ivf_fill_shard,
    ivf_nlist,
    ivf_search_shard,
    ivf_train,
    merge_topk,
    row_shards,
    search_exact_shard,
)
from ..core.margin import neighbourhood_means
from ..core.types import Candidates, Direction, KnnResult
from ..db.bulk import copy_rows
from ..ingest.langid import detect_with_probability
from ..models import JobStatus, MiningRun, RunKind, RunShard, SentencePairCandidate
from .default_threshold import default_threshold_for_run
from .embeddings import embeddings_dir, load_shard, save_shard, shard_path, side_sentences
from .encoders import encoder_default, load_encoder
from .jobs import job_mark_failed, job_mark_finished, lease_seconds, worker_name
from .params import SentenceRunParams
from .progress import JobCancelled, ProgressReporter

logger = logging.getLogger(__name__)

STAGES = ("plan", "embed", "train", "index", "search", "score", "filter", "write", "finish")
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
# Share of the run's progress bar per stage (split evenly over the stage's shards).
STAGE_WEIGHT = {
    "plan": 2,
    "embed": 30,
    "train": 3,
    "index": 5,
    "search": 40,
    "score": 4,
    "filter": 6,
    "write": 8,
    "finish": 2,
}
IVF_SEED = 0


class ShardError(RuntimeError):
    """A shard cannot do its work (its inputs are missing or changed); the run fails with this message."""


# ----------------------------------------------------------------------------------------------------------------
# The plan


@dataclass(frozen=True)
class Plan:
    """How a run is cut into shards (stored as the `plan` shard's result)."""

    n_src: int
    n_tgt: int
    shard_rows: int
    chunk_rows: int
    knn: str
    encoder_id: int

    @property
    def src_shards(self) -> list[tuple[int, int]]:
        return row_shards(self.n_src, self.shard_rows)

    @property
    def tgt_shards(self) -> list[tuple[int, int]]:
        return row_shards(self.n_tgt, self.shard_rows)

    @property
    def ivf(self) -> bool:
        return self.knn == KnnMethod.IVF.value

    def count(self, stage: str, chunks: int | None) -> int | None:
        """Shards of `stage`; None for filter/write before the score stage has counted the candidates."""
        s, t = len(self.src_shards), len(self.tgt_shards)
        return {
            "plan": 1,
            "embed": s + t,
            "train": 1 if self.ivf else 0,
            "index": s + t if self.ivf else 0,
            "search": s + t,
            "score": 1,
            "filter": chunks,
            "write": chunks,
            "finish": 1,
        }[stage]


def run_dir(run_id: int) -> Path:
    """The folder of one run's shard outputs (on the file system every worker shares)."""
    return Path(settings.PCAPP_DATA_DIR) / "runs" / f"run-{run_id}"


def _atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Write `path` through a temp file in the same folder and an atomic rename (readers never see half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{socket.gethostname()}-{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _save_npz(path: Path, **arrays: np.ndarray) -> None:
    def write(tmp: Path) -> None:
        with tmp.open("wb") as fh:
            np.savez(fh, **arrays)

    _atomic(path, write)


def _save_npy(tmp: Path, arr: np.ndarray) -> None:
    with tmp.open("wb") as fh:
        np.save(fh, arr)


def _load_npz(path: Path) -> dict[str, np.ndarray]:
    if not path.exists():
        raise ShardError(f"{path} is missing (the data folder must be shared by every worker); retry the run")
    with np.load(path) as data:
        return {name: data[name] for name in data.files}


# ----------------------------------------------------------------------------------------------------------------
# Shard rows: claim, done, release


def _shard_table() -> str:
    return RunShard._meta.db_table


def _owner_dead(owner: str) -> bool:
    """True when `owner` (host:pid) is a process of this host that no longer exists."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def shard_claim(run_id: int, stage: str, shard_no: int, *, force: bool = False) -> tuple[str, int]:
    """Take one shard for this process: ("claimed", id), ("done", id) when it is finished, ("busy", id) when a live
    worker holds it. `force` takes it from any holder (the in-process path, which holds the whole run)."""
    table = _shard_table()
    free = (
        "TRUE"
        if force
        else f"{table}.lease_owner = '' OR {table}.lease_expires_at IS NULL OR {table}.lease_expires_at < now()"
    )
    with connection.cursor() as cur:
        cur.execute(
            f"INSERT INTO {table} (run_id, stage, shard_no, result, lease_owner, lease_expires_at, started_at) "
            "VALUES (%s, %s, %s, '{}'::jsonb, %s, now() + make_interval(secs => %s), now()) "
            "ON CONFLICT ON CONSTRAINT run_shard_unique DO UPDATE SET lease_owner = EXCLUDED.lease_owner, "
            "lease_expires_at = EXCLUDED.lease_expires_at, started_at = now() "
            f"WHERE {table}.finished_at IS NULL AND ({free}) RETURNING id",
            [run_id, stage, shard_no, worker_name(), lease_seconds()],
        )
        row = cur.fetchone()
    if row:
        return "claimed", row[0]
    held = RunShard.objects.filter(run_id=run_id, stage=stage, shard_no=shard_no).values(
        "id", "finished_at", "lease_owner"
    )[0]
    if held["finished_at"] is not None:
        return "done", held["id"]
    if not force and _owner_dead(held["lease_owner"]):
        logger.warning(
            "run %s %s shard %s: its holder %s is gone; taking it", run_id, stage, shard_no, held["lease_owner"]
        )
        return shard_claim(run_id, stage, shard_no, force=True)
    return "busy", held["id"]


def _shard_done(shard_id: int, result: dict) -> bool:
    """Record a shard finished (after its output is in place); False if another holder finished it first."""
    return bool(
        RunShard.objects.filter(pk=shard_id, finished_at__isnull=True).update(
            finished_at=timezone.now(), result=result, lease_expires_at=None
        )
    )


def _shard_release(shard_id: int) -> None:
    """Give an unfinished shard up at once (its task failed or was cancelled), so a retry takes it."""
    RunShard.objects.filter(pk=shard_id, finished_at__isnull=True).update(lease_owner="", lease_expires_at=None)


def _rows(run_id: int) -> dict[tuple[str, int], dict]:
    return {
        (r["stage"], r["shard_no"]): r
        for r in RunShard.objects.filter(run_id=run_id).values(
            "stage", "shard_no", "result", "lease_owner", "lease_expires_at", "started_at", "finished_at"
        )
    }


def _plan_of(rows: dict[tuple[str, int], dict]) -> Plan | None:
    row = rows.get(("plan", 0))
    if row is None or row["finished_at"] is None:
        return None
    return Plan(**row["result"]["plan"])


def _chunks(rows: dict[tuple[str, int], dict]) -> int | None:
    row = rows.get(("score", 0))
    return None if row is None or row["finished_at"] is None else int(row["result"]["chunks"])


def _counts(rows: dict[tuple[str, int], dict]) -> dict[str, int | None]:
    plan = _plan_of(rows)
    if plan is None:
        return {stage: (1 if stage == "plan" else None) for stage in STAGES}
    chunks = _chunks(rows)
    return {stage: plan.count(stage, chunks) for stage in STAGES}


def _done(rows: dict[tuple[str, int], dict], stage: str) -> int:
    return sum(1 for (s, _), r in rows.items() if s == stage and r["finished_at"] is not None)


def current_stage(rows: dict[tuple[str, int], dict]) -> str | None:
    """The first stage with unfinished shards (None when the run's finish shard is done)."""
    counts = _counts(rows)
    for stage in STAGES:
        n = counts[stage]
        if n is None or _done(rows, stage) < n:
            return stage
    return None


def run_progress(rows: dict[tuple[str, int], dict]) -> float:
    """Share of the run's shard work done, 0 to 1: each stage's weight times its share of done shards."""
    counts = _counts(rows)
    total = sum(STAGE_WEIGHT.values())
    got = 0.0
    for stage in STAGES:
        n = counts[stage]
        if n == 0:
            got += STAGE_WEIGHT[stage]
        elif n:
            got += STAGE_WEIGHT[stage] * min(1.0, _done(rows, stage) / n)
    return round(got / total, 6)


def _report(run_id: int, rows: dict[tuple[str, int], dict], stage: str | None = None) -> None:
    """Write the run's progress (never lower than before), and the done/total shards of its current stage."""
    stage = stage or current_stage(rows) or "finish"
    n = _counts(rows)[stage] or 0
    MiningRun.objects.filter(pk=run_id, status=JobStatus.RUNNING).update(
        progress=Greatest(F("progress"), Value(run_progress(rows))), done=_done(rows, stage), total=n
    )


# ----------------------------------------------------------------------------------------------------------------
# Executing one shard


@dataclass(frozen=True)
class Ctx:
    """What a shard function reads: the run, its parameters, its plan (None for the plan shard) and its folder."""

    run: MiningRun
    params: SentenceRunParams
    plan: Plan | None
    folder: Path
    check: Callable[[], None]  # raises JobCancelled when the run was cancelled

    @property
    def need_plan(self) -> Plan:
        if self.plan is None:
            raise ShardError("the run has no plan yet")
        return self.plan


def shard_execute(run_id: int, stage: str, shard_no: int, *, reporter: ProgressReporter | None = None) -> str:
    """Do one shard of a run, unless it is done or held by a live worker; returns what happened.

    With `reporter` (the in-process path: this process holds the whole run) the shard is taken from any holder and
    an error propagates; without it (a Celery shard task) the shard holds its own lease, an error fails the run.
    """
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}")
    run = MiningRun.objects.select_related("encoder", "src_corpus", "tgt_corpus").get(pk=run_id)
    if run.status != JobStatus.RUNNING:
        return "skipped"
    state, shard_id = shard_claim(run_id, stage, shard_no, force=reporter is not None)
    if state != "claimed":
        return state
    t0 = time.perf_counter()
    rows = _rows(run_id)
    own = None
    try:
        if reporter is None:
            own = ProgressReporter(MiningRun, run_id, lease_seconds=lease_seconds(), shard=(RunShard, shard_id))
        rep = reporter or own
        assert rep is not None
        ctx = Ctx(
            run=run,
            params=SentenceRunParams.from_dict(run.params),
            plan=_plan_of(rows),
            folder=run_dir(run_id),
            check=lambda: rep.update(),
        )
        result = STAGE_FN[stage](ctx, shard_no, shard_id)
        result["seconds"] = round(time.perf_counter() - t0, 3)
        if stage != "write":  # a write shard is marked done in its COPY's transaction
            _shard_done(shard_id, result)
    except JobCancelled:
        _shard_release(shard_id)
        if reporter is not None:
            raise
        job_mark_failed(job=run, error="cancelled by user", cancelled=True)
        return "cancelled"
    except Exception as exc:
        _shard_release(shard_id)
        if reporter is not None:
            raise
        job_mark_failed(job=run, error=f"{stage} shard {shard_no}: {type(exc).__name__}: {exc}")
        logger.exception("run %s: %s shard %s failed", run_id, stage, shard_no)
        return "failed"
    finally:
        if own is not None:
            own.close()
    rows = _rows(run_id)
    _report(run_id, rows)
    return "done"


def _after_shard(run_id: int, stage: str) -> None:
    """A shard task finished: if its stage is complete, move the run on (one winner) and dispatch the next stage."""
    rows = _rows(run_id)
    nxt = current_stage(rows)
    if nxt == stage or nxt is None:
        return
    if MiningRun.objects.filter(pk=run_id, status=JobStatus.RUNNING, stage=stage).update(stage=nxt):
        _record_stage_timing(run_id, rows, stage)
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


# ----------------------------------------------------------------------------------------------------------------
# Dispatch, start, keep


def _todo(rows: dict[tuple[str, int], dict], stage: str, *, include_held: bool = False) -> list[int]:
    """Shards of `stage` not done (and, unless include_held, not held by a live lease)."""
    n = _counts(rows)[stage] or 0
    now = timezone.now()
    out = []
    for i in range(n):
        r = rows.get((stage, i))
        if r is None:
            out.append(i)
        elif r["finished_at"] is None and (
            include_held or not r["lease_owner"] or r["lease_expires_at"] is None or r["lease_expires_at"] < now
        ):
            out.append(i)
    return out


def _dispatch_stage(run_id: int, rows: dict[tuple[str, int], dict], stage: str) -> list[int]:
    """Send the unfinished, unheld shards of `stage` as one Celery group to the stage's queue."""
    from celery import group

    todo = _todo(rows, stage)
    _report(run_id, rows, stage)
    if todo:
        task = SHARD_TASK[STAGE_QUEUE[stage]]
        group(celery_app.signature(task, args=(run_id, stage, n)) for n in todo).apply_async()
        logger.info("run %s: dispatched %s shards %s", run_id, stage, todo)
    return todo


def run_kick(run_id: int) -> tuple[str | None, list[int]]:
    """Re-plan a distributed run from its rows: set its current stage and dispatch that stage's missing shards.

    Safe to call any time (start, retry, a keeper that saw the run stop moving): shards already done or held are
    not sent again, and a shard sent twice runs once."""
    rows = _rows(run_id)
    stage = current_stage(rows)
    if stage is None:
        return None, []
    MiningRun.objects.filter(pk=run_id, status=JobStatus.RUNNING).update(stage=stage)
    return stage, _dispatch_stage(run_id, rows, stage)


def sharded_run_start(*, run: MiningRun, task_id: str = "") -> dict:
    """Take a pending (or stalled) run for the workers and dispatch its first unfinished stage."""
    from .runs import run_mark_started

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


def sharded_runs_keep() -> dict[str, list]:
    """One round of the keeper every worker runs (every quarter lease): renew the leases of the running distributed
    runs (a live worker will get to their queued shards), re-queue shards whose holder's lease expired, and
    re-dispatch the current stage of a run none of whose shards started or finished for two leases."""
    lease = lease_seconds()
    now = timezone.now()
    requeued: list = []
    kicked: list = []
    for run_id in list(_distributed_running().values_list("pk", flat=True)):
        MiningRun.objects.filter(pk=run_id, status=JobStatus.RUNNING).update(
            lease_expires_at=now + timezone.timedelta(seconds=lease)
        )
        dead = list(
            RunShard.objects.filter(run_id=run_id, finished_at__isnull=True, lease_expires_at__lt=now)
            .exclude(lease_owner="")
            .values_list("pk", "stage", "shard_no", "lease_owner")
        )
        for pk, stage, shard_no, owner in dead:
            if RunShard.objects.filter(pk=pk, finished_at__isnull=True, lease_expires_at__lt=now).update(
                lease_owner="", lease_expires_at=None
            ):
                logger.warning("run %s: %s shard %s lost its holder %s; re-queued", run_id, stage, shard_no, owner)
                celery_app.send_task(SHARD_TASK[STAGE_QUEUE[stage]], args=(run_id, stage, shard_no))
                requeued.append((run_id, stage, shard_no))
        last = RunShard.objects.filter(run_id=run_id).aggregate(s=Max("started_at"), f=Max("finished_at"))
        latest = max((t for t in (last["s"], last["f"]) if t is not None), default=None)
        idle = latest is None or (now - latest).total_seconds() > 2 * lease
        if idle and time.monotonic() - _last_kick.get(run_id, 0.0) > 2 * lease:
            _last_kick[run_id] = time.monotonic()
            stage, sent = run_kick(run_id)
            if sent:
                kicked.append((run_id, stage, sent))
    return {"requeued": requeued, "kicked": kicked}


def _record_stage_timing(run_id: int, rows: dict[tuple[str, int], dict], stage: str) -> None:
    """Wall time of a finished stage (first shard start to last shard end) and its summed shard seconds."""
    mine = [r for (s, _), r in rows.items() if s == stage and r["finished_at"] is not None]
    if not mine:
        return
    starts = [r["started_at"] for r in mine if r["started_at"] is not None]
    wall = (max(r["finished_at"] for r in mine) - min(starts)).total_seconds() if starts else 0.0
    run = MiningRun.objects.get(pk=run_id)
    shard_seconds = {
        **run.stats.get("shard_seconds", {}),
        stage: round(sum(r["result"].get("seconds", 0.0) for r in mine), 3),
    }
    MiningRun.objects.filter(pk=run_id).update(
        timings={**run.timings, stage: round(wall, 3)}, stats={**run.stats, "shard_seconds": shard_seconds}
    )


# ----------------------------------------------------------------------------------------------------------------
# The in-process path


def run_inline(run: MiningRun, reporter: ProgressReporter) -> dict:
    """Execute every stage's shards one after the other in this process (which holds the run); returns the stats."""
    while True:
        rows = _rows(run.pk)
        stage = current_stage(rows)
        if stage is None:
            break
        todo = _todo(rows, stage, include_held=True)
        reporter.update(stage=stage, done=_done(rows, stage), total=_counts(rows)[stage] or 0, force=True)
        for n in todo:
            shard_execute(run.pk, stage, n, reporter=reporter)
            reporter.update(done=_done(_rows(run.pk), stage), progress=run_progress(_rows(run.pk)))
        _record_stage_timing(run.pk, _rows(run.pk), stage)
    finish = RunShard.objects.get(run_id=run.pk, stage="finish", shard_no=0)
    return dict(finish.result["stats"])


# ----------------------------------------------------------------------------------------------------------------
# The stages of a sentence run


def _ids(ctx: Ctx, side: str) -> np.ndarray:
    return np.load(ctx.folder / "plan" / f"{side}_ids.npy")


def _side(ctx: Ctx, side: str) -> tuple[Any, str]:
    run = ctx.run
    return (run.src_corpus, run.src_lang) if side == "src" else (run.tgt_corpus, run.tgt_lang)


def _embedding(ctx: Ctx, side: str, j: int) -> np.ndarray:
    """The float32 (float16-valued) embeddings of one side shard, from the embedding cache."""
    plan = ctx.need_plan
    start, stop = (plan.src_shards if side == "src" else plan.tgt_shards)[j]
    corpus, lang = _side(ctx, side)
    path = shard_path(embeddings_dir(corpus, ctx.run.encoder, lang), j)
    emb = load_shard(path, _ids(ctx, side)[start:stop])
    if emb is None:
        raise ShardError(f"embedding shard {path} is missing or holds other sentences; retry the run")
    return emb


def _texts(ids: np.ndarray) -> dict[int, tuple[str, str]]:
    """{sentence id: (text, detected language)} for the given ids (one query, any number of ids)."""
    with connection.cursor() as cur:
        cur.execute("SELECT id, text, detected_lang FROM mining_sentence WHERE id = ANY(%s)", [[int(i) for i in ids]])
        return {row[0]: (row[1], row[2]) for row in cur.fetchall()}


def _stage_plan(ctx: Ctx, shard_no: int, shard_id: int) -> dict:
    run = ctx.run
    if run.encoder is None:
        MiningRun.objects.filter(pk=run.pk).update(encoder=encoder_default())
        run.refresh_from_db()
    src = side_sentences(run.src_corpus, run.src_lang)
    tgt = side_sentences(run.tgt_corpus, run.tgt_lang)
    if len(src) == 0 or len(tgt) == 0:
        raise ValueError(
            f"nothing to mine: {len(src)} '{run.src_lang}' sentences in {run.src_corpus}, "
            f"{len(tgt)} '{run.tgt_lang}' sentences in {run.tgt_corpus}"
        )
    for side, ids in (("src", src.ids), ("tgt", tgt.ids)):
        _atomic(ctx.folder / "plan" / f"{side}_ids.npy", lambda tmp, ids=ids: _save_npy(tmp, ids))
    plan = Plan(
        n_src=len(src),
        n_tgt=len(tgt),
        shard_rows=int(settings.PCAPP_SHARD_ROWS),
        chunk_rows=int(settings.PCAPP_CANDIDATE_CHUNK_ROWS),
        knn=ctx.params.knn.value,
        encoder_id=run.encoder_id,
    )
    return {"plan": plan.__dict__}


def _stage_embed(ctx: Ctx, shard_no: int, shard_id: int) -> dict:
    plan = ctx.need_plan
    n_src = len(plan.src_shards)
    side, j = ("src", shard_no) if shard_no < n_src else ("tgt", shard_no - n_src)
    start, stop = (plan.src_shards if side == "src" else plan.tgt_shards)[j]
    ids = _ids(ctx, side)[start:stop]
    corpus, lang = _side(ctx, side)
    folder = embeddings_dir(corpus, ctx.run.encoder, lang)
    folder.mkdir(parents=True, exist_ok=True)
    path = shard_path(folder, j)
    if load_shard(path, ids) is not None:
        return {"side": side, "rows": int(len(ids)), "cached": True}
    found = _texts(ids)
    missing = [int(i) for i in ids if int(i) not in found]
    if missing:
        raise ShardError(f"{len(missing)} sentences of the plan were deleted (e.g. id {missing[0]}); start a new run")
    ctx.check()
    encoder = load_encoder(ctx.run.encoder)
    save_shard(path, ids, np.asarray(encoder.encode([found[int(i)][0] for i in ids], lang), dtype=np.float32))
    return {"side": side, "rows": int(len(ids)), "cached": False}


def _stage_train(ctx: Ctx, shard_no: int, shard_id: int) -> dict:
    plan = ctx.need_plan
    nlist = ivf_nlist(max(1, min(plan.n_src, plan.n_tgt)))
    want = IVF_TRAIN_PER_LIST * nlist
    rng = np.random.default_rng(IVF_SEED)
    parts = []
    for side, n, shards, take in (
        ("src", plan.n_src, plan.src_shards, min(plan.n_src, want // 2)),
        ("tgt", plan.n_tgt, plan.tgt_shards, min(plan.n_tgt, want - min(plan.n_src, want // 2))),
    ):
        rows = np.sort(rng.choice(n, take, replace=False))
        for j, (start, stop) in enumerate(shards):
            sel = rows[(rows >= start) & (rows < stop)] - start
            if len(sel):
                parts.append(_embedding(ctx, side, j)[sel])
            ctx.check()
    index = ivf_train(np.concatenate(parts), nlist, seed=IVF_SEED)
    _atomic(ctx.folder / "ivf" / "trained.index", lambda tmp: faiss.write_index(index, str(tmp)))
    return {"nlist": int(index.nlist), "sample": int(sum(len(p) for p in parts))}


def _index_side(plan: Plan, shard_no: int) -> tuple[str, int]:
    """Index shard n: the target side's shards first (searched by source queries), then the source side's."""
    n_tgt = len(plan.tgt_shards)
    return ("tgt", shard_no) if shard_no < n_tgt else ("src", shard_no - n_tgt)


def _stage_index(ctx: Ctx, shard_no: int, shard_id: int) -> dict:
    plan = ctx.need_plan
    side, j = _index_side(plan, shard_no)
    start, _ = (plan.src_shards if side == "src" else plan.tgt_shards)[j]
    trained = faiss.read_index(str(ctx.folder / "ivf" / "trained.index"))
    index = ivf_fill_shard(trained, _embedding(ctx, side, j), start)
    _atomic(ctx.folder / "ivf" / f"{side}-{j:05d}.index", lambda tmp: faiss.write_index(index, str(tmp)))
    return {"side": side, "rows": int(index.ntotal)}


def _search_dir(plan: Plan, shard_no: int) -> tuple[str, int, str]:
    """Search shard n: (direction, query shard, query side); source query shards first."""
    n_src = len(plan.src_shards)
    return ("fwd", shard_no, "src") if shard_no < n_src else ("bwd", shard_no - n_src, "tgt")


def _stage_search(ctx: Ctx, shard_no: int, shard_id: int) -> dict:
    plan = ctx.need_plan
    direction, j, q_side = _search_dir(plan, shard_no)
    b_side = "tgt" if q_side == "src" else "src"
    queries = _embedding(ctx, q_side, j)
    base_shards = plan.tgt_shards if b_side == "tgt" else plan.src_shards
    n_base = plan.n_tgt if b_side == "tgt" else plan.n_src
    k = min(ctx.params.k, n_base)
    parts = []
    assign = None
    if plan.ivf:  # the queries' lists under the shared quantizer, once for every index shard
        assign = ivf_assign(faiss.read_index(str(ctx.folder / "ivf" / "trained.index")), queries, ctx.params.nprobe)
    for b, (start, _) in enumerate(base_shards):
        ctx.check()
        if plan.ivf:
            index = faiss.read_index(str(ctx.folder / "ivf" / f"{b_side}-{b:05d}.index"))
            parts.append(ivf_search_shard(index, queries, k, ctx.params.nprobe, assign=assign))
            del index
        else:
            parts.append(search_exact_shard(queries, _embedding(ctx, b_side, b), k, start))
    sims, ids = merge_topk(parts, k)
    mean = neighbourhood_means(np.where(ids >= 0, sims, -np.inf), k)
    _save_npz(ctx.folder / "search" / f"{direction}-{j:05d}.npz", sims=sims, ids=ids, mean=mean)
    return {"direction": direction, "rows": int(len(queries)), "index_shards": len(base_shards)}


def _knn(ctx: Ctx) -> KnnResult:
    plan = ctx.need_plan
    out = {}
    for direction, shards in (("fwd", plan.src_shards), ("bwd", plan.tgt_shards)):
        parts = [_load_npz(ctx.folder / "search" / f"{direction}-{j:05d}.npz") for j in range(len(shards))]
        out[direction] = (np.concatenate([p["sims"] for p in parts]), np.concatenate([p["ids"] for p in parts]))
    return KnnResult(fwd_sims=out["fwd"][0], fwd_ids=out["fwd"][1], bwd_sims=out["bwd"][0], bwd_ids=out["bwd"][1])


CAND_FIELDS = ("src_idx", "tgt_idx", "cosine", "score", "fwd_mean", "bwd_mean", "rank", "direction")


def _stage_score(ctx: Ctx, shard_no: int, shard_id: int) -> dict:
    plan = ctx.need_plan
    p = ctx.params
    knn = _knn(ctx)
    cands = mine_candidates(knn, margin=p.margin, k=p.k, strategy=p.strategy, threshold=p.threshold)
    k = knn.k
    _save_npz(
        ctx.folder / "cands.npz",
        **{name: getattr(cands, name) for name in CAND_FIELDS},
        fwd_ids=knn.fwd_ids[cands.src_idx, :k],
        fwd_sims=knn.fwd_sims[cands.src_idx, :k],
        bwd_ids=knn.bwd_ids[cands.tgt_idx, :k],
        bwd_sims=knn.bwd_sims[cands.tgt_idx, :k],
    )
    return {"candidates": len(cands), "chunks": math.ceil(len(cands) / plan.chunk_rows)}


def _chunk(ctx: Ctx, c: int) -> tuple[dict[str, np.ndarray], int, int]:
    data = _load_npz(ctx.folder / "cands.npz")
    m = len(data["src_idx"])
    a, b = c * ctx.need_plan.chunk_rows, min(m, (c + 1) * ctx.need_plan.chunk_rows)
    return {name: arr[a:b] for name, arr in data.items()}, a, b


def _cands(data: dict[str, np.ndarray]) -> Candidates:
    return Candidates(**{name: data[name] for name in CAND_FIELDS})


def _stage_filter(ctx: Ctx, shard_no: int, shard_id: int) -> dict:
    data, a, b = _chunk(ctx, shard_no)
    cands = _cands(data)
    s_db, t_db = _ids(ctx, "src")[cands.src_idx], _ids(ctx, "tgt")[cands.tgt_idx]
    texts = _texts(np.concatenate([s_db, t_db]))
    src = [texts[int(i)] for i in s_db]
    tgt = [texts[int(i)] for i in t_db]
    reasons, language = filter_reasons(src, tgt, ctx.run, ctx.params)
    payload = json.dumps({"reasons": reasons, "language": language})
    _atomic(ctx.folder / "filter" / f"{shard_no:05d}.json", lambda tmp: tmp.write_text(payload, encoding="utf-8"))
    return {"candidates": b - a, "kept": sum(1 for r in reasons if not r)}


def _filtered(ctx: Ctx, c: int) -> dict:
    path = ctx.folder / "filter" / f"{c:05d}.json"
    if not path.exists():
        raise ShardError(f"{path} is missing (the data folder must be shared by every worker); retry the run")
    return json.loads(path.read_text(encoding="utf-8"))


def _stage_write(ctx: Ctx, shard_no: int, shard_id: int) -> dict:
    data, a, b = _chunk(ctx, shard_no)
    cands = _cands(data)
    f = _filtered(ctx, shard_no)
    src_ids, tgt_ids = _ids(ctx, "src"), _ids(ctx, "tgt")
    with transaction.atomic():
        # the done mark first: it locks the shard row, so a second writer of this chunk waits and then backs off
        if not RunShard.objects.filter(pk=shard_id, finished_at__isnull=True).update(
            finished_at=timezone.now(), lease_expires_at=None
        ):
            return {"candidates": 0, "skipped": True}
        SentencePairCandidate.objects.filter(run_id=ctx.run.pk, rank__gt=a, rank__lte=b).delete()
        written = copy_rows(
            SentencePairCandidate,
            ["run_id", "src_id", "tgt_id", "cosine", "score", "rank", "strategy", "filter_reason", "evidence"],
            candidate_rows(
                run_id=ctx.run.pk,
                cands=cands,
                reasons=f["reasons"],
                language=f["language"],
                neighbours=(data["fwd_ids"], data["fwd_sims"], data["bwd_ids"], data["bwd_sims"]),
                src_ids=src_ids,
                tgt_ids=tgt_ids,
                strategy=ctx.params.strategy.value,
                rank_offset=a,
            ),
            ["int8", "int8", "int8", "float8", "float8", "int4", "text", "text", "jsonb"],
        )
        RunShard.objects.filter(pk=shard_id).update(result={"candidates": written, "rows": [a, b]})
    return {"candidates": written}


def _stage_finish(ctx: Ctx, shard_no: int, shard_id: int) -> dict:
    plan = ctx.need_plan
    rows = _rows(ctx.run.pk)
    chunks = _chunks(rows) or 0
    reasons: list[str] = []
    for c in range(chunks):
        reasons.extend(_filtered(ctx, c)["reasons"])
    stats: dict[str, Any] = {}
    if ctx.params.threshold is None:
        cands = _cands(_load_npz(ctx.folder / "cands.npz")) if chunks else _empty_cands()
        stats["default_threshold"] = default_threshold_for_run(
            cands=cands, reasons=reasons, margin=ctx.params.margin.value, k=ctx.params.k
        )
    written = sum(int(r["result"].get("candidates", 0)) for (s, _), r in rows.items() if s == "write")
    stats.update(
        # which arithmetic the exact search ran in (bf16 tiles with an exact re-score, or fp32), and on what
        knn={"method": ctx.params.knn.value, "compute": cpu_compute().value, "device": "cpu"},
        candidates=written,
        kept_after_filters=sum(1 for r in reasons if not r),
        src_sentences=plan.n_src,
        tgt_sentences=plan.n_tgt,
        shards={stage: n for stage, n in _counts(rows).items()},
    )
    if ctx.run.stats.get("distributed"):
        _record_stage_timing(ctx.run.pk, rows, "write")
        run = MiningRun.objects.get(pk=ctx.run.pk)
        job_mark_finished(job=run, stats=stats)
    return {"stats": stats}


def _empty_cands() -> Candidates:
    e = np.zeros(0)
    return Candidates(
        src_idx=e.astype(np.int64),
        tgt_idx=e.astype(np.int64),
        cosine=e.astype(np.float32),
        score=e.astype(np.float32),
        fwd_mean=e.astype(np.float32),
        bwd_mean=e.astype(np.float32),
        rank=e.astype(np.int64),
        direction=e.astype(np.uint8),
    )


STAGE_FN: dict[str, Callable[[Ctx, int, int], dict]] = {
    "plan": _stage_plan,
    "embed": _stage_embed,
    "train": _stage_train,
    "index": _stage_index,
    "search": _stage_search,
    "score": _stage_score,
    "filter": _stage_filter,
    "write": _stage_write,
    "finish": _stage_finish,
}


# ----------------------------------------------------------------------------------------------------------------
# Filters and candidate rows (shared with nothing else: a sentence run's own)


def filter_reasons(
    src: list[tuple[str, str]], tgt: list[tuple[str, str]], run: MiningRun, params: SentenceRunParams
) -> tuple[list[str], list[dict | None]]:
    """The name of the first pre-filter rule that fired for each candidate ('' when none), and the language
    evidence of each (the side whose detected language differs, that language and the identifier's probability;
    None when both sides are in their expected language). `src`/`tgt`: (text, detected language) per candidate.
    A wrong-language rejection needs a confident identifier and enough text to judge."""
    if not params.filters or not src:
        return [""] * len(src), [None] * len(src)
    src_texts = [t for t, _ in src]
    tgt_texts = [t for t, _ in tgt]
    src_detected = [d or None for _, d in src]
    tgt_detected = [d or None for _, d in tgt]
    src_prob = _detected_probability(src_texts, src_detected, run.src_lang)
    tgt_prob = _detected_probability(tgt_texts, tgt_detected, run.tgt_lang)
    sides = {"src_lang": run.src_lang, "tgt_lang": run.tgt_lang, "src_detected": src_detected}
    raw = apply_filters(
        src_texts, tgt_texts, **sides, tgt_detected=tgt_detected, src_lang_prob=src_prob, tgt_lang_prob=tgt_prob
    )
    check = check_language(
        src_texts, tgt_texts, **sides, tgt_detected=tgt_detected, src_prob=src_prob, tgt_prob=tgt_prob
    )
    reasons = ["" if r is None else FilterReason(r).value for r in raw]
    return reasons, [check.evidence(i) for i in range(len(src))]


def _detected_probability(texts: list[str], detected: list[str | None], expected: str) -> np.ndarray:
    """The identifier's probability of each text's stored language, where it differs from the expected one (NaN
    elsewhere: those texts are never rejected for their language, so they are not identified again)."""
    prob = np.full(len(texts), np.nan)
    rows = [i for i, d in enumerate(detected) if d and d != expected]
    if rows:
        codes, probs = detect_with_probability([texts[i] for i in rows])
        for i, code, p in zip(rows, codes, probs, strict=True):
            if code == detected[i]:
                prob[i] = p
    return prob


def _neighbours(db_ids: np.ndarray, rows: np.ndarray, sims: np.ndarray) -> list[list[float]]:
    """[[sentence id, similarity], ...] of one side's k nearest neighbours (the competition a pair beat)."""
    return [[int(db_ids[j]), round(float(s), 4)] for j, s in zip(rows, sims, strict=True) if j >= 0]


def candidate_rows(
    *,
    run_id: int,
    cands: Candidates,
    reasons: list[str],
    language: list[dict | None],
    neighbours: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    src_ids: np.ndarray,
    tgt_ids: np.ndarray,
    strategy: str,
    rank_offset: int = 0,
) -> Iterator[tuple]:
    """The COPY rows of a run's candidates (rank 1 = best score), with their evidence."""
    fwd_ids, fwd_sims, bwd_ids, bwd_sims = neighbours
    s_db, t_db = src_ids[cands.src_idx], tgt_ids[cands.tgt_idx]
    for i in range(len(cands)):
        evidence: dict[str, Any] = {
            "cosine": round(float(cands.cosine[i]), 5),
            "fwd_mean": round(float(cands.fwd_mean[i]), 5),
            "bwd_mean": round(float(cands.bwd_mean[i]), 5),
            "margin": round(float(cands.score[i]), 5),
            "rank_in_src_neighbours": int(cands.rank[i]),
            "directions": [d.name.lower() for d in Direction if int(cands.direction[i]) & d.value],
            "src_neighbours": _neighbours(tgt_ids, fwd_ids[i], fwd_sims[i]),
            "tgt_neighbours": _neighbours(src_ids, bwd_ids[i], bwd_sims[i]),
        }
        if reasons[i]:
            evidence["filter"] = reasons[i]
        if language[i] is not None:
            evidence["language"] = language[i]
        yield (
            run_id,
            int(s_db[i]),
            int(t_db[i]),
            float(cands.cosine[i]),
            float(cands.score[i]),
            rank_offset + i + 1,
            strategy,
            reasons[i],
            evidence,
        )


# ----------------------------------------------------------------------------------------------------------------
# Files


def run_files_delete(run_id: int) -> None:
    """Remove a run's shard outputs (the embedding cache is the corpus's and stays)."""
    shutil.rmtree(run_dir(run_id), ignore_errors=True)


__all__ = [
    "Plan",
    "STAGES",
    "ShardError",
    "current_stage",
    "run_inline",
    "run_kick",
    "run_progress",
    "shard_claim",
    "shard_execute",
    "shard_task_body",
    "sharded_run_start",
    "sharded_runs_keep",
]
