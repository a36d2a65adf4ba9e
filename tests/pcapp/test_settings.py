"""Settings come from the environment, and Postgres is the database."""

from django.conf import settings
from django.db import connection


def test_database_is_postgres(db):
    assert connection.vendor == "postgresql"


def test_data_dir_is_a_path():
    assert settings.PCAPP_DATA_DIR.is_absolute()


def test_import_limits_come_from_the_environment(tmp_path):
    """PCAPP_MAX_SENTENCE_CHARS and PCAPP_UPLOAD_RETENTION_HOURS are read from the environment (defaults 2000, 24)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    probe = (
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.PCAPP_MAX_SENTENCE_CHARS, settings.PCAPP_UPLOAD_RETENTION_HOURS)"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "pcapp.settings",
        "PCAPP_DATA_DIR": str(tmp_path),
        "PCAPP_MAX_SENTENCE_CHARS": "123",
        "PCAPP_UPLOAD_RETENTION_HOURS": "0.5",
    }
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", probe], cwd=root, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["123", "0.5"]
    assert (settings.PCAPP_MAX_SENTENCE_CHARS, settings.PCAPP_UPLOAD_RETENTION_HOURS) == (2000, 24.0)
