"""In the browser: log in, start a mining run from the form, watch it finish live, open its results."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from mining.models import Corpus, JobStatus, MiningRun
from tests.browser.conftest import login
from tests.factories.mining import MiningRunFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PAIRS = [
    ("The file could not be opened.", "Le fichier n'a pas pu être ouvert."),
    ("Please enter a valid email address.", "Veuillez saisir une adresse électronique valide."),
    ("This field is required.", "Ce champ est obligatoire."),
    ("Your password has been changed successfully.", "Votre mot de passe a été modifié avec succès."),
    ("The server is not responding at the moment.", "Le serveur ne répond pas pour le moment."),
    ("Delete the selected items from the list.", "Supprimer les éléments sélectionnés de la liste."),
    ("The download will start in a few seconds.", "Le téléchargement commencera dans quelques secondes."),
    ("You do not have permission to view this page.", "Vous n'avez pas la permission de voir cette page."),
    ("Save your changes before closing the window.", "Enregistrez vos modifications avant de fermer la fenêtre."),
    ("Choose a language from the menu.", "Choisissez une langue dans le menu."),
    ("Log in <again> & retry.", "Reconnectez-vous <encore> & réessayez."),
]


def small_corpus(folder, name: str = "browser-en-fr") -> Corpus:
    """A tiny en-fr corpus imported from a TSV file through the import service."""
    from mining.services.imports import import_execute, import_job_create

    path = folder / "pairs.tsv"
    path.write_text("".join(f"{en}\t{fr}\n" for en, fr in PAIRS), encoding="utf-8")
    job = import_execute(
        job=import_job_create(
            corpus_name=name, fmt="tsv", paths=[str(path)], options={"src_lang": "en", "tgt_lang": "fr"}
        )
    )
    assert job.status == JobStatus.SUCCEEDED, job.error
    return Corpus.objects.get(name=name)


@pytest.fixture
def staff(django_user_model):
    django_user_model.objects.create_user("boss", password="pw-boss-1234", is_staff=True)
    return "boss", "pw-boss-1234"


def test_progress_polls_until_the_run_ends(page, staff, screenshot):
    """The run page updates itself (htmx every 1 s) and stops polling once the run has ended."""
    run = MiningRunFactory(status=JobStatus.RUNNING, stage="knn", done=2, total=10, started_at=timezone.now())
    login(page, *staff)
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("#run-progress[data-status=running]")
    MiningRun.objects.filter(pk=run.pk).update(done=7)
    page.wait_for_function("() => document.querySelector('.run-done').textContent.trim() === '7'", timeout=10_000)
    screenshot(page, "run-progress")
    polls = []
    page.on("request", lambda req: polls.append(req.url) if "/progress/" in req.url else None)
    MiningRun.objects.filter(pk=run.pk).update(
        status=JobStatus.SUCCEEDED, stage="done", finished_at=timezone.now(), stats={"candidates": 0}
    )
    page.wait_for_selector("#run-progress[data-status=succeeded]", timeout=10_000)
    n = len(polls)
    page.wait_for_timeout(2500)
    assert len(polls) == n, "polling must stop once the run has finished"
    assert page.locator("#results-link").is_visible()


def test_results_compare_and_export_pages(page, staff, screenshot):
    """Results (charts, filters by keyboard), comparison and export pages render for a run with candidates."""
    from tests.factories.mining import make_run

    run = make_run(
        12,
        scores=[1.6 - 0.05 * i for i in range(12)],
        reasons={3: "too_short"},
        texts=[(en, fr) for en, fr in PAIRS] + [("Extra <b>line</b>", "Ligne en plus")],
        params={"threshold": 1.22},
    )
    login(page, *staff)
    page.goto(f"/runs/{run.pk}/results/")
    assert page.locator("#score-histogram svg rect.bar-all").count() > 0
    assert page.locator("#yield-curve svg line.threshold").count() == 1
    screenshot(page, "run-results-filters")
    page.fill("input[name=min_score]", "1.43")
    page.press("input[name=min_score]", "Enter")
    page.wait_for_function("() => document.querySelectorAll('table.candidates tr.candidate').length === 4")
    assert "min_score=1.43" in page.url  # the filtered list is bookmarkable
    page.goto(f"/runs/compare/?a={run.pk}&b={run.pk}&ta=1.22&tb=1.38")
    assert page.locator("#overlap").inner_text().startswith("4")  # A keeps ranks 1-8 but 4, B ranks 1-5 but 4
    screenshot(page, "run-compare")
    page.goto(f"/runs/{run.pk}/export/")
    screenshot(page, "run-export")
    with page.expect_download() as info:
        page.select_option("select[name=format]", "tsv")
        page.click("#export-form button:not([formmethod])")
    lines = open(info.value.path(), encoding="utf-8").read().splitlines()
    assert len(lines) == 7  # scores >= 1.22 are ranks 1-8, less rank 4 which a pre-filter rejected


def test_start_run_watch_it_finish_and_open_results(page, staff, screenshot, celery_worker_process, tmp_path):
    corpus = small_corpus(tmp_path)
    login(page, *staff)
    screenshot(page, "dashboard")

    page.click("#start-run")
    with page.expect_response(lambda r: "/runs/new/" in r.url):  # htmx re-renders the form for this corpus
        page.select_option("select[name=src_corpus]", str(corpus.pk))
    page.wait_for_timeout(200)  # let htmx settle the swapped form
    page.select_option("select[name=src_lang]", "en")
    page.select_option("select[name=tgt_lang]", "fr")
    page.fill("input[name=k]", "3")
    screenshot(page, "run-start")
    page.click("#run-start-form button[type=submit]")
    try:
        page.wait_for_url(re.compile(r"/runs/\d+/$"))
    finally:
        screenshot(page, "run-submitted")
    run = MiningRun.objects.get(src_corpus=corpus)

    page.wait_for_selector("#run-progress[data-status=succeeded], #run-progress[data-status=failed]", timeout=180_000)
    screenshot(page, "run-finished")
    run.refresh_from_db()
    assert run.status == JobStatus.SUCCEEDED, run.error
    assert run.params["k"] == 3

    page.click("#results-link")
    page.wait_for_selector("table.candidates tr.candidate")
    assert page.locator("#score-histogram svg").count() == 1
    assert page.locator("#yield-curve svg path.yield").count() == 1
    rows = page.locator("table.candidates tr.candidate")
    assert rows.count() == len(PAIRS)
    # Corpus text is escaped, never interpreted as markup.
    assert page.locator("td.src", has_text="Log in <again> & retry.").count() == 1
    screenshot(page, "run-results")

    page.fill("input[name=q]", "password")
    page.press("input[name=q]", "Enter")
    page.wait_for_function("() => document.querySelectorAll('table.candidates tr.candidate').length === 1")
    assert "password" in page.locator("table.candidates tr.candidate td.src").inner_text()
    page.goto("/")
    assert page.locator("table.runs tr.status-succeeded").count() == 1
    screenshot(page, "dashboard-with-run")


def test_cancel_a_running_run_then_delete_it_from_its_page(page, staff, screenshot):
    """Cancel shows at once on the page (no worker needed to acknowledge it); the cancelled run is then deleted with
    its candidates from the same page, after ticking the confirmation box."""
    from mining.models import SentencePairCandidate
    from tests.factories.mining import SentencePairCandidateFactory

    run = MiningRunFactory(status=JobStatus.RUNNING, stage="search", done=3, total=10, started_at=timezone.now())
    SentencePairCandidateFactory.create_batch(3, run=run)
    other = MiningRunFactory(status=JobStatus.SUCCEEDED, stage="done", finished_at=timezone.now())
    SentencePairCandidateFactory.create_batch(2, run=other)
    login(page, *staff)
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("#run-progress[data-status=running]")
    page.click("#cancel-run")
    page.wait_for_selector("#run-progress[data-status=cancelled]", timeout=10_000)
    assert f"Run {run.pk}: cancelled." in page.content()
    run.refresh_from_db()
    assert run.status == JobStatus.CANCELLED and run.finished_at is not None
    screenshot(page, "run-cancelled")
    page.check("input[name=confirm]")
    page.click("#delete-run")
    page.wait_for_url(re.compile(r"/runs/$"), timeout=10_000)
    assert f"Run {run.pk} deleted (3 candidates)." in page.content()
    screenshot(page, "run-deleted")
    assert not MiningRun.objects.filter(pk=run.pk).exists()
    assert SentencePairCandidate.objects.filter(run=run.pk).count() == 0
    assert sorted(SentencePairCandidate.objects.filter(run=other).values_list("run", flat=True)) == [other.pk] * 2
