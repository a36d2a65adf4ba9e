"""Issue 17, defaults: with DEBUG off the app refuses to start on the built-in development key (or the example's
`change-me`); `./run app` writes a random per-install key into the data folder the first time and uses it."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pcapp import launcher

ROOT = Path(__file__).resolve().parents[2]
PROBE = "import django; django.setup(); from django.conf import settings; print('KEY=' + settings.SECRET_KEY)"


def _start(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """Load the settings in a fresh interpreter, as the web server, the worker and manage.py do."""
    base = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DEBUG", "PYTEST_VERSION", "PCAPP_DATA_DIR")}
    full = {**base, "DJANGO_SETTINGS_MODULE": "pcapp.settings", "PCAPP_DATA_DIR": str(tmp_path / "data"), **env}
    full.setdefault("SECRET_KEY", "")  # an empty value also keeps a developer's .env from filling it in
    full.setdefault("DEBUG", "false")
    return subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=full, capture_output=True, text=True, timeout=120
    )


def test_debug_off_without_a_key_refuses_to_start(tmp_path):
    result = _start(tmp_path)
    assert result.returncode != 0 and "KEY=" not in result.stdout
    assert "ImproperlyConfigured" in result.stderr and "SECRET_KEY" in result.stderr and "./run app" in result.stderr


@pytest.mark.parametrize("key", ["dev-only-insecure-key-change-me", "change-me"])
def test_debug_off_on_a_known_public_key_refuses_to_start(tmp_path, key):
    result = _start(tmp_path, SECRET_KEY=key)
    assert result.returncode != 0 and "ImproperlyConfigured" in result.stderr


def test_debug_on_runs_on_the_development_key(tmp_path):
    result = _start(tmp_path, DEBUG="true")
    assert result.returncode == 0, result.stderr
    assert "KEY=dev-only-insecure-key-change-me" in result.stdout


def test_a_set_key_is_used(tmp_path):
    result = _start(tmp_path, SECRET_KEY="k" * 50)
    assert result.returncode == 0, result.stderr
    assert f"KEY={'k' * 50}" in result.stdout


def test_the_launcher_writes_a_private_random_key_once_and_the_settings_read_it(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    first = launcher.ensure_secret_key(data)
    path = data / "secret-key.txt"
    assert path.read_text().strip() == first and len(first) >= 50
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert launcher.ensure_secret_key(data) == first
    other = tmp_path / "other"
    other.mkdir()
    assert launcher.ensure_secret_key(other) != first
    # A server started without SECRET_KEY in its environment (manage.py, a worker) finds the file.
    result = _start(tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"KEY={first}" in result.stdout


def test_prepare_environment_writes_the_key_file_once(tmp_path, monkeypatch):
    """`./run app` and `./run tests|manage` (launcher exec) make sure the install has its key before they start
    anything; the settings of every process they start then read it."""
    monkeypatch.setenv("PCAPP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path}/unused.db")  # no server is contacted
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://127.0.0.1:1/0")
    launcher.prepare_environment(launcher.Services(), prefer_local=True)
    key = (tmp_path / "data" / "secret-key.txt").read_text().strip()
    launcher.prepare_environment(launcher.Services(), prefer_local=True)
    assert (tmp_path / "data" / "secret-key.txt").read_text().strip() == key and len(key) >= 50
    result = _start(tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"KEY={key}" in result.stdout
