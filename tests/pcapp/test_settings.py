"""Settings come from the environment, and Postgres is the database."""

from django.conf import settings
from django.db import connection


def test_database_is_postgres(db):
    assert connection.vendor == "postgresql"


def test_data_dir_is_a_path():
    assert settings.PCAPP_DATA_DIR.is_absolute()
