"""The upload page (staff only), its size limit, the progress page, and an import through a real worker."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from mining.models import Corpus, ImportJob, JobStatus, Sentence
from mining.services.imports import import_execute
from tests.conftest import wait_for

DATA = Path(__file__).resolve().parents[2] / "data" / "import"
pytestmark = pytest.mark.django_db


def upload(name: str) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, (DATA / name).read_bytes())


def test_upload_page_is_staff_only(reviewer_client):
    from django.test import Client

    url = reverse("import-start")
    assert Client().get(url).status_code == 302
    assert reviewer_client.get(url).status_code == 403
    assert reviewer_client.post(url, {"name": "x", "format": "tsv"}).status_code == 403


def test_upload_creates_a_job_that_imports(staff_client, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as enqueued:
        response = staff_client.post(
            reverse("import-start"),
            {
                "name": "uploaded",
                "format": "tsv",
                "files": [upload("admin-en-fr.tsv")],
                "src_lang": "en",
                "tgt_lang": "fr",
                "header": "on",
            },
        )
    assert response.status_code == 302, response.content[:2000]
    job = ImportJob.objects.get()
    assert len(enqueued) == 1 and job.status == JobStatus.PENDING
    import_execute(job=job)
    page = staff_client.get(reverse("import-detail", args=[job.pk]))
    assert "40 gold sentence pairs" in " ".join(page.content.decode().split())
    assert "1 gold document pair;" in " ".join(page.content.decode().split())  # walk: "1 gold document pairs"
    partial = staff_client.get(reverse("import-detail", args=[job.pk]), headers={"HX-Request": "true"})
    assert partial.status_code == 286 and b"<html" not in partial.content


def test_moses_upload_needs_two_files_and_languages(staff_client):
    response = staff_client.post(
        reverse("import-start"), {"name": "m", "format": "moses", "files": [upload("admin.en")], "src_lang": "en"}
    )
    assert response.status_code == 400
    assert b"exactly two files" in response.content and b"need both languages" in response.content


def test_upload_over_the_limit_is_refused_and_nothing_is_stored(staff_client, settings):
    settings.PCAPP_MAX_UPLOAD_BYTES = 200
    response = staff_client.post(
        reverse("import-start"),
        {"name": "big", "format": "tsv", "files": [upload("admin-en-fr.tsv")], "src_lang": "en", "tgt_lang": "fr"},
    )
    assert response.status_code == 400
    assert b"over the limit of 200 bytes" in response.content
    assert ImportJob.objects.count() == 0 and not (settings.PCAPP_DATA_DIR / "uploads").exists()


def test_failed_import_shows_its_error_escaped(staff_client):
    job = ImportJob.objects.create(
        corpus_name="<b>x</b>", format="tsv", status=JobStatus.FAILED, error="file 'a<script>.tsv', line 3: bad"
    )
    page = staff_client.get(reverse("import-detail", args=[job.pk])).content.decode()
    assert "a&lt;script&gt;.tsv" in page and "&lt;b&gt;x&lt;/b&gt;" in page and "<script>" not in page


def test_a_pending_import_page_links_onwards(staff_client):
    job = ImportJob.objects.create(corpus_name="later", format="tsv", status=JobStatus.PENDING)
    page = staff_client.get(reverse("import-detail", args=[job.pk])).content.decode()
    waiting = page[page.index('id="while-pending"') :]
    assert "Waiting for a worker to take it" in waiting
    for name in ("import-list", "corpus-list", "dashboard"):
        assert f'href="{reverse(name)}"' in waiting
    assert f'<a href="{reverse("import-list")}">Imports</a>' in page  # the crumbs


@pytest.mark.worker
def test_import_runs_on_a_real_worker(celery_worker_process, staff_user):
    from django.core.management import call_command

    call_command(
        "import_corpus", "via-worker", "tmx", str(DATA / "admin-en-de.tmx"), "--src", "en", "--tgt", "de", "--async"
    )
    assert wait_for(lambda: ImportJob.objects.filter(status=JobStatus.SUCCEEDED).exists(), timeout=90), (
        ImportJob.objects.values_list("status", "error")
    )
    corpus = Corpus.objects.get(name="via-worker")
    assert Sentence.objects.filter(corpus=corpus).count() == 50


def test_load_demo_imports_django_catalogues_once():
    from django.core.management import call_command

    call_command("load_demo", "--langs", "fr")
    corpus = Corpus.objects.get(name="demo-django-ui")
    assert corpus.languages == ["en", "fr"] and corpus.stats["gold_sentence_pairs"] > 300
    call_command("load_demo", "--langs", "fr")
    assert Corpus.objects.count() == 1
