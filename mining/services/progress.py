"""Live progress for long jobs, written on a separate autocommit connection.

An import or run may do all its work inside one transaction (all or nothing); its progress must still be visible to
the browser meanwhile, so it goes through a second connection that commits each update at once.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
from django.db import connection, models


class JobCancelled(Exception):
    """Raised inside a job when someone cancelled it, or it stopped being this attempt's to run (reaped as stalled,
    or retried and started again elsewhere): the worker stops and leaves the job's status as it is."""


class ProgressReporter:
    """Throttled `stage, done, total` updates of one job row (ImportJob or MiningRun) from inside a transaction.

    While it is open, a daemon thread renews the job's lease every quarter of the lease time, even through a long
    stage that reports no progress; when the process dies the renewals stop and the job shows as stalled.

    Each update checks that the job is still this attempt's to run: running, no cancel asked for, and not started
    again since (the `started_at` seen on opening); otherwise it raises JobCancelled.
    """

    def __init__(
        self,
        model: type[models.Model],
        pk: int,
        *,
        min_interval: float = 0.5,
        lease_seconds: float | None = None,
        shard: tuple[type[models.Model], int] | None = None,
    ) -> None:
        """`shard`: (RunShard, id) of a run's shard this process holds; its lease is renewed with the job's."""
        self._table = model._meta.db_table
        self._pk = pk
        self._min_interval = min_interval
        self._last = 0.0
        self._can_cancel = {"cancel_requested", "status", "started_at"} <= {f.name for f in model._meta.get_fields()}
        params = connection.get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        params.pop("prepare_threshold", None)
        self._conn = psycopg.connect(**params, autocommit=True)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None
        self._shard = (shard[0]._meta.db_table, shard[1]) if shard else None
        first = self._attempt() if self._can_cancel else None  # None too in a test whose row is not committed
        self._started_at = first[2] if first else None
        self._seen = first is not None
        if lease_seconds and any(f.name == "lease_expires_at" for f in model._meta.get_fields()):
            self._lease = float(lease_seconds)
            self._renew()
            self._heartbeat = threading.Thread(target=self._beat, name=f"lease-{self._table}-{pk}", daemon=True)
            self._heartbeat.start()

    def _renew(self) -> None:
        with self._lock:
            self._conn.execute(
                f"UPDATE {self._table} SET lease_expires_at = now() + make_interval(secs => %s) "
                "WHERE id = %s AND status = 'running'",
                [self._lease, self._pk],
            )
            if self._shard:
                self._conn.execute(
                    f"UPDATE {self._shard[0]} SET lease_expires_at = now() + make_interval(secs => %s) "
                    "WHERE id = %s AND finished_at IS NULL",
                    [self._lease, self._shard[1]],
                )

    def _attempt(self) -> tuple | None:
        """(status, cancel_requested, started_at) of the job as committed; None while its row is not visible."""
        return self._conn.execute(
            f"SELECT status, cancel_requested, started_at FROM {self._table} WHERE id = %s", [self._pk]
        ).fetchone()

    def _beat(self) -> None:
        while not self._stop.wait(self._lease / 4):
            try:
                self._renew()
            except psycopg.Error:  # the job goes on; a lost connection shows as a stalled lease
                return

    def __enter__(self) -> ProgressReporter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
        self._conn.close()

    def update(
        self,
        *,
        stage: str | None = None,
        done: int | None = None,
        total: int | None = None,
        progress: float | None = None,
        force: bool = False,
    ) -> None:
        """Record progress at most every `min_interval` seconds (always when `force` or the stage changes).

        `progress` is the share of the whole job done (0 to 1, over all stages), where the job can tell it."""
        now = time.monotonic()
        if not force and stage is None and now - self._last < self._min_interval:
            return
        self._last = now
        sets, values = [], []
        for column, value in (("stage", stage), ("done", done), ("total", total), ("progress", progress)):
            if value is not None:
                sets.append(f"{column} = %s")
                values.append(value)
        with self._lock:
            if sets:
                self._conn.execute(f"UPDATE {self._table} SET {', '.join(sets)} WHERE id = %s", [*values, self._pk])
            row = self._attempt() if self._can_cancel else None
        if row is None and self._seen:  # the job was deleted under it
            raise JobCancelled(f"{self._table} {self._pk} was deleted")
        if row and (row[0] != "running" or row[1] or (self._seen and row[2] != self._started_at)):
            reason = "was cancelled" if row[1] else f"is {row[0]}" if row[0] != "running" else "was started again"
            raise JobCancelled(f"{self._table} {self._pk} {reason}")

    def progress(self, done: int, total: int) -> None:
        """A `progress(done, total)` callback for the numeric core."""
        self.update(done=done, total=total)
