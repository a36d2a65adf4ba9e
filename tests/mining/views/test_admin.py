"""Django admin: every mining model is registered; runs start, cancel and re-run through the services."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.urls import reverse
from django.utils import timezone

from mining.models import JobStatus, MiningRun
from tests.factories.mining import CorpusFactory, MiningRunFactory, SentencePairCandidateFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client_(client, django_user_model):
    user = django_user_model.objects.create_superuser("root", "root@example.com", "pw-root-123")
    client.force_login(user)
    return client


def test_mining_models_registered():
    from django.apps import apps

    for model in apps.get_app_config("mining").get_models():
        assert admin.site.is_registered(model), model


def test_start_run_from_admin(admin_client_, django_capture_on_commit_callbacks, monkeypatch):
    corpus = CorpusFactory(languages=["en", "de"])
    sent = []
    monkeypatch.setattr("mining.services.runs.send_run_task", lambda run_id: sent.append(run_id))
    url = reverse("admin:mining_miningrun_start")
    assert admin_client_.get(reverse("admin:mining_miningrun_add")).headers["Location"] == url
    assert "admin-run-start" in admin_client_.get(url, {"src_corpus": corpus.pk}).content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client_.post(
            url,
            {
                "kind": "sentence",
                "src_corpus": corpus.pk,
                "src_lang": "en",
                "tgt_lang": "de",
                "knn": "exact",
                "margin": "ratio",
                "k": "4",
                "strategy": "max_score",
                "filters": "on",
            },
        )
    run = MiningRun.objects.get()
    assert response.status_code == 302 and sent == [run.pk]
    assert run.params["k"] == 4 and run.tgt_lang == "de"


def test_admin_cancel_and_retry_actions(admin_client_, django_capture_on_commit_callbacks, monkeypatch):
    monkeypatch.setattr("mining.services.runs.send_run_task", lambda run_id: None)
    pending = MiningRunFactory(status=JobStatus.PENDING)
    failed = MiningRunFactory(status=JobStatus.FAILED, error="x", finished_at=timezone.now())
    url = reverse("admin:mining_miningrun_changelist")
    admin_client_.post(url, {"action": "cancel_runs", "_selected_action": [pending.pk]})
    with django_capture_on_commit_callbacks(execute=True):
        admin_client_.post(url, {"action": "retry_runs", "_selected_action": [failed.pk]})
    pending.refresh_from_db()
    failed.refresh_from_db()
    assert pending.status == JobStatus.CANCELLED
    assert failed.status == JobStatus.PENDING and failed.error == ""


def test_admin_changelists_render(admin_client_):
    cand = SentencePairCandidateFactory()
    run, corpus = cand.run, cand.run.src_corpus
    shown = {
        "corpus": corpus.name,
        "sentence": cand.src.text,
        "miningrun": str(run),
        "sentencepaircandidate": f"/admin/mining/sentencepaircandidate/{cand.pk}/change/",
    }
    for name, text in shown.items():
        response = admin_client_.get(reverse(f"admin:mining_{name}_changelist"))
        assert response.status_code == 200
        assert text in response.content.decode(), (name, text)
    change = admin_client_.get(reverse("admin:mining_miningrun_change", args=[run.pk])).content.decode()
    assert f"<title>{run} | Change mining run" in change


def test_every_mining_changelist_renders(admin_client_):
    from django.apps import apps

    for model in apps.get_app_config("mining").get_models():
        url = reverse(f"admin:mining_{model._meta.model_name}_changelist")
        assert admin_client_.get(url).status_code == 200, url


def test_admin_combines_selected_encoders(admin_client_):
    from mining.models import Artefact, ArtefactKind

    a = Artefact.objects.create(kind=ArtefactKind.ENCODER, name="usem3", version=1, params={"builtin": True})
    b = Artefact.objects.create(kind=ArtefactKind.ENCODER, name="usem3", version=2, params={"builtin": True})
    url = reverse("admin:mining_artefact_changelist")
    admin_client_.post(url, {"action": "combine_encoders", "_selected_action": [a.pk]})
    assert not Artefact.objects.filter(name="combined").exists()  # one encoder: an error message, nothing stored
    response = admin_client_.post(url, {"action": "combine_encoders", "_selected_action": [a.pk, b.pk]}, follow=True)
    combined = Artefact.objects.get(name="combined")
    assert [m["artefact"] for m in combined.params["members"]] == ["usem3:1", "usem3:2"]
    assert "Registered encoder combined:1" in response.content.decode()
