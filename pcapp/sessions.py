"""Django's database sessions, read with one plain SQL statement: the session is loaded on every request, and the
ORM's compilation of the query cost more than the query. Same table, same expiry rule, same signed encoding, so
sessions move between this engine and Django's `db` engine unchanged (SESSION_ENGINE = "pcapp.sessions")."""

from __future__ import annotations

from typing import Any

from django.contrib.sessions.backends.db import SessionStore as DbSessionStore
from django.db import router
from django.utils import timezone

from .sql import prepared_cursor


class SessionStore(DbSessionStore):
    def load(self) -> dict[str, Any]:
        """The session's data, or {} (and no session key) when it is missing or expired, as Django's db engine."""
        row = None
        if self.session_key:
            model = self.model
            with prepared_cursor(router.db_for_read(model)) as cur:
                cur.execute(
                    f"SELECT session_data FROM {model._meta.db_table} WHERE session_key = %s AND expire_date > %s",
                    [self.session_key, timezone.now()],
                )
                row = cur.fetchone()
        if row is None:
            self._session_key = None
            return {}
        return self.decode(row[0])
