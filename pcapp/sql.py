"""Cursors for the statements that run on every review request, prepared once per database connection.

Django runs every query with client-side parameter binding and without prepared statements (so that connection
poolers in transaction mode work), so Postgres parses and plans each statement every time it runs. For the review
queue's statements (the claim's scan above all) planning cost about as much CPU as running them, so these few
statements go through `prepared_cursor`: psycopg binds their parameters on the server and prepares each statement
the first time a connection runs it (psycopg keeps up to 100 per connection), and Postgres plans it once (or
re-plans per call when the generic plan is worse, its own choice). The cursor is Django's wrapper around it, so query
counting, execute wrappers and error translation behave as for any other query. PCAPP_DB_PREPARE=false turns this
off (needed behind a transaction-mode pooler such as PgBouncer before 1.21).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections


def _cursor_class() -> type:
    from django.db.backends.postgresql.base import ServerBindingCursor

    class PreparingCursor(ServerBindingCursor):
        def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None):
            return super().execute(query, params, prepare=True if prepare is None else prepare, binary=binary)

    return PreparingCursor


_PREPARING: type | None = None


@contextmanager
def prepared_cursor(using: str = DEFAULT_DB_ALIAS) -> Iterator[Any]:
    """A cursor (Django's wrapper) whose statements are prepared on the connection: use it for a few fixed statements
    that run very often, with %s / %(name)s parameters as usual. A plain `connection.cursor()` when
    PCAPP_DB_PREPARE is off or the database is not Postgres with psycopg 3."""
    global _PREPARING
    connection = connections[using]
    if not getattr(settings, "PCAPP_DB_PREPARE", False) or connection.vendor != "postgresql":
        with connection.cursor() as cur:
            yield cur
        return
    connection.ensure_connection()
    connection.validate_thread_sharing()
    if _PREPARING is None:
        _PREPARING = _cursor_class()
    raw = _PREPARING(connection.connection)
    wrapped = connection.make_debug_cursor(raw) if connection.queries_logged else connection.make_cursor(raw)
    with wrapped as cur:
        yield cur
