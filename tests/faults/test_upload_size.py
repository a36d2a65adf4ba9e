"""Issue 17, upload size: over PCAPP_MAX_UPLOAD_BYTES by any amount gives the form error on the upload page and 413 on
the API, never a 500, and the file is not written in full first."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.files.uploadhandler import MemoryFileUploadHandler, TemporaryFileUploadHandler
from django.test import Client
from django.urls import reverse

from mining.models import ImportJob

from .conftest import DATA

pytestmark = pytest.mark.django_db
LIMIT = 200


@pytest.fixture
def stored_bytes(monkeypatch) -> list[int]:
    """Bytes that reach Django's own upload handlers (memory or temporary file) in this test."""
    seen = [0]
    for handler in (MemoryFileUploadHandler, TemporaryFileUploadHandler):
        original = handler.receive_data_chunk

        def counting(self, raw_data, start, _original=original):
            seen[0] += len(raw_data)
            return _original(self, raw_data, start)

        monkeypatch.setattr(handler, "receive_data_chunk", counting)
    return seen


def _form(size: int, **extra) -> dict:
    return {
        "name": "big",
        "format": "tsv",
        "src_lang": "en",
        "tgt_lang": "fr",
        "files": [SimpleUploadedFile("big.tsv", b"a\tb\n" * (size // 4) + b"x" * (size % 4))],
        **extra,
    }


@pytest.mark.parametrize("over", [1, 1024 * 1024 + 1, 5 * 1024 * 1024])
def test_upload_page_gives_the_form_error_however_far_over(staff_client, settings, stored_bytes, over):
    """Up to 1 MiB over gave the form error; more than that raised StopUpload through the CSRF check (a 500)."""
    settings.PCAPP_MAX_UPLOAD_BYTES = LIMIT
    response = staff_client.post(reverse("import-start"), _form(LIMIT + over))
    assert response.status_code == 400
    assert b"over the limit of 200 bytes" in response.content and b'<form method="post"' in response.content
    assert ImportJob.objects.count() == 0 and not (settings.PCAPP_DATA_DIR / "uploads").exists()
    assert stored_bytes[0] <= LIMIT


def test_upload_page_over_the_limit_with_csrf_checks_on_is_the_form_error_not_403(staff_user, settings):
    """A browser's CSRF token may come after the file in the body; the refusal does not depend on reading it."""
    settings.PCAPP_MAX_UPLOAD_BYTES = LIMIT
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_user)
    page = client.get(reverse("import-start"))
    token = page.cookies["csrftoken"].value
    for over in (1, 2 * 1024 * 1024):
        response = client.post(reverse("import-start"), {**_form(LIMIT + over), "csrfmiddlewaretoken": token})
        assert response.status_code == 400 and b"over the limit of 200 bytes" in response.content


def test_upload_page_without_csrf_token_under_the_limit_is_still_refused(staff_user, settings):
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_user)
    response = client.post(reverse("import-start"), _form(100))
    assert response.status_code == 403 and ImportJob.objects.count() == 0


@pytest.mark.parametrize("over", [1, 1024 * 1024 + 1, 5 * 1024 * 1024])
def test_api_answers_413_without_writing_the_file(staff_api, settings, stored_bytes, over):
    """The API installed no limit: the file was written in full, then refused with a 400."""
    settings.PCAPP_MAX_UPLOAD_BYTES = LIMIT
    response = staff_api.post("/api/corpora/import/", _form(LIMIT + over), format="multipart")
    assert response.status_code == 413, response.content
    assert "over the limit of 200 bytes" in response.json()["detail"]
    assert ImportJob.objects.count() == 0 and not (settings.PCAPP_DATA_DIR / "uploads").exists()
    assert stored_bytes[0] <= LIMIT


def test_api_under_the_limit_still_imports(staff_api, settings, django_capture_on_commit_callbacks):
    size = (DATA / "admin-en-fr.tsv").stat().st_size
    settings.PCAPP_MAX_UPLOAD_BYTES = size
    with django_capture_on_commit_callbacks(execute=False):
        response = staff_api.post(
            "/api/corpora/import/",
            {
                "name": "fits",
                "format": "tsv",
                "src_lang": "en",
                "tgt_lang": "fr",
                "files": [SimpleUploadedFile("admin-en-fr.tsv", (DATA / "admin-en-fr.tsv").read_bytes())],
            },
            format="multipart",
        )
    assert response.status_code == 202, response.content
