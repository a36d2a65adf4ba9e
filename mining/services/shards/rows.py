"""The `RunShard` rows of a run: claim a shard with a lease, mark it done or release it, and read from the rows alone
which stage comes next, which of its shards are missing, and how far the run is."""

from __future__ import annotations

import logging
import os
import socket

from django.db import connection
from django.db.models import F, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from ...models import JobStatus, MiningRun, RunShard
from ..jobs import lease_seconds, worker_name
from .plan import STAGE_WEIGHT, STAGES, Plan

logger = logging.getLogger(__name__)


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


def shard_done(shard_id: int, result: dict) -> bool:
    """Record a shard finished (after its output is in place); False if another holder finished it first."""
    return bool(
        RunShard.objects.filter(pk=shard_id, finished_at__isnull=True).update(
            finished_at=timezone.now(), result=result, lease_expires_at=None
        )
    )


def shard_release(shard_id: int) -> None:
    """Give an unfinished shard up at once (its task failed or was cancelled), so a retry takes it."""
    RunShard.objects.filter(pk=shard_id, finished_at__isnull=True).update(lease_owner="", lease_expires_at=None)


def run_rows(run_id: int) -> dict[tuple[str, int], dict]:
    """A run's shard rows by (stage, shard number)."""
    return {
        (r["stage"], r["shard_no"]): r
        for r in RunShard.objects.filter(run_id=run_id).values(
            "stage", "shard_no", "result", "lease_owner", "lease_expires_at", "started_at", "finished_at"
        )
    }


def plan_of(rows: dict[tuple[str, int], dict]) -> Plan | None:
    """The run's plan, from its done plan shard (None before that)."""
    row = rows.get(("plan", 0))
    if row is None or row["finished_at"] is None:
        return None
    return Plan(**row["result"]["plan"])


def chunk_count(rows: dict[tuple[str, int], dict]) -> int | None:
    """Candidate chunks counted by the done score shard (None before that)."""
    row = rows.get(("score", 0))
    return None if row is None or row["finished_at"] is None else int(row["result"]["chunks"])


def stage_counts(rows: dict[tuple[str, int], dict]) -> dict[str, int | None]:
    """Shards per stage (None where not known yet)."""
    plan = plan_of(rows)
    if plan is None:
        return {stage: (1 if stage == "plan" else None) for stage in STAGES}
    chunks = chunk_count(rows)
    return {stage: plan.count(stage, chunks) for stage in STAGES}


def done_count(rows: dict[tuple[str, int], dict], stage: str) -> int:
    """Done shards of `stage`."""
    return sum(1 for (s, _), r in rows.items() if s == stage and r["finished_at"] is not None)


def current_stage(rows: dict[tuple[str, int], dict]) -> str | None:
    """The first stage with unfinished shards (None when the run's finish shard is done)."""
    counts = stage_counts(rows)
    for stage in STAGES:
        n = counts[stage]
        if n is None or done_count(rows, stage) < n:
            return stage
    return None


def run_progress(rows: dict[tuple[str, int], dict]) -> float:
    """Share of the run's shard work done, 0 to 1: each stage's weight times its share of done shards."""
    counts = stage_counts(rows)
    total = sum(STAGE_WEIGHT.values())
    got = 0.0
    for stage in STAGES:
        n = counts[stage]
        if n == 0:
            got += STAGE_WEIGHT[stage]
        elif n:
            got += STAGE_WEIGHT[stage] * min(1.0, done_count(rows, stage) / n)
    return round(got / total, 6)


def report_progress(run_id: int, rows: dict[tuple[str, int], dict], stage: str | None = None) -> None:
    """Write the run's progress (never lower than before), and the done/total shards of its current stage."""
    stage = stage or current_stage(rows) or "finish"
    n = stage_counts(rows)[stage] or 0
    MiningRun.objects.filter(pk=run_id, status=JobStatus.RUNNING).update(
        progress=Greatest(F("progress"), Value(run_progress(rows))), done=done_count(rows, stage), total=n
    )


def todo_shards(rows: dict[tuple[str, int], dict], stage: str, *, include_held: bool = False) -> list[int]:
    """Shards of `stage` not done (and, unless include_held, not held by a live lease)."""
    n = stage_counts(rows)[stage] or 0
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


def record_stage_timing(run_id: int, rows: dict[tuple[str, int], dict], stage: str) -> None:
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
