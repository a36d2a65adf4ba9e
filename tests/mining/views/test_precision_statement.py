"""The run page, the API's run detail and the exports state the threshold, its source and the precision interval
(or why there is none); reviewers see none of it; the run page's one click creates a campaign over the kept set."""

from __future__ import annotations

import io
import json
import zipfile
from xml.etree import ElementTree

import pyarrow.parquet as pq
import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Campaign, CampaignItem, Label, Sampler, Verdict
from mining.models import Artefact, ArtefactKind, LanguagePairSetting, MiningRun, SentencePairCandidate
from mining.selectors.precision import statement_line, threshold_statement
from mining.selectors.thresholds import scale_key
from mining.services.export import ExportFormat, KeepRule, export_statement
from mining.services.export_files import export_build_file, statement_path
from tests.mining.views.test_results import make_run

pytestmark = pytest.mark.django_db

ESTIMATE = {
    "method": "target-decoy",
    "threshold": 1.05,
    "n_kept": 40,
    "decoy_hits": 4,
    "est_false": 4.0,
    "precision": 0.9,
    "low": 0.82,
    "high": 0.97,
    "confidence": 0.95,
    "n_targets": 100,
    "n_decoys": 100,
    "decoys": "fr sentences of corpus 'other'",
    "reason": "",
    "threshold_source": "default",
}


def _run(**stats) -> MiningRun:
    """60 candidates scored 1.5 down to 0.91 (40 at or above 1.1), the first two rejected by a pre-filter."""
    run = make_run(60, scores=[1.5 - 0.01 * i for i in range(60)], reasons={0: "too_short", 1: "too_short"})
    run.stats = {"default_threshold": {"threshold": 1.05, "method": "mixture"}, **stats}
    run.save()
    return run


def test_statement_of_a_label_free_threshold_with_an_estimate():
    got = threshold_statement(_run(precision_estimate=ESTIMATE))
    assert (got["threshold"], got["source"], got["source_label"]) == (1.05, "default", "label-free estimate")
    assert (got["precision"], got["low"], got["high"], got["reason"]) == (0.9, 0.82, 0.97, "")
    assert statement_line(got) == (
        "threshold=1.050000; source=default; precision=0.9000; interval=0.8200-0.9700; confidence=0.95; "
        "method=target-decoy"
    )


def test_the_run_page_names_the_decoys_and_how_they_were_chosen(staff_client):
    picked = _run(precision_estimate={**ESTIMATE, "decoy_source": "picked", "systematic": 0.3})
    got = threshold_statement(picked)
    assert (got["decoys"], got["decoy_source"], got["systematic"]) == ("fr sentences of corpus 'other'", "picked", 0.3)
    html = staff_client.get(reverse("run-detail", args=[picked.pk])).content.decode()
    assert (
        '<span class="statement-decoys">fr sentences of corpus &#x27;other&#x27;, picked automatically: the other '
        "corpus with the most sentences in this language</span>"
    ) in html
    shuffled = {
        **ESTIMATE,
        "decoys": "the target side's sentences with their words shuffled",
        "decoy_source": "fallback",
    }
    fallback = _run(precision_estimate=shuffled)
    got = threshold_statement(fallback)  # too rough a figure to state: the statement says why instead
    assert (got["precision"], got["low"], got["high"], got["decoy_source"]) == (None, None, None, "fallback")
    assert got["reason"].startswith("no other corpus holds fr sentences to draw decoys from")
    assert statement_line(got).startswith("threshold=1.050000; source=default; precision=none; reason=no other corpus")
    html = staff_client.get(reverse("run-detail", args=[fallback.pk])).content.decode()
    assert "no precision stated: no other corpus holds fr sentences to draw decoys from" in html
    assert "90.0 %" not in html
    stored_before = {k: v for k, v in shuffled.items() if k != "decoy_source"}  # recorded before `decoy_source`
    assert threshold_statement(_run(precision_estimate=stored_before))["precision"] is None
    assert threshold_statement(_run(precision_estimate=ESTIMATE))["decoy_source"] is None  # stored before it existed


def test_statement_says_why_there_is_no_figure():
    assert threshold_statement(_run())["reason"].startswith("not estimated yet")
    other = {**ESTIMATE, "precision": None, "low": None, "high": None, "reason": "3 pairs kept at the threshold"}
    assert threshold_statement(_run(precision_estimate=other))["reason"] == "3 pairs kept at the threshold"
    run = _run(precision_estimate=ESTIMATE)
    got = threshold_statement(run, threshold=1.2)  # an export's own threshold: the estimate was made elsewhere
    assert (got["source"], got["precision"]) == ("export", None)
    assert got["reason"].startswith("the estimate was made at threshold 1.05")


def test_a_calibrated_threshold_names_its_labels():
    run = _run(precision_estimate=ESTIMATE)
    model = Artefact.objects.create(kind=ArtefactKind.CALIBRATION, name="cal-en-fr", version=1, metrics={"labels": 250})
    LanguagePairSetting.objects.create(
        src_lang="en", tgt_lang="fr", threshold=1.05, calibration=model, scale_key=scale_key(run)
    )  # stored on this run's scale
    got = threshold_statement(run)
    assert (got["source"], got["source_label"], got["n_labels"]) == ("calibrated", "calibrated on 250 labels", 250)
    assert got["precision"] == 0.9  # estimated at this very threshold


def _reviewer(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_run_page_states_it_to_staff_and_not_to_reviewers(staff_client, reviewer_user):
    reviewer_client = _reviewer(reviewer_user)
    run = _run(precision_estimate=ESTIMATE)
    html = staff_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert 'class="statement-threshold">1.0500<' in html
    assert 'class="statement-source">label-free estimate<' in html
    assert 'class="statement-precision">90.0 %<' in html and "82.0 %–97.0 %" in html
    assert 'id="check-estimate"' in html  # no labels yet
    assert 'precision of the <span class="statement-kept">40</span> kept pairs' in html
    # the demo's check drew 43 pairs under a button saying 50 (walk): the page says how the pairs are drawn
    assert "about 50 pairs drawn over the kept set's 5 score bands, each band giving labels in proportion" in html
    body = reviewer_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "run-statement" not in body and "90.0 %" not in body and "check-estimate" not in body


def test_api_run_detail_carries_the_statement_for_staff_only(staff_user, reviewer_user):
    run = _run(precision_estimate=ESTIMATE)
    staff = APIClient()
    staff.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=staff_user).key}")
    got = staff.get(f"/api/runs/{run.pk}/").json()["threshold_statement"]
    assert (got["threshold"], got["source"], got["low"], got["high"]) == (1.05, "default", 0.82, 0.97)
    reviewer = APIClient()
    reviewer.force_authenticate(reviewer_user)
    response = reviewer.get(f"/api/runs/{run.pk}/")
    assert response.status_code == 403 or response.json()["threshold_statement"] is None


def test_every_export_carries_the_statement(staff_client):
    run = _run(precision_estimate=ESTIMATE)
    url = reverse("run-export", args=[run.pk])
    response = staff_client.get(url, {"format": "tsv", "keep": "threshold", "download": "1"})
    assert response["X-Pcapp-Threshold"].startswith("threshold=1.050000; source=default; precision=0.9000")
    response = staff_client.get(url, {"format": "tmx", "keep": "threshold", "download": "1"})
    header = ElementTree.fromstring(b"".join(response.streaming_content)).find("header")
    props = {p.get("type"): p.text for p in header.findall("prop")}
    assert (props["x-threshold"], props["x-threshold-source"]) == ("1.050000", "label-free estimate")
    assert (props["x-precision"], props["x-precision-low"], props["x-precision-high"]) == ("0.9000", "0.8200", "0.9700")
    assert json.loads(props["x-statement"])["decoys"] == "fr sentences of corpus 'other'"
    response = staff_client.get(url, {"format": "parquet", "keep": "threshold", "download": "1"})
    meta = pq.read_schema(io.BytesIO(b"".join(response.streaming_content))).metadata[b"pcapp"]
    assert json.loads(meta)["precision"] == 0.9 and json.loads(meta)["run"] == run.pk

    rule = KeepRule()
    path, n = export_build_file(run=run, rule=rule, fmt=ExportFormat.JSONL)
    assert n == SentencePairCandidate.objects.filter(run=run, score__gte=1.05, filter_reason="").count()
    assert json.loads(statement_path(path).read_text()) == export_statement(run=run, rule=rule)
    path, _ = export_build_file(run=run, rule=rule, fmt=ExportFormat.MOSES)
    with zipfile.ZipFile(path) as zf:
        assert json.loads(zf.read("metadata.json"))["source_label"] == "label-free estimate"


def test_one_click_check_creates_a_campaign_over_the_kept_set(staff_client, staff_user, reviewer_user):
    reviewer_client = _reviewer(reviewer_user)
    run = _run(precision_estimate=ESTIMATE)
    assert reviewer_client.post(reverse("run-check-estimate", args=[run.pk])).status_code in (302, 403)
    assert not Campaign.objects.exists()

    response = staff_client.post(reverse("run-check-estimate", args=[run.pk]))

    campaign = Campaign.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("campaign-review", args=[campaign.pk])
    assert (campaign.sampler, campaign.sample_size, campaign.threshold) == (Sampler.KEPT, 50, 1.05)
    assert list(campaign.reviewers.all()) == [staff_user] and list(campaign.runs.all()) == [run]
    items = list(CampaignItem.objects.filter(campaign=campaign).select_related("sentence_pair"))
    kept = SentencePairCandidate.objects.filter(run=run, score__gte=1.05, filter_reason="")
    assert 40 <= len(items) == kept.count()  # 50 in proportion to bands of 8-10 pairs: every kept pair here
    assert {i.sentence_pair_id for i in items} == set(kept.values_list("pk", flat=True))
    assert sum(i.stratum_size for i in items if i.stratum == 0) == sum(1 for i in items if i.stratum == 0) ** 2

    Label.objects.create(
        campaign=campaign,
        item=items[0],
        sentence_pair=items[0].sentence_pair,
        reviewer=staff_user,
        verdict=Verdict.GOOD,
    )
    html = staff_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert 'id="check-estimate"' not in html  # the run has labels now
    assert reverse("campaign-results", args=[campaign.pk]) in html and "Checked by labels" in html
    results = staff_client.get(reverse("campaign-results", args=[campaign.pk])).content.decode()
    assert 'id="kept-precision-note"' in results and "the\n  kept set's precision measured by your labels" in results


def test_run_page_shows_the_reasons_command_as_code_not_backticks(staff_client):
    """ "not estimated yet (…; `manage.py estimate_precision`)" showed its backticks on the run page (walk)."""
    html = staff_client.get(reverse("run-detail", args=[_run().pk])).content.decode()
    assert "<code>manage.py estimate_precision</code>" in html and "`" not in html.split('id="run-statement"')[1][:600]


def test_code_spans_escapes_and_leaves_unpaired_backticks():
    from mining.templatetags.readable import code_spans

    assert code_spans("run `a<b` now") == "run <code>a&lt;b</code> now"
    assert code_spans("one ` only <x>") == "one ` only &lt;x&gt;"


def test_run_statistics_line_ends_without_a_separator(staff_client):
    """A nested statistic last (the precision estimate) left "kept after the pre-filters: 180 ·" (walk)."""
    run = _run(candidates=60, kept_after_filters=58, precision_estimate=ESTIMATE)
    html = staff_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    line = html.split('<p class="run-stats">')[1].split("</p>")[0]
    assert line.endswith("<strong>58</strong>") and line.count(" · ") == 1


def test_a_rescored_run_states_no_figure_from_decoys_tuned_on_margin_scores(staff_client):
    rescored = _run(precision_estimate={**ESTIMATE, "decoy_source": "picked"}, rescore={"applied": True})
    got = threshold_statement(rescored)
    assert (got["precision"], got["low"], got["high"]) == (None, None, None)
    assert got["reason"].startswith("a run re-scored by the evidence scorer ranks its pairs by the scorer's log-odds")
    html = staff_client.get(reverse("run-detail", args=[rescored.pk])).content.decode()
    assert "no precision stated: a run re-scored by the evidence scorer" in html
    asked = _run(precision_estimate=ESTIMATE, rescore={"applied": False, "reason": "too few confident pairs"})
    assert threshold_statement(asked)["precision"] == 0.9  # not re-scored after all: margin scores, stated as usual
