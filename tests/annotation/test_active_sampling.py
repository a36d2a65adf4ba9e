"""Active sampling: the uncertain sampler picks the items whose calibrated confidence is nearest the pair's threshold;
its items are kept apart from the probability sample, so precision estimates never include them."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import CampaignItem, Sampler
from annotation.selectors import campaign_results, label_rows
from annotation.services import ReviewError, campaign_create, confidence_threshold, item_claim, label_submit
from annotation.spec import CampaignSpec
from feedback.services.calibration import threshold_labels
from mining.models import LanguagePairSetting, SentencePairCandidate
from mining.selectors import scale_key
from pcapp.roles import reviewers_group
from tests.factories.mining import make_run

pytestmark = pytest.mark.django_db

# Ten candidates scored 1.9, 1.8, ..., 1.0 (rank 1..10); the calibrated confidence is not monotone in the score.
SCORES = [1.9 - 0.1 * i for i in range(10)]
CONFIDENCES = [0.97, 0.93, 0.40, 0.88, 0.71, 0.52, 0.66, 0.20, 0.10, 0.05]


def calibrated_run(threshold: float | None = 1.45):
    run = make_run(10, scores=SCORES)
    for cand in SentencePairCandidate.objects.filter(run=run):
        SentencePairCandidate.objects.filter(pk=cand.pk).update(confidence=CONFIDENCES[cand.rank - 1])
    if threshold is not None:
        LanguagePairSetting.objects.create(
            src_lang=run.src_lang, tgt_lang=run.tgt_lang, scale_key=scale_key(run), threshold=threshold
        )
    return run


def _ranks(campaign, sampler: str) -> list[int]:
    return sorted(
        CampaignItem.objects.filter(campaign=campaign, sampler=sampler).values_list("sentence_pair__rank", flat=True)
    )


def test_uncertain_sampler_picks_the_confidences_nearest_the_threshold():
    run = calibrated_run()
    # The stored threshold 1.45 (on the score) keeps 5 pairs; the 5th highest confidence, 0.66, keeps as many.
    assert confidence_threshold(run) == pytest.approx(0.66)
    campaign = campaign_create(
        spec=CampaignSpec(name="active", sampler=Sampler.UNCERTAIN, sample_size=3), runs=[run], reviewers=[]
    )
    # |conf - 0.66|: 0.66 (rank 7) 0, 0.71 (rank 5) 0.05, 0.52 (rank 6) 0.14; next 0.88 (rank 4) 0.22.
    assert _ranks(campaign, Sampler.UNCERTAIN) == [5, 6, 7]
    assert set(CampaignItem.objects.filter(campaign=campaign).values_list("stratum_size", flat=True)) == {0}
    # The score-threshold sampler at the same threshold picks other items (scores 1.5, 1.4).
    near = campaign_create(
        spec=CampaignSpec(name="near", sampler=Sampler.THRESHOLD, threshold=1.45, sample_size=2),
        runs=[run],
        reviewers=[],
    )
    assert _ranks(near, Sampler.THRESHOLD) == [5, 6]


def test_uncertain_sampler_refuses_runs_without_confidences_or_a_threshold():
    bare = make_run(4)
    with pytest.raises(ReviewError, match="needs calibrated confidences, and run .* has none"):
        campaign_create(
            spec=CampaignSpec(name="x", sampler=Sampler.UNCERTAIN, sample_size=2), runs=[bare], reviewers=[]
        )
    with pytest.raises(ReviewError, match="calibrated confidences"):
        campaign_create(spec=CampaignSpec(name="x", sample_size=2, n_uncertain=2), runs=[bare], reviewers=[])
    no_threshold = calibrated_run(threshold=None)
    with pytest.raises(ReviewError, match="needs the threshold of en-fr, and none is stored"):
        campaign_create(spec=CampaignSpec(name="x", sample_size=2, n_uncertain=2), runs=[no_threshold], reviewers=[])


def _judge_all(campaign, reviewer, verdict_of) -> None:
    while True:
        item, _ = item_claim(campaign=campaign, reviewer=reviewer)
        if item is None:
            return
        label_submit(campaign=campaign, reviewer=reviewer, item_id=item.pk, verdict=verdict_of(item))


def test_estimates_leave_the_uncertain_items_out(django_user_model):
    run = calibrated_run()
    rev = django_user_model.objects.create_user("rev", password="pw-rev-1234")
    rev.groups.add(reviewers_group())
    campaign = campaign_create(
        spec=CampaignSpec(name="mixed", sampler=Sampler.STRATIFIED, bands=2, sample_size=4, n_uncertain=3, seed=1),
        runs=[run],
        reviewers=[rev],
    )
    items = list(CampaignItem.objects.filter(campaign=campaign))
    stratified = [i for i in items if i.sampler == Sampler.STRATIFIED]
    uncertain = [i for i in items if i.sampler == Sampler.UNCERTAIN]
    assert len(stratified) == 4 and len(uncertain) == 3
    assert len({i.sentence_pair_id for i in items}) == 7  # the uncertain part never repeats a sampled item
    # The uncertain part takes the nearest items the stratified part left.
    taken = {i.sentence_pair.rank for i in stratified}
    order = sorted(range(10), key=lambda i: abs(CONFIDENCES[i] - 0.66))
    assert sorted(i.sentence_pair.rank for i in uncertain) == sorted([r + 1 for r in order if r + 1 not in taken][:3])
    # Every probability-sampled item is GOOD and every uncertain one BAD: only the first count in the estimates.
    _judge_all(campaign, rev, lambda item: "BAD" if item.sampler == Sampler.UNCERTAIN else "GOOD")
    r = campaign_results(campaign)
    (est,) = r["runs"]
    assert est.n_labels == 4 and est.good_rate == 1.0 and est.high == 1.0
    (active,) = r["active"]
    assert active.n_labels == 3 and active.good_rate == 0.0
    data = threshold_labels(src_lang="en", tgt_lang="fr")
    assert len(data.labels) == 4 and data.labels.all() and data.n_left_out == 3
    sizes = {i.stratum: i.stratum_size for i in stratified}
    assert sorted(data.weights) == sorted(sizes[i.stratum] / 2 for i in stratified)  # 2 labels drawn per band
    assert {row["sampler"] for row in label_rows(campaign)} == {"stratified", "uncertain"}


def test_results_page_and_api_show_the_active_sample_apart(django_user_model, staff_client, staff_user):
    run = calibrated_run()
    rev = django_user_model.objects.create_user("rev", password="pw-rev-1234")
    campaign = campaign_create(
        spec=CampaignSpec(name="mixed", sample_size=2, n_uncertain=2), runs=[run], reviewers=[rev]
    )
    _judge_all(campaign, rev, lambda item: "BAD" if item.sampler == Sampler.UNCERTAIN else "GOOD")
    html = staff_client.get(reverse("campaign-results", args=[campaign.pk])).content.decode()
    assert "+ 2 uncertain per run" in html and 'id="active-rates"' in html
    assert "<strong>100.0 %</strong>" in html  # the uniform part only (GOOD rates as percentages)
    api = APIClient()
    api.force_authenticate(staff_user)
    body = api.get(f"/api/review/campaigns/{campaign.pk}/results/").json()
    assert [(x["labels"], x["good_rate"]) for x in body["runs"]] == [(2, 1.0)]
    assert [(x["labels"], x["good_rate"]) for x in body["active"]] == [(2, 0.0)]


def test_campaign_form_offers_the_uncertain_sampler(staff_client, reviewer_user):
    run = calibrated_run()
    form = {
        "name": "active",
        "runs": [run.pk],
        "reviewers": [reviewer_user.pk],
        "sample_size": 3,
        "sampler": "uniform",
        "n_uncertain": 2,
        "bands": 5,
        "seed": 0,
        "overlap": 1,
        "n_controls": 0,
        "guidelines": "g",
    }
    assert 'value="uncertain"' in staff_client.get(reverse("campaign-new")).content.decode()
    assert staff_client.post(reverse("campaign-new"), form).status_code == 302
    assert CampaignItem.objects.filter(sampler=Sampler.UNCERTAIN).count() == 2
    assert CampaignItem.objects.filter(sampler=Sampler.UNIFORM).count() == 3
    bare = make_run(3)
    response = staff_client.post(reverse("campaign-new"), {**form, "name": "bare", "runs": [bare.pk]})
    assert response.status_code == 400 and "calibrated confidences" in response.content.decode()


def test_campaign_api_creates_active_campaigns_with_the_same_rules(staff_user, reviewer_user):
    run = calibrated_run()
    api = APIClient()
    api.force_authenticate(staff_user)
    response = api.post(
        "/api/review/campaigns/",
        {"name": "api", "runs": [run.pk], "reviewers": [reviewer_user.pk], "sampler": "uncertain", "sample_size": 3},
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["sampler"] == "uncertain" and body["n_items"] == 3
    assert _ranks(body["id"], Sampler.UNCERTAIN) == [5, 6, 7]
    bare = make_run(3)
    response = api.post(
        "/api/review/campaigns/", {"name": "bare", "runs": [bare.pk], "reviewers": [], "n_uncertain": 1}, format="json"
    )
    assert response.status_code == 400 and "calibrated confidences" in response.json()["detail"]
    reviewer = APIClient()
    reviewer.force_authenticate(reviewer_user)
    assert (
        reviewer.post(
            "/api/review/campaigns/", {"name": "no", "runs": [run.pk], "reviewers": []}, format="json"
        ).status_code
        == 403
    )
