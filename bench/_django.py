"""Set up Django for a benchmark against a scratch database (created and migrated on first use)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def setup(database: str = "pcapp_bench") -> None:
    """Point DATABASE_URL at `database` on the configured server, create it if needed, migrate, django.setup()."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pcapp.settings")
    from pcapp.launcher import _ensure_database, database_url

    url = database_url(name=database)  # on the configured server: a local one or the embedded one's socket
    os.environ["DATABASE_URL"] = url
    _ensure_database(url)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
