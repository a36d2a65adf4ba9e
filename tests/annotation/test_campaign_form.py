"""Staff create campaigns with the form; the review card shows the mining evidence unless the campaign is blind."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Campaign, CampaignItem
from mining.models import SentencePairCandidate
from pcapp.roles import reviewers_group
from tests.factories.mining import SentenceFactory, make_run


def _run_with_evidence():
    run = make_run(4)
    neighbour = SentenceFactory(document__corpus=run.tgt_corpus, document__lang="fr", text="voisin <i>proche</i>")
    SentencePairCandidate.objects.filter(run=run).update(
        evidence={
            "cosine": 0.81,
            "margin": 1.234,
            "fwd_mean": 0.4,
            "bwd_mean": 0.5,
            "filter": "length_ratio",
            "src_neighbours": [[neighbour.pk, 0.77]],
            "tgt_neighbours": [],
        }
    )
    return run


@pytest.mark.django_db
@pytest.mark.parametrize("blind", [False, True])
def test_staff_create_a_campaign_and_blind_mode_hides_the_evidence(staff_client, django_user_model, blind):
    run = _run_with_evidence()
    rita = django_user_model.objects.create_user("rita", password="pw-rita-1234")
    rita.groups.add(reviewers_group())
    form = {
        "name": "table 7",
        "runs": [run.pk],
        "reviewers": [rita.pk],
        "sample_size": 3,
        "sampler": "uniform",
        "bands": 5,
        "seed": 4,
        "overlap": 1,
        "n_controls": 0,
        "guidelines": "GOOD when > 70 %.",
    }
    if blind:
        form["blind"] = "on"
    response = staff_client.post(reverse("campaign-new"), form)
    campaign = Campaign.objects.get(name="table 7")
    assert response.status_code == 302 and campaign.blind is blind and campaign.seed == 4
    assert CampaignItem.objects.filter(campaign=campaign).count() == 3
    client = Client()
    client.force_login(rita)
    html = client.get(reverse("campaign-review", args=[campaign.pk])).content.decode()
    assert "GOOD when &gt; 70 %." in html
    if blind:
        assert "Mining evidence" not in html and "1.234" not in html and "voisin" not in html
    else:
        assert "Mining evidence" in html and "1.234" in html and "length_ratio" in html
        assert "voisin &lt;i&gt;proche&lt;/i&gt;" in html


@pytest.mark.django_db
def test_campaign_form_rejects_an_overlap_above_the_reviewers(staff_client, reviewer_user):
    run = make_run(3)
    response = staff_client.post(
        reverse("campaign-new"),
        {
            "name": "x",
            "runs": [run.pk],
            "reviewers": [reviewer_user.pk],
            "sample_size": 2,
            "sampler": "uniform",
            "bands": 5,
            "seed": 0,
            "overlap": 2,
            "n_controls": 0,
            "guidelines": "g",
        },
    )
    assert response.status_code == 400 and not Campaign.objects.exists()
