"""Cancel has immediate effect for every kind of run: the API answers "cancelled" and the run page shows it at once;
the worker stops at its next progress check, leaves the cancelled status (and its time) as it is, and writes no
results. A run cancelled after its last check (while it writes) has what it wrote removed.

The runs execute in this process with their real handlers (pcapp.jobs.execute_job, as a worker does); the cancel
is sent through the API from inside the run's first progress report.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from mining.models import (
    Artefact,
    Corpus,
    DocumentPairCandidate,
    JobStatus,
    MiningRun,
    RunKind,
    SentencePairCandidate,
)
from mining.services import progress
from mining.services.imports import import_execute, import_job_create
from mining.services.runs import run_create
from pcapp.jobs import execute_job
from tests.factories.mining import gold_corpus

DATA = Path(__file__).resolve().parents[1] / "data" / "import"
TRAIN = {"epochs": 1, "hard_epochs": 0, "hard_negatives": 2, "batch_size": 8, "n_buckets": 1024, "seed": 1}


def _docs() -> Corpus:
    job = import_execute(job=import_job_create(corpus_name="docs", fmt="jsonl", paths=[str(DATA / "admin-docs.jsonl")]))
    assert job.status == JobStatus.SUCCEEDED, job.error
    return job.corpus


def _setup(kind: str) -> dict:
    """run_create arguments of a small run of `kind` (with what it needs made first)."""
    pair = {"src_lang": "en", "tgt_lang": "fr"}
    if kind == RunKind.SENTENCE:
        return {"src_corpus": gold_corpus("cancel-sent"), **pair}
    if kind == RunKind.DOCUMENT:
        return {"src_corpus": _docs(), "params": {"k": 2}, **pair}
    if kind == RunKind.ALIGN:
        corpus = _docs()
        parent = run_create(kind=RunKind.DOCUMENT, src_corpus=corpus, params={"k": 2}, enqueue=False, **pair)
        execute_job(run=parent)
        parent.refresh_from_db()
        assert parent.status == JobStatus.SUCCEEDED, parent.error
        return {"src_corpus": corpus, "parent": parent, **pair}
    if kind == RunKind.TRAIN_ENCODER:
        return {"src_corpus": gold_corpus("cancel-train"), "params": TRAIN, **pair}
    if kind == RunKind.SELF_TRAIN:
        call_command("load_demo", "--langs", "fr")
        return {"src_corpus": Corpus.objects.get(name="demo-django-ui"), "params": {"rounds": 1, "epochs": 1}, **pair}
    raise AssertionError(kind)


def _results(run: MiningRun) -> tuple[int, int, int]:
    return (
        SentencePairCandidate.objects.filter(run_id=run.pk).count(),
        DocumentPairCandidate.objects.filter(run_id=run.pk).count(),
        Artefact.objects.exclude(path="").count(),  # trained models (a built-in encoder may get its row)
    )


def _cancel_at_first_report(monkeypatch, staff_user, run: MiningRun) -> dict:
    """From the run's first progress report on, the run is cancelled through the API; what the API and the run's
    page said at that moment is recorded."""
    api = APIClient()
    api.force_authenticate(staff_user)
    seen: dict = {}
    update = progress.ProgressReporter.update

    def cancelling(self, **kwargs):
        if not seen and self._pk == run.pk:
            seen["api"] = api.post(f"/api/runs/{run.pk}/cancel/").json()["status"]
            stored = MiningRun.objects.get(pk=run.pk)
            seen["status"], seen["finished_at"] = stored.status, stored.finished_at
            api.force_login(staff_user)
            seen["page"] = api.get(reverse("run-progress", args=[run.pk]), HTTP_HX_REQUEST="true").content.decode()
        return update(self, **kwargs)

    monkeypatch.setattr(progress.ProgressReporter, "update", cancelling)
    return seen


KINDS = [RunKind.SENTENCE, RunKind.DOCUMENT, RunKind.ALIGN, RunKind.TRAIN_ENCODER, RunKind.SELF_TRAIN]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", KINDS)
def test_a_running_run_of_any_kind_is_cancelled_at_once_and_its_worker_stops(kind, monkeypatch, staff_user) -> None:
    run = run_create(kind=kind, enqueue=False, **_setup(kind))
    before = _results(run)
    seen = _cancel_at_first_report(monkeypatch, staff_user, run)

    outcome = execute_job(run=run)

    assert seen["api"] == seen["status"] == JobStatus.CANCELLED and seen["finished_at"] is not None
    assert 'data-status="cancelled"' in seen["page"] and "every 1s" not in seen["page"]  # polling stopped
    assert outcome["status"] == "cancelled"
    run.refresh_from_db()
    assert (run.status, run.error, run.finished_at) == (JobStatus.CANCELLED, "cancelled by user", seen["finished_at"])
    assert _results(run) == before  # nothing written after the cancel


@pytest.mark.django_db
@pytest.mark.parametrize("kind", [RunKind.DOCUMENT, RunKind.TRAIN_ENCODER])
def test_a_run_cancelled_while_it_writes_keeps_no_results(kind, monkeypatch, staff_user) -> None:
    """Here the worker's own progress connection cannot see this test's uncommitted run, so the run goes on to its
    end as one cancelled after its last progress check does: finishing is refused and what it wrote goes."""
    run = run_create(kind=kind, enqueue=False, **_setup(kind))
    before = _results(run)
    seen = _cancel_at_first_report(monkeypatch, staff_user, run)

    outcome = execute_job(run=run)

    assert seen["status"] == JobStatus.CANCELLED and outcome["status"] == "cancelled"
    run.refresh_from_db()
    assert (run.status, run.finished_at) == (JobStatus.CANCELLED, seen["finished_at"])
    assert _results(run) == before
