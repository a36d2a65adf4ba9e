"""A threshold belongs to a scale (issue 27): a threshold stored on the calibration page from a ratio-margin run is
never applied to a distance-margin run of the same language pair, whose scores run about 0-0.6: its run page, results
page, export and campaign samplers all use its own label-free default and say why."""

from __future__ import annotations

import html as htmllib

import pytest
from django.urls import reverse

from annotation.models import CampaignItem, Sampler
from annotation.services import ReviewError, campaign_create
from annotation.spec import CampaignSpec
from mining.models import LanguagePairSetting, SentencePairCandidate
from mining.selectors import run_threshold_info, scale_key
from tests.factories.annotation import LabelFactory
from tests.factories.mining import MiningRunFactory, SentencePairCandidateFactory

pytestmark = pytest.mark.django_db

RATIO = {"knn": "exact", "margin": "ratio", "k": 4, "strategy": "max_score", "threshold": None, "filters": True}
DISTANCE = {**RATIO, "margin": "distance"}
STORED = 1.1733


def _run(params: dict, scores: list[float], default: float, **kwargs):
    run = MiningRunFactory(params=params, stats={"default_threshold": {"threshold": default}}, **kwargs)
    for i, score in enumerate(scores):
        SentencePairCandidateFactory(run=run, score=score, rank=i + 1, src__text=f"s{i}", tgt__text=f"t{i}")
    return run


def _get(client, name: str, run) -> str:
    return htmllib.unescape(client.get(reverse(name, args=[run.pk])).content.decode())


@pytest.fixture
def runs(staff_client):
    """An en-fr ratio run (scores 1.5 .. 0.95, labelled) whose threshold 1.1733 is stored through the calibration page,
    and an en-fr distance run (scores 0.50 .. 0.05) whose label-free default is 0.30."""
    ratio = _run(RATIO, [1.5, 1.4, 1.3, 1.2, 1.1, 1.0, 0.95], default=1.6)
    for cand in SentencePairCandidate.objects.filter(run=ratio):
        LabelFactory(sentence_pair=cand, verdict="GOOD" if cand.score >= 1.15 else "BAD")
    distance = _run(DISTANCE, [0.5, 0.45, 0.4, 0.35, 0.3, 0.2, 0.1, 0.05], default=0.3)
    data = {"threshold": str(STORED), "target": "0.95", "estimate": "0.96", "confirm": "on", "scale": scale_key(ratio)}
    staff_client.post(reverse("calibration-apply", args=["en", "fr"]), data, follow=True)  # shows the message
    setting = LanguagePairSetting.objects.get()
    assert (setting.threshold, setting.scale_key) == (STORED, "usem3 v1/ratio/k=4/max_score")
    return ratio, distance


def test_the_ratio_threshold_applies_to_ratio_runs_only(runs) -> None:
    ratio, distance = runs
    assert scale_key(distance) == "usem3 v1/distance/k=4/max_score"
    info = run_threshold_info(ratio)
    assert (info.value, info.source) == (STORED, "calibrated")
    assert info.reason == "stored for en-fr on usem3 v1/ratio/k=4/max_score runs on the calibration page"
    info = run_threshold_info(distance)
    assert (info.value, info.source) == (0.3, "default")
    assert info.reason == (
        "the run's label-free default: no threshold stored for en-fr on this scoring configuration "
        "(usem3 v1/distance/k=4/max_score); the one stored for usem3 v1/ratio/k=4/max_score is on another scale"
    )


def test_open_the_distance_run_page_and_results_page(staff_client, runs) -> None:
    ratio, distance = runs
    detail = _get(staff_client, "run-detail", distance)
    results = _get(staff_client, "run-results", distance)
    line = detail[detail.index('id="run-threshold"') :].split("</p>")[0]
    info = results[results.index('id="threshold-info"') :].split("</span>")[0]
    assert "0.3000 (the run's label-free default: no threshold stored for en-fr on this scoring" in line
    assert "<strong>0.3000</strong>" in info and "the run's label-free default: no threshold stored" in info
    for html in (detail, results):
        assert "1.1733" not in html
    # issue 26 item 6: the run page states the threshold the results page uses (the ratio run: the stored one)
    detail = _get(staff_client, "run-detail", ratio)
    results = _get(staff_client, "run-results", ratio)
    assert "Threshold: 1.1733 (stored for en-fr on usem3 v1/ratio/k=4/max_score runs" in detail
    assert "<strong>1.1733</strong>" in results
    # the precision statement (issue 31) names the same threshold and its source in place of the old label-free line
    assert 'class="statement-threshold">1.1733<' in detail and "Label-free default threshold" not in detail
    assert 'class="statement-source">calibrated on labels<' in detail  # stored by hand: no calibration model


def test_export_the_distance_run(staff_client, runs) -> None:
    ratio, distance = runs
    response = staff_client.get(
        reverse("run-export", args=[distance.pk]), {"format": "tsv", "keep": "threshold", "download": "1"}
    )
    rows = b"".join(response.streaming_content).decode().splitlines()
    # its own default 0.30 keeps 5 of 8; the ratio number would have kept none
    assert [r.split("\t")[0] for r in rows] == ["s0", "s1", "s2", "s3", "s4"]
    page = _get(staff_client, "run-export", distance)
    assert "0.3000 (the run's label-free default" in page and "1.1733" not in page
    response = staff_client.get(
        reverse("run-export", args=[ratio.pk]), {"format": "tsv", "keep": "threshold", "download": "1"}
    )
    assert len(b"".join(response.streaming_content).decode().splitlines()) == 4  # 1.5 .. 1.2 >= 1.1733


def test_sample_the_distance_run(runs) -> None:
    ratio, distance = runs
    near = campaign_create(
        spec=CampaignSpec(name="near", sampler=Sampler.THRESHOLD, sample_size=2), runs=[distance], reviewers=[]
    )
    scores = sorted(CampaignItem.objects.filter(campaign=near).values_list("sentence_pair__score", flat=True))
    assert scores == pytest.approx([0.3, 0.35])  # around its own 0.30, not around 1.1733 (the top two)
    SentencePairCandidate.objects.filter(run=distance).update(confidence=0.5)
    with pytest.raises(ReviewError, match=r"none is stored for run .* scoring configuration \(usem3 v1/distance"):
        campaign_create(
            spec=CampaignSpec(name="active", sampler=Sampler.UNCERTAIN, sample_size=2), runs=[distance], reviewers=[]
        )


def test_the_calibration_page_groups_runs_by_scoring_configuration(staff_client, runs) -> None:
    ratio, distance = runs
    url = reverse("calibration", args=["en", "fr"])
    # the newest run is the distance run: its configuration is shown first, with no threshold stored and no labels
    page = staff_client.get(url).content.decode()
    assert "usem3 v1/distance/k=4/max_score" in page and "usem3 v1/ratio/k=4/max_score" in page
    assert "no threshold stored" in page and 'id="stored-threshold"' not in page
    assert "No labels yet" in page
    # on the ratio configuration the labels give a threshold; ticking both runs counts only the ratio run's pairs
    html = staff_client.get(
        url, {"scale": scale_key(ratio), "target": "0.9", "runs": [ratio.pk, distance.pk]}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert '<strong id="chosen-threshold">1.2000</strong>' in html
    assert '<strong id="n-kept">4</strong> pairs' in html
    assert 'id="not-counted">Not counted (1)' in html
