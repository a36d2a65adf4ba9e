"""Run a whole transaction again when Postgres aborted it for a deadlock or a serialisation failure."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import OperationalError, connection

T = TypeVar("T")
log = logging.getLogger(__name__)
RETRY_SQLSTATES = {"40P01", "40001"}
"""deadlock_detected, serialization_failure: Postgres rolled the transaction back; running it again is safe."""


def is_conflict(exc: BaseException) -> bool:
    """True for a deadlock or serialisation failure (Django's OperationalError around psycopg's error)."""
    return getattr(exc.__cause__, "sqlstate", None) in RETRY_SQLSTATES


def retry_on_conflict(fn: Callable[[], T], *, attempts: int = 4) -> T:
    """fn() (which opens and commits its own transaction), run again up to `attempts` times in all when Postgres
    aborts it for a deadlock or a serialisation failure. Such a transaction is rolled back whole, so nothing of a
    failed try is stored and a retry never stores twice. Inside an enclosing transaction (tests, a caller's atomic)
    a retry is impossible, so fn() runs once and an error goes to the caller."""
    if connection.in_atomic_block:
        return fn()
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except OperationalError as exc:
            if attempt == attempts or not is_conflict(exc):
                raise
            log.warning("transaction aborted (%s), try %d of %d", exc.__cause__.sqlstate, attempt, attempts)
            time.sleep(random.uniform(0, 0.02 * 2**attempt))  # noqa: S311 (jitter, not a secret)
    raise AssertionError("unreachable")
