"""Issue 17, housekeeping: an upload is removed when its import job succeeds or fails (the stored corpus is the
record), leftovers go after PCAPP_UPLOAD_RETENTION_HOURS (`manage.py cleanup_uploads`, also run by `./run app`), and
messages name the uploaded file's own name, never the server's upload path."""

from __future__ import annotations

import io
import os
import time
import zipfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from mining.models import Document, ImportJob, JobStatus
from mining.services.imports import import_execute, import_retry
from mining.services.jobs import JobStateError

from .conftest import DATA

pytestmark = pytest.mark.django_db


def _uploads(settings) -> list[Path]:
    root = settings.PCAPP_DATA_DIR / "uploads"
    return sorted(root.iterdir()) if root.exists() else []


def _post(client, name: str, content: bytes, fmt: str = "tsv", **extra):
    # The job is enqueued on commit, which never comes inside the test's transaction; the tests run it inline.
    return client.post(
        reverse("import-start"), {"name": "c", "format": fmt, "files": [SimpleUploadedFile(name, content)], **extra}
    )


def test_upload_is_removed_when_its_import_succeeds(staff_client, settings):
    response = _post(
        staff_client, "admin-en-fr.tsv", (DATA / "admin-en-fr.tsv").read_bytes(), src_lang="en", tgt_lang="fr"
    )
    assert response.status_code == 302
    assert len(_uploads(settings)) == 1
    job = import_execute(job=ImportJob.objects.get())
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert _uploads(settings) == []
    # The documents are named after the file as uploaded, not its name on the server.
    assert set(Document.objects.values_list("external_id", flat=True)) == {"admin-en-fr.tsv"}


def test_failed_import_removes_the_upload_and_names_the_file_as_uploaded(staff_client, settings):
    response = _post(staff_client, "mine.tsv", b"Hello.\tBonjour.\nonly one column\n", src_lang="en", tgt_lang="fr")
    assert response.status_code == 302
    job = import_execute(job=ImportJob.objects.get())
    assert job.status == JobStatus.FAILED
    assert job.error.startswith("file 'mine.tsv', line 2: expected 2 tab-separated columns"), job.error
    assert str(settings.PCAPP_DATA_DIR) not in job.error and "uploads" not in job.error
    assert _uploads(settings) == []
    # Every page that shows the error shows the same text.
    for url in (reverse("import-detail", args=[job.pk]), reverse("import-list"), reverse("dashboard")):
        page = staff_client.get(url).content.decode()
        assert "uploads/" not in page and str(settings.PCAPP_DATA_DIR) not in page
    assert (
        "file &#x27;mine.tsv&#x27;, line 2"
        in staff_client.get(reverse("import-detail", args=[job.pk])).content.decode()
    )


def test_upload_refused_before_its_job_is_created_is_removed_and_named(staff_client, settings):
    """A zip that does not unpack (here: a member pointing outside the folder) is refused on the page."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("../../evil.txt", "x")
    response = _post(staff_client, "docs.zip", buffer.getvalue(), fmt="folder")
    assert response.status_code == 400
    content = response.content.decode()
    assert "file &#x27;docs.zip&#x27;" in content and "points outside the folder" in content
    assert "00-docs.zip" not in content and str(settings.PCAPP_DATA_DIR) not in content
    assert ImportJob.objects.count() == 0 and _uploads(settings) == []


def test_folder_upload_errors_name_the_zip_and_member(staff_client, settings):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("en/a.txt", "Fine.\n")
        zf.writestr("fr/a.txt", b"Bad \xe9 byte.\n")
    assert _post(staff_client, "docs.zip", buffer.getvalue(), fmt="folder").status_code == 302
    job = import_execute(job=ImportJob.objects.get())
    assert job.status == JobStatus.FAILED
    assert job.error.startswith("file 'docs.zip/fr/a.txt', line 1: bytes b'\\xe9'"), job.error
    assert _uploads(settings) == []


def test_api_failure_removes_the_upload_and_names_the_file(staff_api, settings, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        response = staff_api.post(
            "/api/corpora/import/",
            {"name": "x", "format": "po", "files": [SimpleUploadedFile("fr.po", b'msgid "a"\nmsgstr "b')]},
            format="multipart",
        )
    assert response.status_code == 202
    job = import_execute(job=ImportJob.objects.get())
    assert job.status == JobStatus.FAILED and "file 'fr.po'" in job.error and "uploads" not in job.error
    assert staff_api.get(f"/api/imports/{job.pk}/").json()["error"] == job.error
    assert _uploads(settings) == []


def _folder(root: Path, name: str, age_hours: float) -> Path:
    folder = root / name
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "f.txt").write_text("x")
    then = time.time() - age_hours * 3600
    for path in (folder / "sub" / "f.txt", folder / "sub", folder):
        os.utime(path, (then, then))
    return folder


def test_cleanup_uploads_removes_old_leftovers_but_not_a_waiting_job(settings):
    settings.PCAPP_UPLOAD_RETENTION_HOURS = 24
    root = settings.PCAPP_DATA_DIR / "uploads"
    old = _folder(root, "a" * 32, 48)
    fresh = _folder(root, "b" * 32, 1)
    waiting = _folder(root, "c" * 32, 48)
    ImportJob.objects.create(corpus_name="w", format="tsv", paths=[str(waiting / "sub" / "f.txt")])
    (root / "stray.txt").write_text("not a folder of ours")
    out = io.StringIO()
    call_command("cleanup_uploads", stdout=out)
    assert sorted(p.name for p in root.iterdir()) == sorted([fresh.name, waiting.name, "stray.txt"])
    assert "Removed 1 upload folder" in out.getvalue() and old.name not in os.listdir(root)
    call_command("cleanup_uploads", "--older-than", "0", stdout=io.StringIO())
    assert sorted(p.name for p in root.iterdir()) == sorted([waiting.name, "stray.txt"])


def test_cleanup_uploads_on_a_fresh_install_does_nothing(settings):
    out = io.StringIO()
    call_command("cleanup_uploads", stdout=out)
    assert "Removed 0 upload folders" in out.getvalue()


def test_running_an_ended_upload_job_again_says_the_upload_is_gone(staff_client, settings):
    """A failed job is not run again by a second delivery of its task; a retry is refused once its upload is gone,
    naming the file as it was uploaded."""
    _post(staff_client, "mine.tsv", b"bad line\n", src_lang="en", tgt_lang="fr")
    job = import_execute(job=ImportJob.objects.get())
    assert job.status == JobStatus.FAILED and _uploads(settings) == []
    error = job.error
    again = import_execute(job=job)
    assert (again.status, again.error) == (JobStatus.FAILED, error)
    with pytest.raises(JobStateError) as refused:
        import_retry(job=job)
    assert (
        str(refused.value) == f"import {job.pk} cannot be retried: its input is gone (mine.tsv); upload the files again"
    )
    assert "/" not in str(refused.value)
