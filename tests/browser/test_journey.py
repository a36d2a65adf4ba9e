"""A new user's whole journey, by clicking only (no typed URL after the login page): import a small TSV through the
upload form, start a run and watch its progress reach 100 %, open its results, create a campaign from the run,
review every item with the keyboard, open the campaign's results, train a calibration model from its labels, see
the caution for a small label set, store a threshold, apply the calibration to the run, export the kept pairs as TSV.
On the way a colleague is made a reviewer in the admin (the `reviewers` group is there on a fresh install) and the
campaign form offers her.
A real Celery worker runs the import and the runs. Screenshots of each step: test-artifacts/screenshots/journey-*.png.
"""

from __future__ import annotations

import re

import pytest

from annotation.models import Label
from mining.models import Corpus, JobStatus, LanguagePairSetting, MiningRun, RunKind, SentencePairCandidate
from mining.selectors.thresholds import scale_key
from tests.browser.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NOUNS = [("house", "maison"), ("car", "voiture"), ("door", "porte"), ("window", "fenêtre")]
PLACES = [
    ("is next to the old church", "est à côté de la vieille église"),
    ("was sold to a young family", "a été vendue à une jeune famille"),
    ("needs to be cleaned every week", "doit être nettoyée chaque semaine"),
    ("looks much bigger in the morning", "paraît beaucoup plus grande le matin"),
    ("was painted blue last summer", "a été peinte en bleu l'été dernier"),
]
TRUE_PAIRS = [(f"The {en} {p_en}.", f"La {fr} {p_fr}.") for en, fr in NOUNS for p_en, p_fr in PLACES][:18]
# English lines whose French side says something else: no translation of them exists in the corpus, so whatever the
# miner pairs them with is BAD.
UNRELATED = [
    ("The committee postponed its decision until next year.", "Les enfants jouent au football après l'école."),
    ("Our neighbour grows tomatoes on his balcony.", "Le train de nuit part à vingt-deux heures."),
    ("Please switch off your phone during the concert.", "La bibliothèque ferme ses portes le dimanche."),
    ("The river flooded the lower part of the town.", "Mon frère apprend à jouer du violon."),
    ("She finished the marathon in under four hours.", "Le musée présente une collection de masques."),
    ("They forgot the tickets at the hotel reception.", "Il pleut depuis trois jours sans interruption."),
]
GOOD = set(TRUE_PAIRS)


def _shot(page, screenshot, n: int, name: str) -> None:
    screenshot(page, f"journey-{n:02d}-{name}")


def _nav(page, label: str) -> None:
    page.click(f"nav[aria-label=Main] >> text={label}")


def test_new_user_journey_by_clicking_only(page, django_user_model, screenshot, celery_worker_process, tmp_path):
    # the README's first user: a superuser, as `./run app`'s `admin` (it may manage users in the admin)
    django_user_model.objects.create_user("newcomer", password="pw-newcomer-123", is_staff=True, is_superuser=True)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(30_000)
    tsv = tmp_path / "my-first-corpus.tsv"
    tsv.write_text("".join(f"{en}\t{fr}\n" for en, fr in TRUE_PAIRS + UNRELATED), encoding="utf-8")

    # 1. Log in (the only typed address) and land on the dashboard.
    login(page, "newcomer", "pw-newcomer-123")
    _shot(page, screenshot, 1, "dashboard-empty")

    # 2. Corpora -> Import a corpus: upload the TSV through the form; the import page follows the job.
    _nav(page, "Corpora")
    page.click("text=Import a corpus")
    page.fill("input[name=name]", "my-first-corpus")
    page.select_option("select[name=format]", "tsv")
    page.fill("input[name=src_lang]", "en")
    page.fill("input[name=tgt_lang]", "fr")
    page.set_input_files("input[type=file]", str(tsv))
    _shot(page, screenshot, 2, "import-form")
    page.click("main form button[type=submit]")
    page.wait_for_selector("#mine-this-corpus", timeout=90_000)
    _shot(page, screenshot, 3, "import-done")
    corpus = Corpus.objects.get(name="my-first-corpus")
    assert corpus.stats["sentences"] == 2 * (len(TRUE_PAIRS) + len(UNRELATED))

    # 3. Mine this corpus: the form offers the corpus with en -> fr; start the run and watch it reach 100 %.
    page.click("#mine-this-corpus")
    assert page.input_value("select[name=src_lang]") == "en" and page.input_value("select[name=tgt_lang]") == "fr"
    _shot(page, screenshot, 4, "run-form")
    page.click("#run-start-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    page.wait_for_selector("#run-progress[data-status=succeeded], #run-progress[data-status=failed]", timeout=120_000)
    run = MiningRun.objects.get(src_corpus=corpus, kind=RunKind.SENTENCE)
    assert run.status == JobStatus.SUCCEEDED, run.error
    assert page.get_attribute("#run-bar", "value") == "100.0"
    assert "100 % done" in page.inner_text("#run-progress")
    _shot(page, screenshot, 5, "run-finished")
    _nav(page, "Runs")
    row = page.locator(f"tr[data-run='{run.pk}']")
    assert row.locator("progress").get_attribute("value") == "100.0"
    assert "0/" not in row.inner_text()
    row.locator("a", has_text=str(run)).click()

    # 4. Results, then a campaign from this run (the run and the user are preselected).
    page.click("#results-link")
    page.wait_for_selector("table.candidates tr.candidate")
    _shot(page, screenshot, 6, "run-results")

    # 4a. Make a colleague a reviewer in the admin, as the README says: on a fresh install the group chooser already
    # offers `reviewers`; the campaign form then offers her (and no one who cannot review).
    django_user_model.objects.create_user("plain", password="pw-plain-12345")  # a user with no role
    _nav(page, "Admin")
    page.click("a[href='/admin/auth/user/add/']")
    page.fill("#id_username", "rita")
    page.fill("#id_password1", "pw-rita-reviews-1")
    page.fill("#id_password2", "pw-rita-reviews-1")
    page.click("input[name=_continue]")
    page.wait_for_selector("#id_groups_from")
    assert page.locator("#id_groups_from option").all_inner_texts() == ["reviewers"]
    page.select_option("#id_groups_from", label="reviewers")
    page.click("#id_groups_add")
    _shot(page, screenshot, 7, "admin-reviewer")
    page.click("input[name=_save]")
    page.wait_for_selector("ul.messagelist li.success")
    assert django_user_model.objects.get(username="rita").groups.filter(name="reviewers").exists()
    page.click("#user-tools a[href='/']")  # the admin's "View site": back to the dashboard, then to the run's results
    _nav(page, "Runs")
    page.locator(f"tr[data-run='{run.pk}']").locator("a", has_text=str(run)).click()
    page.click("#results-link")

    page.click("#new-campaign-link")
    assert page.is_checked(f"input[name=runs][value='{run.pk}']")
    offered = page.locator("#id_reviewers label").all_inner_texts()
    assert [name.strip() for name in offered] == ["newcomer", "rita"]  # staff and reviewers; not "plain"
    page.fill("input[name=name]", "first look")
    page.fill("input[name=sample_size]", "50")
    _shot(page, screenshot, 7, "campaign-form")
    page.click("main form button[type=submit]")
    page.wait_for_selector("#start-review")
    _shot(page, screenshot, 8, "campaign-created")

    # 5. Review every item with the keyboard: g when the French translates the English, b otherwise.
    page.click("#start-review")
    page.wait_for_function("() => window.htmx && document.documentElement.dataset.reviewKeys === 'ready'")
    n_items = run.stats["candidates"]
    for i in range(n_items):
        card = page.locator("#item-card .side p.text")
        src, tgt = card.nth(0).inner_text().strip(), card.nth(1).inner_text().strip()
        before = page.get_attribute("#label-form input[name=item]", "value")
        page.keyboard.press("g" if (src, tgt) in GOOD else "b")
        if i < n_items - 1:
            page.wait_for_function(
                "prev => { const el = document.querySelector('#label-form input[name=item]');"
                " return el && el.value !== prev; }",
                arg=before,
            )
        if i == 0:
            _shot(page, screenshot, 9, "review")
    page.wait_for_selector("#done-results-link")
    labels = Label.objects.filter(campaign__name="first look")
    assert labels.count() == n_items >= 20
    assert 0 < labels.filter(verdict="BAD").count() < n_items
    _shot(page, screenshot, 10, "review-done")

    # 6. Campaign results -> train a calibration model from these labels.
    page.click("#done-results-link")
    page.wait_for_selector("#good-rates")
    assert f"{n_items} labels" in page.inner_text("#good-rates")
    _shot(page, screenshot, 11, "campaign-results")
    page.click(".train-calibration")
    assert page.locator("#train-form select[name=campaign] option:checked").inner_text() == "first look"
    page.click("#train-button")
    page.wait_for_selector("#run-progress[data-status=succeeded], #run-progress[data-status=failed]", timeout=120_000)
    calibrate = MiningRun.objects.get(kind=RunKind.CALIBRATE)
    assert calibrate.status == JobStatus.SUCCEEDED, calibrate.error
    _shot(page, screenshot, 12, "calibration-trained")

    # 7. The calibration page says the label set is small; store the threshold (confirming a weak estimate).
    page.click("#calibration-link")
    caution = page.locator(".model-caution").first.inner_text()
    assert f"Trained on only {n_items} labels" in caution
    page.wait_for_selector("#chosen-threshold")
    if page.locator("#confirm-threshold").count():
        page.check("#confirm-threshold")
    _shot(page, screenshot, 13, "calibration-page")
    threshold = float(page.inner_text("#chosen-threshold"))
    page.click("#store-threshold-button")
    page.wait_for_selector("#stored-threshold")
    setting = LanguagePairSetting.objects.get(src_lang="en", tgt_lang="fr")
    assert round(setting.threshold, 4) == threshold

    # 8. Apply the calibration to the run (confirming past the cautions), then see its calibrated results.
    page.select_option("#apply-run", str(run.pk))
    page.check("#confirm-apply")
    page.click("#apply-button")
    page.wait_for_selector("#messages li.success")
    _shot(page, screenshot, 14, "calibration-applied")
    _nav(page, "Runs")
    apply = MiningRun.objects.get(kind=RunKind.APPLY_CALIBRATION)
    page.locator(f"tr[data-run='{apply.pk}'] a").first.click()
    page.wait_for_selector("#run-progress[data-status=succeeded], #run-progress[data-status=failed]", timeout=120_000)
    apply.refresh_from_db()
    assert apply.status == JobStatus.SUCCEEDED, apply.error
    page.click("#results-link")
    page.wait_for_selector("table.candidates tr.candidate")
    # the threshold belongs to the run's scoring configuration (its scale), and the words say which
    assert f"stored for en-fr on {scale_key(run)} runs on the calibration page" in page.inner_text("#threshold-info")
    assert SentencePairCandidate.objects.filter(run=run, confidence__isnull=False).count() == n_items
    _shot(page, screenshot, 15, "results-calibrated")

    # 9. Export the pairs the stored threshold keeps, as TSV.
    page.click("#export-link")
    _shot(page, screenshot, 16, "export")
    with page.expect_download() as info:
        page.click("#export-form button:not([formmethod])")
    lines = open(info.value.path(), encoding="utf-8").read().splitlines()
    kept = SentencePairCandidate.objects.filter(run=run, score__gte=setting.threshold, filter_reason="").count()
    assert len(lines) == kept > 0
    assert not errors, errors
