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


def _connect_params(db: dict) -> dict:
    """psycopg's arguments for the server of the Django DATABASES entry `db`, on its maintenance database."""
    params = {"host": db["HOST"] or "127.0.0.1", "port": db["PORT"] or 5432, "user": db["USER"], "dbname": "postgres"}
    if db.get("PASSWORD"):
        params["password"] = db["PASSWORD"]
    return params


def _read_back(url: str) -> dict:
    """What the settings make of DATABASE_URL=url (django-environ, then the socket folder unquoted)."""
    import environ

    cfg = environ.Env.db_url_config(url)
    from urllib.parse import unquote

    return {k: unquote(cfg[k]) if k == "HOST" else cfg[k] for k in ("NAME", "USER", "PASSWORD", "HOST", "PORT")}


def test_a_socket_folder_is_read_back_as_the_host_never_as_part_of_the_name():
    # The embedded Postgres under the data folder: what `./run app` creates and `./run tests` then uses.
    db = {"NAME": "test_pcapp", "USER": "postgres", "PASSWORD": "", "HOST": "/tmp/A clone/var/postgres", "PORT": ""}
    url = launcher.database_url(db)
    assert url == "postgres://postgres@%2Ftmp%2FA%20clone%2Fvar%2Fpostgres/test_pcapp"
    assert _read_back(url) == db
    # with the port the settings fill in, as a worker subprocess of a test gets it
    assert _read_back(launcher.database_url({**db, "PORT": 5432})) == {**db, "PORT": 5432}


def test_a_server_address_keeps_its_port_password_and_a_new_name():
    db = {"NAME": "pcapp", "USER": "me", "PASSWORD": "p@ss:/word", "HOST": "db.example", "PORT": 5433}
    url = launcher.database_url(db, name="test_pcapp")
    assert _read_back(url) == {**db, "NAME": "test_pcapp"}
    assert launcher.database_url(url) == url  # a URL in, the same URL out
    embedded = launcher.database_url({"USER": "postgres", "HOST": "/srv/pcapp/var/postgres", "NAME": "pcapp"})
    assert launcher.database_url(embedded, name="pcapp_bench") == embedded.replace("/pcapp", "/pcapp_bench")


def test_a_database_named_after_a_path_is_refused(monkeypatch):
    # What the old harness built from the embedded server's socket folder: the folder read as part of the name.
    wrong = "postgres://postgres@/srv/pcapp/var/postgres:5432/test_pcapp"
    with pytest.raises(ValueError, match="not a database name"):
        launcher.database_url(wrong)
    created = []
    monkeypatch.setattr(psycopg, "connect", lambda *a, **k: created.append(k))
    with pytest.raises(ValueError, match="not a database name"):
        launcher._ensure_database(wrong)
    assert created == []  # not even a connection


@pytest.mark.django_db
def test_the_test_database_address_reaches_the_test_database():
    # What the worker fixtures hand their Celery subprocesses, whichever server the tests run on.
    from django.db import connection

    url = launcher.database_url(connection.settings_dict)
    cfg = _read_back(url)
    assert cfg["NAME"] == connection.settings_dict["NAME"]
    params = {**_connect_params(cfg), "dbname": cfg["NAME"]}
    with psycopg.connect(**params) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == (connection.settings_dict["NAME"],)


@pytest.mark.django_db
def test_the_database_named_in_database_url_is_created_when_missing():
    db = settings.DATABASES["default"]
    name = f"pcapp_launcher_{uuid.uuid4().hex[:8]}"
    url = launcher.database_url(db, name=name)
    params = _connect_params(db)
    try:
        launcher._ensure_database(url)
        launcher._ensure_database(url)  # a second time: already there, nothing to do
        with psycopg.connect(**params, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s", [name]).fetchone() == (1,)
    finally:
        with psycopg.connect(**params, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


def test_the_embedded_redis_stops_without_a_failed_shutdown(tmp_path, caplog):
    services = launcher.Services()
    url = services.start_redis(tmp_path)
    assert url.startswith("redis+socket://")
    services.redis.set("kept", "1")
    with caplog.at_level("INFO"):
        services.stop()
    assert [r.getMessage() for r in caplog.records if "shutdown" in r.getMessage().lower()] == []
    services.start_redis(tmp_path)  # the dataset was saved
    try:
        assert services.redis.get("kept") == b"1"
    finally:
        services.stop()
