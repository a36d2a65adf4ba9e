"""The launcher's rule for which database and broker a command uses, so that `./run manage` sees what `./run app`
shows, and the database named in DATABASE_URL is created when missing."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from django.conf import settings

from pcapp import launcher


@pytest.fixture
def fake_servers(monkeypatch, tmp_path):
    """Embedded servers that only say they started, local servers that answer, and a clean environment."""
    monkeypatch.setenv("PCAPP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)
    monkeypatch.setattr(launcher.Services, "start_postgres", lambda self, data_dir: "postgres://embedded/pcapp")
    monkeypatch.setattr(launcher.Services, "start_redis", lambda self, data_dir: "redis+socket://embedded")
    monkeypatch.setattr(launcher, "_listening", lambda host, port: True)
    monkeypatch.setattr(launcher, "_ensure_database", lambda url: None)
    return tmp_path / "data"


def _chosen(prefer_local: bool) -> tuple[str, str]:
    import os

    launcher.prepare_environment(launcher.Services(), prefer_local=prefer_local)
    chosen = (os.environ.pop("DATABASE_URL"), os.environ.pop("CELERY_BROKER_URL"))
    return chosen


def test_manage_uses_the_embedded_servers_that_app_uses_even_beside_a_local_postgres(fake_servers):
    # `./run app` and `./run manage` (prefer_local False): the embedded servers, whatever listens on :5432.
    assert _chosen(prefer_local=False) == ("postgres://embedded/pcapp", "redis+socket://embedded")
    # `./run tests` on a fresh checkout: the local servers.
    local = ("postgres://postgres@127.0.0.1:5432/pcapp", "redis://127.0.0.1:6379/0")
    assert _chosen(prefer_local=True) == local
    # Once `./run app` has made its servers under the data folder, every command uses them.
    (fake_servers / "postgres").mkdir(parents=True)
    (fake_servers / "postgres" / "PG_VERSION").write_text("17\n")
    (fake_servers / "redis").mkdir()
    assert _chosen(prefer_local=True) == ("postgres://embedded/pcapp", "redis+socket://embedded")


def test_a_configured_database_is_used_as_given(fake_servers, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://someone@db.example:5432/mine")
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://broker.example:6379/1")
    assert _chosen(prefer_local=True) == ("postgres://someone@db.example:5432/mine", "redis://broker.example:6379/1")


@pytest.mark.django_db
def test_the_database_named_in_database_url_is_created_when_missing():
    db = settings.DATABASES["default"]
    name = f"pcapp_launcher_{uuid.uuid4().hex[:8]}"
    url = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{name}"
    params = {"host": db["HOST"] or "127.0.0.1", "port": db["PORT"] or 5432, "user": db["USER"], "dbname": "postgres"}
    if db.get("PASSWORD"):
        params["password"] = db["PASSWORD"]
        url = url.replace(f"{db['USER']}@", f"{db['USER']}:{db['PASSWORD']}@")
    try:
        launcher._ensure_database(url)
        launcher._ensure_database(url)  # a second time: already there, nothing to do
        with psycopg.connect(**params, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s", [name]).fetchone() == (1,)
    finally:
        with psycopg.connect(**params, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
