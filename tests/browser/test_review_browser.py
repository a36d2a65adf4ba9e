"""In the browser: a reviewer judges ten pairs with the keyboard only (g/b, a reason key, undo, history), then staff
open the campaign's results."""

from __future__ import annotations

import pytest

from annotation.models import Label
from annotation.services import campaign_create
from annotation.spec import CampaignSpec
from pcapp.roles import reviewers_group
from tests.browser.conftest import login
from tests.factories.mining import make_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def campaign(django_user_model):
    reviewer = django_user_model.objects.create_user("rita", password="pw-rita-1234")
    reviewer.groups.add(reviewers_group())
    django_user_model.objects.create_user("boss", password="pw-boss-1234", is_staff=True)
    run = make_run(14, texts=[(f"Source sentence <b>{i}</b> & more", f"Phrase cible {i}") for i in range(14)])
    return campaign_create(
        spec=CampaignSpec(name="keyboard campaign", sample_size=12, seed=2), runs=[run], reviewers=[reviewer]
    )


def test_review_ten_pairs_with_the_keyboard_then_open_results(page, campaign, screenshot):
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(45_000)  # generous under a loaded CI machine
    login(page, "rita", "pw-rita-1234")
    page.goto(f"/review/campaigns/{campaign.pk}/")
    page.wait_for_selector("#label-form")
    page.wait_for_function("() => window.htmx && document.documentElement.dataset.reviewKeys === 'ready'")
    assert "<b>" in page.inner_text("#item-card")  # markup in the corpus is shown as text
    screenshot(page, "review-item")
    for i in range(10):
        before = page.get_attribute("#label-form input[name=item]", "value")
        if i == 3:
            page.keyboard.press("2")  # a reason tag
        page.keyboard.press("g" if i % 3 else "b")
        page.wait_for_function(
            "prev => { const el = document.querySelector('#label-form input[name=item]');"
            " return el && el.value !== prev; }",
            arg=before,
        )
        assert not errors, errors
    assert Label.objects.filter(campaign=campaign).count() == 10
    assert Label.objects.filter(campaign=campaign, verdict="BAD").count() == 4
    assert Label.objects.filter(campaign=campaign, reasons__contains=["partial"]).count() == 1
    assert all(x > 0 for x in Label.objects.values_list("seconds_spent", flat=True))

    page.keyboard.press("u")  # undo the tenth judgement
    page.wait_for_function("() => document.querySelector('.progress').textContent.includes('3 left')")
    assert Label.objects.filter(campaign=campaign).count() == 9
    page.keyboard.press("j")  # back through the history
    page.wait_for_selector("#item-card.history")
    assert "You said" in page.inner_text("#item-card")
    page.keyboard.press("?")
    assert page.is_visible("#help")
    screenshot(page, "review-help")

    page.context.clear_cookies()
    login(page, "boss", "pw-boss-1234")
    page.goto(f"/review/campaigns/{campaign.pk}/results/")
    assert "GOOD rate per run" in page.inner_text("main")
    assert "9 labels" in page.inner_text("#good-rates")
    screenshot(page, "campaign-results")
