"""Run pages: start form (staff only, validated), run page with polling progress, cancel and re-run."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from mining.models import Artefact, JobStatus, MiningRun, RunKind
from mining.selectors import run_progress
from tests.factories.mining import CorpusFactory, MiningRunFactory

pytestmark = pytest.mark.django_db


def _form(corpus, **over):
    data = {
        "kind": "sentence",
        "src_corpus": corpus.pk,
        "src_lang": "en",
        "tgt_lang": "fr",
        "knn": "ivf",
        "margin": "distance",
        "k": "6",
        "strategy": "intersection",
        "threshold": "1.05",
        "filters": "on",
    }
    data.update(over)
    return data


def test_start_form_creates_run_with_params_and_enqueues(
    staff_client, staff_user, django_capture_on_commit_callbacks, monkeypatch
):
    corpus = CorpusFactory(languages=["en", "fr"])
    sent = []
    monkeypatch.setattr("mining.services.runs.send_run_task", lambda run_id: sent.append(run_id))
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(reverse("run-start"), _form(corpus))
    run = MiningRun.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("run-detail", args=[run.pk])
    assert sent == [run.pk]
    assert run.kind == RunKind.SENTENCE and run.created_by == staff_user
    assert (run.src_corpus, run.tgt_corpus, run.src_lang, run.tgt_lang) == (corpus, corpus, "en", "fr")
    assert run.params == {
        "knn": "ivf",
        "margin": "distance",
        "k": 6,
        "strategy": "intersection",
        "threshold": 1.05,
        "filters": True,
        "nprobe": 16,
        "index": "auto",
        "site": "",
        "rescore": "none",
    }
    assert run.encoder == Artefact.objects.get(kind="encoder", name="usem3", version=1)


def test_start_form_rejects_language_missing_from_corpus(staff_client):
    corpus = CorpusFactory(languages=["en", "fr"])
    CorpusFactory(languages=["de"])
    response = staff_client.post(reverse("run-start"), _form(corpus, tgt_lang="de"))
    assert response.status_code == 200
    assert response.context["form"].errors["tgt_lang"]
    assert not MiningRun.objects.exists()


def test_start_form_choices_list_corpus_languages(staff_client):
    CorpusFactory(languages=["en", "it"])
    html = staff_client.get(reverse("run-start")).content.decode()
    assert '<option value="it">it</option>' in html
    assert "csrfmiddlewaretoken" in html


def test_reviewer_cannot_start_or_cancel(reviewer_client):
    corpus = CorpusFactory()
    run = MiningRunFactory(status=JobStatus.RUNNING)
    assert reviewer_client.get(reverse("run-start")).status_code == 403
    assert reviewer_client.post(reverse("run-start"), _form(corpus)).status_code == 403
    assert reviewer_client.post(reverse("run-cancel", args=[run.pk])).status_code == 403
    run.refresh_from_db()
    assert not run.cancel_requested


def test_anonymous_is_sent_to_login(client):
    run = MiningRunFactory()
    response = client.get(reverse("run-detail", args=[run.pk]))
    assert response.status_code == 302 and reverse("login") in response["Location"]


def test_run_page_polls_while_running(reviewer_client):
    run = MiningRunFactory(
        status=JobStatus.RUNNING,
        stage="knn",
        done=30,
        total=120,
        started_at=timezone.now() - timedelta(seconds=10),
        timings={"embed-src": 4.0},
    )
    html = reviewer_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert 'id="run-progress"' in html and 'hx-trigger="every 1s"' in html
    assert reverse("run-progress", args=[run.pk]) in html
    assert "<html" in html and "30" in html and "120" in html
    # No overall share reported yet: the bar is the current stage's, named in words.
    assert "nearest neighbours: 30 / 120 (25 % of this stage)" in html
    assert 'id="cancel-run"' not in html  # reviewers see no staff buttons


def test_progress_partial_keeps_polling_then_stops_with_286(staff_client):
    run = MiningRunFactory(status=JobStatus.RUNNING, stage="embed-src", done=5, total=10, started_at=timezone.now())
    url = reverse("run-progress", args=[run.pk])
    running = staff_client.get(url, HTTP_HX_REQUEST="true")
    body = running.content.decode()
    assert running.status_code == 200
    assert body.lstrip().startswith('<section id="run-progress"') and "<html" not in body
    assert 'hx-trigger="every 1s"' in body and 'id="cancel-run"' in body

    MiningRun.objects.filter(pk=run.pk).update(
        status=JobStatus.SUCCEEDED, finished_at=timezone.now(), stats={"candidates": 7}
    )
    done = staff_client.get(url, HTTP_HX_REQUEST="true")
    assert done.status_code == 286
    assert "hx-trigger" not in done.content.decode()
    assert reverse("run-results", args=[run.pk]) in done.content.decode()


def test_failed_run_shows_escaped_error_and_rerun_button(staff_client):
    run = MiningRunFactory(
        status=JobStatus.FAILED,
        error="ValueError: <script>alert(1)</script>",
        started_at=timezone.now(),
        finished_at=timezone.now(),
    )
    html = staff_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html
    assert 'id="retry-run"' in html and "hx-trigger" not in html


def test_cancel_pending_run(staff_client):
    run = MiningRunFactory(status=JobStatus.PENDING)
    response = staff_client.post(reverse("run-cancel", args=[run.pk]))
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == JobStatus.CANCELLED and run.cancel_requested


def test_cancel_requires_post(staff_client):
    run = MiningRunFactory(status=JobStatus.PENDING)
    assert staff_client.get(reverse("run-cancel", args=[run.pk])).status_code == 405


def test_retry_failed_run_requeues(staff_client, django_capture_on_commit_callbacks, monkeypatch):
    run = MiningRunFactory(status=JobStatus.FAILED, error="boom", finished_at=timezone.now())
    sent = []
    monkeypatch.setattr("mining.services.runs.send_run_task", lambda run_id: sent.append(run_id))
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(reverse("run-retry", args=[run.pk]), HTTP_HX_REQUEST="true")
    assert response.headers["HX-Redirect"] == reverse("run-detail", args=[run.pk])
    run.refresh_from_db()
    assert run.status == JobStatus.PENDING and run.error == "" and sent == [run.pk]


def test_retry_of_succeeded_run_is_refused(staff_client):
    run = MiningRunFactory(status=JobStatus.SUCCEEDED)
    staff_client.post(reverse("run-retry", args=[run.pk]))
    run.refresh_from_db()
    assert run.status == JobStatus.SUCCEEDED


def test_run_progress_rate_uses_current_stage_time():
    now = timezone.now()
    run = MiningRunFactory.build(
        status=JobStatus.RUNNING,
        stage="knn",
        done=50,
        total=100,
        started_at=now - timedelta(seconds=30),
        timings={"embed-src": 20.0},
    )
    p = run_progress(run=run, now=now)
    assert p.elapsed_s == pytest.approx(30.0)
    assert p.rate == pytest.approx(5.0)  # 50 done in the 10 s since embed-src finished
    assert p.percent == pytest.approx(50.0) and not p.finished


def test_run_list_page(reviewer_client):
    MiningRunFactory(name="my-special-run", stats={"candidates": 1234})
    html = reviewer_client.get(reverse("run-list")).content.decode()
    assert "my-special-run" in html and "1234" in html


def test_start_form_renders_each_field_once(staff_client):
    CorpusFactory(languages=["en", "fr"])
    html = staff_client.get(reverse("run-start")).content.decode()
    for name in ("k", "kind", "knn", "src_lang", "threshold", "filters"):
        assert html.count(f'name="{name}"') == 1, name


def test_picking_a_corpus_offers_only_its_languages(staff_client):
    CorpusFactory(languages=["de", "it"])
    corpus = CorpusFactory(languages=["en", "es"])
    response = staff_client.get(reverse("run-start"), {"src_corpus": corpus.pk, "k": "7"}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert html.lstrip().startswith('<form method="post"') and "<html" not in html
    assert '<option value="es"' in html and '<option value="de"' not in html
    assert 'value="7"' in html  # the other values survive the refresh
    assert '<option value="es" selected>' in html  # the target defaults to the other language


def test_user_without_role_sees_no_runs(client, other_user):
    run = MiningRunFactory(name="secret-run")
    client.force_login(other_user)
    for url in (
        reverse("run-detail", args=[run.pk]),
        reverse("run-results", args=[run.pk]),
        reverse("run-list"),
        reverse("run-compare"),
    ):
        assert client.get(url).status_code == 403, url
    html = client.get(reverse("dashboard")).content.decode()
    assert 'id="no-role"' in html and "secret-run" not in html


def test_document_run_gets_its_method(staff_client, django_capture_on_commit_callbacks, monkeypatch):
    corpus = CorpusFactory(languages=["en", "fr"])
    monkeypatch.setattr("mining.services.runs.send_run_task", lambda run_id: None)
    with django_capture_on_commit_callbacks(execute=True):
        staff_client.post(reverse("run-start"), _form(corpus, kind="document", method="sentence_vote"))
    run = MiningRun.objects.get()
    assert run.kind == RunKind.DOCUMENT and run.params["method"] == "sentence_vote"


def test_alignment_run_needs_a_document_run(staff_client):
    corpus = CorpusFactory(languages=["en", "fr"])
    response = staff_client.post(reverse("run-start"), _form(corpus, kind="align"))
    assert response.context["form"].errors["parent"]
    doc_run = MiningRunFactory(kind=RunKind.DOCUMENT, src_corpus=corpus, status=JobStatus.SUCCEEDED)
    response = staff_client.post(reverse("run-start"), _form(corpus, kind="align", parent=doc_run.pk))
    assert response.status_code == 302
    assert MiningRun.objects.get(kind=RunKind.ALIGN).parent == doc_run


@pytest.mark.parametrize(
    ("fields", "percent", "overall", "label"),
    [
        ({"status": JobStatus.SUCCEEDED, "done": 519, "total": 519, "progress": 1.0}, 100.0, True, "done"),
        # A finished run that never reported progress still shows 100 %, never "0/519".
        ({"status": JobStatus.SUCCEEDED, "done": 0, "total": 519, "progress": 0.0}, 100.0, True, "done"),
        ({"status": JobStatus.PENDING}, None, True, "queued"),
        (
            {"status": JobStatus.RUNNING, "stage": "embed-src", "done": 300, "total": 10_000, "progress": 0.4},
            40.0,
            True,
            "40 % of the whole job · embedding the source",
        ),
        (
            {"status": JobStatus.RUNNING, "stage": "knn", "done": 2_500, "total": 10_000, "progress": 0.0},
            25.0,
            False,
            "nearest neighbours: 2,500 / 10,000 (25 % of this stage)",
        ),
        ({"status": JobStatus.RUNNING, "stage": "load", "done": 0, "total": 0}, None, False, "load"),
    ],
)
def test_progress_bar_is_true_while_running_and_at_the_end(fields, percent, overall, label):
    from mining.selectors import job_bar

    bar = job_bar(MiningRunFactory.build(**fields))
    assert (bar.percent, bar.overall, bar.label) == (percent, overall, label)


def test_run_list_shows_finished_runs_at_100_percent_and_stage_times_in_order(reviewer_client):
    run = MiningRunFactory(
        name="finished-run",
        done=0,
        total=519,
        progress=1.0,
        stats={"candidates": 519, "kept_after_filters": 500},
        timings={"write": 0.5, "knn": 2.0, "embed-src": 3.0, "filter": 0.4},
    )
    html = reviewer_client.get(reverse("run-list")).content.decode()
    row = html[html.index(f'data-run="{run.pk}"') :]
    assert 'value="100.0"' in row[: row.index("</tr>")] and "0/519" not in html
    page = reviewer_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    times = "embedding the source 3.0 s, nearest neighbours 2.0 s, pre-filtering 0.4 s, writing candidates 0.5 s"
    assert f"Stage times: {times}" in page
    assert "kept after the pre-filters: <strong>500</strong>" in page and "kept_after_filters" not in page


def test_run_form_defaults_to_two_different_languages_of_the_newest_corpus(staff_client):
    CorpusFactory(languages=["de", "it"])
    newest = CorpusFactory(languages=["de", "en", "fr"])
    form = staff_client.get(reverse("run-start")).context["form"]
    assert (form.initial["src_corpus"], form.initial["src_lang"], form.initial["tgt_lang"]) == (newest.pk, "en", "de")


@pytest.mark.parametrize(
    ("knn", "says"),
    [
        ({"method": "exact", "compute": "fp32", "device": "cpu"}, "Search: exact kNN in fp32 on the CPU."),
        (
            {"method": "exact", "compute": "bf16", "device": "cpu"},
            "Search: exact kNN in bf16 tiles with an exact fp32 re-score on the CPU.",
        ),
        (
            {"method": "exact", "compute": "int8", "device": "cpu"},
            "Search: exact kNN in int8 tiles with an exact fp32 re-score on the CPU.",
        ),
        (
            {"method": "exact", "compute": "bf16", "device": "cuda"},
            "Search: exact kNN in bf16 tiles with an exact fp32 re-score on the GPU (CUDA).",
        ),
        ({"method": "ivf", "compute": "fp32", "device": "cpu"}, "Search: IVF (approximate) kNN in fp32 on the CPU."),
    ],
)
def test_run_page_names_the_search_and_its_arithmetic(reviewer_client, knn, says):
    run = MiningRunFactory(progress=1.0, stats={"candidates": 3, "knn": knn})
    page = reviewer_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert says in page
