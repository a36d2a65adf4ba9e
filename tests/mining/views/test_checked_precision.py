"""A run whose kept pairs have random labels states the precision they settle ("checked with N labels") beside the
label-free figure: on the run page, in the API's run detail and in the exports' header."""

from __future__ import annotations

import json
from xml.etree import ElementTree

import numpy as np
import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Campaign, CampaignItem, Label, Sampler, Verdict
from annotation.services import check_estimate_campaign
from mining.core.precision_labels import BIAS_SD_DISJOINT, BandCounts, decoy_variance, settle_precision
from mining.models import SentencePairCandidate
from mining.selectors.precision import statement_line, threshold_statement
from tests.factories.mining import make_run
from tests.mining.views.test_precision_statement import ESTIMATE, _run

pytestmark = pytest.mark.django_db

GOOD_FROM = 1.3  # the simulated reviewer says GOOD to the kept pairs scoring at least this


def _label(item: CampaignItem, user, verdict: str | None = None) -> None:
    good = item.sentence_pair.score >= GOOD_FROM
    Label.objects.create(
        campaign=item.campaign,
        item=item,
        sentence_pair=item.sentence_pair,
        reviewer=user,
        verdict=verdict or (Verdict.GOOD if good else Verdict.BAD),
    )


def _kept(run):
    return SentencePairCandidate.objects.filter(run=run, score__gte=1.05, filter_reason="")


def test_every_kept_pair_labelled_states_the_measured_precision(staff_user):
    run = _run(precision_estimate=ESTIMATE)
    campaign = check_estimate_campaign(run=run, user=staff_user)
    items = list(CampaignItem.objects.filter(campaign=campaign).select_related("sentence_pair", "campaign"))
    assert len(items) == _kept(run).count()  # the check drew every kept pair here
    for item in items:
        _label(item, staff_user)
    got = threshold_statement(run)
    measured = _kept(run).filter(score__gte=GOOD_FROM).count() / _kept(run).count()
    assert measured == pytest.approx(19 / 44)
    checked = got["checked"]
    # every pair labelled: no sampling error is left, and the decoy estimate (90 %) has no weight
    assert checked["precision"] == pytest.approx(measured, abs=1e-4)
    assert checked["label_precision"] == pytest.approx(measured, abs=1e-4)
    assert checked["prior_weight"] == pytest.approx(0.0, abs=1e-4)
    assert (checked["n_labels"], checked["source_label"]) == (44, "checked with 44 labels")
    assert (got["precision"], got["source_label"]) == (0.9, "label-free estimate")  # the label-free figure stays


def test_a_few_labels_settle_with_the_decoy_estimate(staff_user):
    run = _run(precision_estimate=ESTIMATE)
    campaign = check_estimate_campaign(run=run, user=staff_user)
    items = list(
        CampaignItem.objects.filter(campaign=campaign).select_related("sentence_pair", "campaign").order_by("id")
    )
    labelled = [i for i in items if i.sentence_pair.score >= 1.4 or i.sentence_pair.score < 1.15]
    for item in labelled:
        _label(item, staff_user)
    # a label that does not count: an unlabelled kept pair drawn near the threshold (not at random)
    unlabelled = next(i for i in items if i not in labelled)
    other = Campaign.objects.create(name="near", sample_size=1, sampler=Sampler.THRESHOLD, seed=1)
    near = CampaignItem.objects.create(
        campaign=other, run=run, sentence_pair=unlabelled.sentence_pair, position=0, sampler=Sampler.THRESHOLD
    )
    _label(CampaignItem.objects.select_related("sentence_pair", "campaign").get(pk=near.pk), staff_user, Verdict.BAD)

    kept = np.array(list(_kept(run).values_list("score", flat=True)), dtype=np.float64)
    scores = np.array([i.sentence_pair.score for i in labelled], dtype=np.float64)
    expected = settle_precision(
        BandCounts.from_scores(kept, scores, (scores >= GOOD_FROM).astype(float)),
        prior_precision=0.9,
        prior_variance=decoy_variance(decoy_hits=4, n_kept=40, n_targets=100, n_decoys=100),
        bias_sd=BIAS_SD_DISJOINT,
    )
    checked = threshold_statement(run)["checked"]
    assert checked["n_labels"] == len(labelled) == 19
    assert checked["method"] == "labels + decoys"
    assert checked["precision"] == pytest.approx(expected.precision, abs=1e-4)
    assert (checked["low"], checked["high"]) == pytest.approx((expected.low, expected.high), abs=1e-4)
    # by hand: the kept set's 44 pairs score 1.05-1.48, bands 0.086 wide: 1.05-1.13 (9 pairs, all 9 labelled BAD),
    # 1.14-1.22 (9, 1.14 labelled BAD), 1.23-1.30 (8, none labelled: joins the band below, the nearer labelled one
    # on a tie), 1.31-1.39 (9, none: joins the band above), 1.40-1.48 (9, all labelled GOOD)
    assert checked["label_precision"] == pytest.approx(expected.label_precision, abs=1e-4)
    assert expected.label_precision == pytest.approx((9 * 0 + 17 * 0 + 18 * 1) / 44)
    assert expected.method == "labels + decoys" and 18 / 44 < expected.precision < 0.9


def test_run_page_api_and_exports_carry_the_checked_figure(staff_client, staff_user):
    run = _run(precision_estimate=ESTIMATE)
    campaign = check_estimate_campaign(run=run, user=staff_user)
    for item in CampaignItem.objects.filter(campaign=campaign).select_related("sentence_pair", "campaign"):
        _label(item, staff_user)
    html = staff_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert 'class="statement-checked-source">checked with 44 labels<' in html
    assert 'class="statement-checked-precision">43.2 %<' in html
    assert 'class="statement-precision">90.0 %<' in html  # beside the label-free figure
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=staff_user).key}")
    got = api.get(f"/api/runs/{run.pk}/").json()["threshold_statement"]["checked"]
    assert (got["precision"], got["n_labels"]) == (0.4318, 44)
    url = reverse("run-export", args=[run.pk])
    response = staff_client.get(url, {"format": "tsv", "keep": "threshold", "download": "1"})
    assert "checked=0.4318; checked_interval=" in response["X-Pcapp-Threshold"]
    assert "checked_labels=44; checked_method=labels + decoys" in response["X-Pcapp-Threshold"]
    response = staff_client.get(url, {"format": "tmx", "keep": "threshold", "download": "1"})
    header = ElementTree.fromstring(b"".join(response.streaming_content)).find("header")
    props = {p.get("type"): p.text for p in header.findall("prop")}
    assert (props["x-precision-checked"], props["x-precision-checked-source"]) == ("0.4318", "checked with 44 labels")
    assert json.loads(props["x-statement"])["checked"]["n_labels"] == 44


def test_no_random_label_no_checked_figure(staff_user):
    run = _run(precision_estimate=ESTIMATE)
    got = threshold_statement(run)
    assert got["checked"] is None
    assert "checked=" not in statement_line(got)


def test_the_check_draws_in_proportion_to_the_bands(staff_user):
    # 300 kept pairs (no pre-filter rejection), most of them just above the threshold
    scores = (
        [1.0 + 0.001 * i for i in range(200)]
        + [1.2 + 0.003 * i for i in range(60)]
        + [1.4 + 0.01 * i for i in range(20)]
        + [1.6 + 0.02 * i for i in range(10)]
        + [1.8 + 0.019 * i for i in range(10)]
    )
    run = make_run(300, scores=sorted(scores, reverse=True))
    run.stats = {"default_threshold": {"threshold": 1.0, "method": "mixture"}, "precision_estimate": ESTIMATE}
    run.save()
    campaign = check_estimate_campaign(run=run, user=staff_user)
    items = CampaignItem.objects.filter(campaign=campaign)
    per_band = [items.filter(stratum=b).count() for b in range(5)]
    sizes = [items.filter(stratum=b).values_list("stratum_size", flat=True).first() for b in range(5)]
    assert sizes == [195, 65, 19, 10, 11]  # the kept set 1.0-1.971 in five bands 0.1942 wide
    assert per_band == [32, 11, 3, 2, 2]  # 50 x size / 300 rounded (32.5 to even), at least 1


def test_a_pair_labelled_twice_counts_its_share_of_good(staff_user, reviewer_user):
    run = _run(precision_estimate=ESTIMATE)
    campaign = check_estimate_campaign(run=run, user=staff_user)
    items = list(CampaignItem.objects.filter(campaign=campaign).select_related("sentence_pair", "campaign"))
    for item in items:
        _label(item, staff_user)
    top = max(items, key=lambda i: i.sentence_pair.score)  # GOOD by the first reviewer
    _label(top, reviewer_user, Verdict.BAD)
    checked = threshold_statement(run)["checked"]
    assert checked["n_labels"] == 44  # pairs, not labels
    assert checked["precision"] == pytest.approx((19 - 0.5) / 44, abs=1e-4)
