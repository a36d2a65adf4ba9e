"""The import API: staff upload with token auth, reviewers refused, clear 400s."""

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from mining.models import ImportJob

DATA = Path(__file__).resolve().parents[2] / "data" / "import"
pytestmark = pytest.mark.django_db


def _client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def test_staff_starts_an_import_and_reads_its_status(staff_user, django_capture_on_commit_callbacks):
    client = _client(staff_user)
    with django_capture_on_commit_callbacks() as enqueued:
        response = client.post(
            "/api/corpora/import/",
            {
                "name": "api-corpus",
                "format": "moses",
                "src_lang": "en",
                "tgt_lang": "fr",
                "files": [
                    SimpleUploadedFile("a.en", (DATA / "admin.en").read_bytes()),
                    SimpleUploadedFile("a.fr", (DATA / "admin.fr").read_bytes()),
                ],
            },
            format="multipart",
        )
    assert response.status_code == 202, response.content
    assert len(enqueued) == 1
    job_id = response.json()["id"]
    status = client.get(f"/api/imports/{job_id}/").json()
    assert status["status"] == "pending" and status["format"] == "moses"


def test_reviewer_cannot_import(reviewer_user):
    response = _client(reviewer_user).post("/api/corpora/import/", {"name": "x", "format": "tsv"}, format="multipart")
    assert response.status_code == 403
    assert ImportJob.objects.count() == 0


def test_bad_language_is_a_400_naming_it(staff_user):
    response = _client(staff_user).post(
        "/api/corpora/import/",
        {
            "name": "x",
            "format": "tsv",
            "src_lang": "en",
            "tgt_lang": "klingon",
            "files": [SimpleUploadedFile("a.tsv", (DATA / "admin-en-fr.tsv").read_bytes())],
        },
        format="multipart",
    )
    assert response.status_code == 400 and "unknown language code 'klingon'" in response.json()["detail"]


def test_a_crawl_is_imported_by_path_only_under_the_allowed_folders(staff_user, settings, tmp_path):
    from mining.services.imports import import_execute

    from ..importers.crawl_warc import EN, Warc, page

    crawls = Path(settings.PCAPP_DATA_DIR) / "crawls"
    crawls.mkdir(parents=True)
    w = Warc(crawls / "a.warc.gz")
    w.response("https://s.org/en/a", page("A", EN))
    w.close()
    client = _client(staff_user)
    response = client.post(
        "/api/corpora/import/",
        {"name": "c", "format": "warc", "paths": [str(crawls / "a.warc.gz")]},
        format="multipart",
    )
    assert response.status_code == 202, response.content
    job = import_execute(job=ImportJob.objects.get(pk=response.json()["id"]))
    assert job.status == "succeeded", job.error
    status = client.get(f"/api/imports/{job.pk}/").json()
    assert [(p["part_no"], p["status"], p["stats"]["documents"]) for p in status["parts"]] == [(0, "succeeded", 1)]
    outside = tmp_path / "b.warc.gz"
    outside.write_bytes((crawls / "a.warc.gz").read_bytes())
    response = client.post(
        "/api/corpora/import/", {"name": "d", "format": "warc", "paths": [str(outside)]}, format="multipart"
    )
    assert response.status_code == 400
    assert "is not under a folder imports may read from" in response.json()["detail"]
    both = client.post("/api/corpora/import/", {"name": "e", "format": "warc"}, format="multipart")
    assert both.status_code == 400 and "either files" in str(both.json())


def test_an_uploaded_zip_of_saved_pages_is_unpacked_by_the_task(staff_user, tmp_path):
    """The request only checks the zip's directory; the import task unpacks it and imports its pages."""
    import io
    import zipfile

    from mining.models import Document
    from mining.services.imports import import_execute

    from ..importers.crawl_warc import EN, FR, page

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("saved/www.example.org/en/a.html", page("A", EN))
        zf.writestr("saved/www.example.org/fr/a.html", page("A", FR))
    client = _client(staff_user)
    response = client.post(
        "/api/corpora/import/",
        {"name": "saved", "format": "html", "files": [SimpleUploadedFile("site.zip", buf.getvalue())]},
        format="multipart",
    )
    assert response.status_code == 202, response.content
    job = ImportJob.objects.get(pk=response.json()["id"])
    assert job.paths[0].endswith("site.zip")  # saved as uploaded, not unpacked in the request
    job = import_execute(job=job)
    assert job.status == "succeeded", job.error
    got = sorted(Document.objects.filter(corpus=job.corpus).values_list("url", "lang"))
    assert got == [("http://www.example.org/en/a.html", "en"), ("http://www.example.org/fr/a.html", "fr")]
