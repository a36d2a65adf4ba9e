"""Import jobs share the job life cycle: a broker that is down at upload time gives a clear 503 and a failed job
whose upload is kept, which a retry then imports; a job whose input is gone cannot be retried and says why; a
stalled import (its worker died) can be retried."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from mining.models import Corpus, ImportJob, JobStatus
from mining.services.imports import import_execute, import_job_create, import_retry
from mining.services.jobs import JobStateError

DATA = Path(__file__).resolve().parents[1] / "data" / "import"


@pytest.mark.django_db(transaction=True)
def test_broker_down_at_upload_is_503_then_retry_imports_the_kept_upload(staff_api, broker_down, monkeypatch) -> None:
    from pcapp.celery import app

    with (DATA / "admin-en-fr.tsv").open("rb") as fh:
        answer = staff_api.post(
            "/api/corpora/import/",
            {"name": "nobroker", "format": "tsv", "files": fh, "src_lang": "en", "tgt_lang": "fr", "header": True},
            format="multipart",
        )
    assert answer.status_code == 503, answer.content
    assert "could not be reached" in answer.json()["detail"]
    job = ImportJob.objects.get()
    assert job.status == JobStatus.FAILED and "Retry it once the broker is back" in job.error
    assert all(Path(p).exists() for p in job.paths)  # the upload is kept for the retry

    sent: list[list] = []
    monkeypatch.setattr(app, "send_task", lambda name, args=None, **kw: sent.append([name, args]))  # broker back
    retried = staff_api.post(reverse("api-import-retry", args=[job.pk]))
    assert retried.status_code == 202, retried.content
    assert sent == [["mining.import_corpus", [job.pk]]]
    job.refresh_from_db()
    assert (job.status, job.error) == (JobStatus.PENDING, "")
    job = import_execute(job=job)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert (job.progress, job.done) == (1.0, job.total)
    assert Corpus.objects.get(name="nobroker").stats["sentences"] > 0
    assert not any(Path(p).exists() for p in job.paths)  # removed once the import ran


@pytest.mark.django_db
def test_an_import_whose_input_is_gone_cannot_be_retried(tmp_path) -> None:
    gone = tmp_path / "gone.tsv"
    gone.write_text((DATA / "admin-en-fr.tsv").read_text())
    job = import_job_create(
        corpus_name="gone", fmt="tsv", paths=[str(gone)], options={"src_lang": "en", "tgt_lang": "fr", "header": True}
    )
    ImportJob.objects.filter(pk=job.pk).update(status=JobStatus.FAILED)
    gone.unlink()
    job.refresh_from_db()
    with pytest.raises(JobStateError, match="cannot be retried: its input is gone"):
        import_retry(job=job)
    assert ImportJob.objects.get(pk=job.pk).status == JobStatus.FAILED


@pytest.mark.django_db
def test_a_stalled_import_is_taken_over_and_a_live_one_is_not_run_twice() -> None:
    job = import_job_create(
        corpus_name="stalled",
        fmt="tsv",
        paths=[str(DATA / "admin-en-fr.tsv")],
        options={"src_lang": "en", "tgt_lang": "fr", "header": True, "langid_workers": 0},
    )
    live = timezone.now() + timedelta(minutes=5)
    ImportJob.objects.filter(pk=job.pk).update(status=JobStatus.RUNNING, lease_owner="other:1", lease_expires_at=live)
    job.refresh_from_db()
    assert import_execute(job=job).status == JobStatus.RUNNING  # held by a live worker: left alone
    assert not Corpus.objects.filter(name="stalled").exists()
    ImportJob.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    job.refresh_from_db()
    assert job.is_stalled and job.can_retry
    assert import_execute(job=job).status == JobStatus.SUCCEEDED
    assert Corpus.objects.filter(name="stalled").exists()
