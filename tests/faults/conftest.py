"""Helpers of the fault suite: row counts, an inline import without language-id worker processes, the API client."""

from __future__ import annotations

from pathlib import Path

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from mining.models import Corpus, Document, GoldDocumentPair, GoldSentencePair, ImportJob, Sentence
from mining.services.imports import import_execute, import_job_create

DATA = Path(__file__).resolve().parent.parent / "data" / "import"


def counts() -> tuple[int, int, int, int, int]:
    """Rows of every table an import writes."""
    return (
        Corpus.objects.count(),
        Document.objects.count(),
        Sentence.objects.count(),
        GoldSentencePair.objects.count(),
        GoldDocumentPair.objects.count(),
    )


def run_import(name: str, fmt: str, *paths: str | Path, **options) -> ImportJob:
    """Create and run an import job inline, language id in this process (no worker pool per import)."""
    options.setdefault("langid_workers", 0)
    job = import_job_create(corpus_name=name, fmt=fmt, paths=[str(p) for p in paths], options=options)
    return import_execute(job=job)


@pytest.fixture
def staff_api(staff_user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=staff_user).key}")
    return client
