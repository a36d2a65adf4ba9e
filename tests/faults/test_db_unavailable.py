"""While the database cannot be reached the API and the pages answer 503 (with Retry-After), not 500; a stalled run
shows as stalled in the API and the run list; a write that fails half-way (disk full) leaves no temp file."""

from __future__ import annotations

import errno
from datetime import timedelta
from pathlib import Path

import numpy as np
import psycopg
import pytest
from django.db import OperationalError, connection
from django.db.backends.postgresql.base import DatabaseWrapper
from django.test import RequestFactory
from django.utils import timezone
from rest_framework.test import APIClient

from mining.models import JobStatus, MiningRun, RunKind
from mining.services import embeddings
from mining.services.embeddings import load_shard, save_shard
from pcapp.views import server_failed


def test_the_api_and_the_pages_answer_503_while_the_database_is_away(transactional_db, staff_user, monkeypatch):
    api = APIClient()
    api.force_authenticate(staff_user)
    from django.test import Client

    page = Client()
    page.force_login(staff_user)
    assert api.get("/api/runs/").status_code == 200

    def refused(self, conn_params):
        raise psycopg.OperationalError("connection to server at 127.0.0.1, port 5432 failed: Connection refused")

    monkeypatch.setattr(DatabaseWrapper, "get_new_connection", refused)
    connection.close()
    try:
        for answer in (api.get("/api/runs/"), api.post("/api/runs/1/cancel/"), page.get("/runs/"), page.get("/")):
            assert answer.status_code == 503, answer.content[:300]
            assert answer["Retry-After"] == "30"
            assert b"the database cannot be reached" in answer.content
        assert api.get("/api/runs/").json()["detail"].startswith("the database cannot be reached")
    finally:
        monkeypatch.undo()
        connection.close()
    assert api.get("/api/runs/").status_code == 200


def test_an_error_outside_the_views_gives_503_too_and_other_errors_500() -> None:
    request = RequestFactory().get("/api/runs/")
    try:
        raise OperationalError("server closed the connection unexpectedly")
    except OperationalError:
        answer = server_failed(request)
    assert answer.status_code == 503 and answer["Retry-After"] == "30"
    try:
        raise ValueError("a bug")
    except ValueError:
        assert server_failed(RequestFactory().get("/runs/")).status_code == 500


@pytest.mark.django_db
def test_a_stalled_run_shows_as_stalled_in_the_api_and_the_run_list(staff_user, staff_client) -> None:
    run = MiningRun.objects.create(
        kind=RunKind.SENTENCE, status=JobStatus.RUNNING, lease_expires_at=timezone.now() - timedelta(seconds=5)
    )
    live = MiningRun.objects.create(
        kind=RunKind.SENTENCE, status=JobStatus.RUNNING, lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
    api = APIClient()
    api.force_authenticate(staff_user)
    body = api.get(f"/api/runs/{run.pk}/").json()
    assert (body["status"], body["state"], body["is_stalled"]) == ("running", "stalled", True)
    body = api.get(f"/api/runs/{live.pk}/").json()
    assert (body["state"], body["is_stalled"]) == ("running", False)
    listed = {r["id"]: r["state"] for r in api.get("/api/runs/").json()["results"]}
    assert listed == {run.pk: "stalled", live.pk: "running"}
    html = staff_client.get("/runs/").content.decode()
    assert f'<tr class="status-stalled" data-run="{run.pk}">' in html
    assert f'<tr class="status-running" data-run="{live.pk}">' in html


def test_a_failed_embedding_cache_write_leaves_no_temp_file(tmp_path: Path, monkeypatch) -> None:
    ids = np.arange(4, dtype=np.int64)
    emb = np.eye(4, dtype=np.float32)
    folder = tmp_path / "cache"
    folder.mkdir()
    path = folder / "shard-00000.npz"
    real = np.savez

    def disk_full(file, **arrays):
        Path(file).write_bytes(b"PK\x03\x04 half a zip")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(embeddings.np, "savez", disk_full)
    with pytest.raises(OSError, match="No space left"):
        save_shard(path, ids, emb)
    assert list(folder.iterdir()) == []
    monkeypatch.setattr(embeddings.np, "savez", real)
    save_shard(path, ids, emb)  # the retry
    assert [p.name for p in folder.iterdir()] == ["shard-00000.npz"]
    assert np.array_equal(load_shard(path, ids), emb)


@pytest.mark.parametrize(
    "code, message", [(errno.EROFS, "Read-only file system"), (errno.ENOSPC, "No space left on device")]
)
def test_a_run_whose_data_folder_fails_fails_clearly_leaves_no_temp_file_and_resumes_on_retry(
    transactional_db, settings, register_encoder, monkeypatch, code, message
) -> None:
    from mining.models import SentencePairCandidate as Cand
    from mining.services.jobs import job_reset_for_retry
    from mining.services.shards import plan, run_dir
    from pcapp.jobs import execute_job
    from tests.factories.mining import inline_sentence_run as _inline
    from tests.factories.mining import sentence_run as _run
    from tests.factories.mining import synthetic_corpus as _synthetic

    settings.PCAPP_SHARD_ROWS = 100
    corpus, encoder = _synthetic(300, register_encoder, seed=7, name=f"disk-{code}")
    ref = _inline(corpus, encoder)
    real = plan.os.replace

    def failing(src, dst):
        if "search" in str(dst):  # the data folder fails in the middle of the run
            raise OSError(code, message)
        return real(src, dst)

    monkeypatch.setattr(plan.os, "replace", failing)
    run = _run(corpus, encoder, enqueue=False)
    execute_job(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.FAILED and message in run.error, run.error
    assert not [p for p in run_dir(run.pk).rglob("*") if ".tmp" in p.name]
    monkeypatch.setattr(plan.os, "replace", real)  # the disk is writable again
    job_reset_for_retry(job=run)
    execute_job(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.SUCCEEDED, run.error
    got = set(Cand.objects.filter(run=run).values_list("src_id", "tgt_id"))
    assert got == set(Cand.objects.filter(run=ref).values_list("src_id", "tgt_id"))
    assert not [p for p in run_dir(run.pk).rglob("*") if ".tmp" in p.name]
