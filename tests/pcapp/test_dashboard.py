"""Dashboard: corpora, runs, what needs attention; flat query count."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from mining.models import JobStatus
from tests.factories.mining import CorpusFactory, MiningRunFactory

pytestmark = pytest.mark.django_db


def test_dashboard_shows_corpora_runs_and_attention(staff_client):
    CorpusFactory(name="demo-<corpus>", languages=["en", "fr"], stats={"sentences": 42})
    MiningRunFactory(name="broken", status=JobStatus.FAILED, error="Boom <b>", finished_at=timezone.now())
    MiningRunFactory(name="busy", status=JobStatus.RUNNING, stage="knn", done=3, total=9)
    html = staff_client.get(reverse("dashboard")).content.decode()
    assert "demo-&lt;corpus&gt;" in html and "42" in html
    attention = html[html.index('id="attention"') : html.index('id="corpora"')]
    assert "broken" in attention and "Boom &lt;b&gt;" in attention
    assert "busy" in attention and "nearest neighbours: 3 / 9 (33 % of this stage)" in attention
    assert reverse("run-start") in html


def test_dashboard_lists_failed_imports_for_staff_only(staff_client, reviewer_user):
    from django.test import Client

    from mining.models import ImportJob

    reviewer_client = Client()
    reviewer_client.force_login(reviewer_user)
    ImportJob.objects.create(
        corpus_name="bad-upload",
        format="tsv",
        status=JobStatus.FAILED,
        error="line 3: <tab>",
        finished_at=timezone.now(),
    )
    assert "bad-upload" in staff_client.get(reverse("dashboard")).content.decode()
    assert "line 3: &lt;tab&gt;" in staff_client.get(reverse("dashboard")).content.decode()
    assert "bad-upload" not in reviewer_client.get(reverse("dashboard")).content.decode()


def test_reviewer_dashboard_hides_staff_links(reviewer_client):
    CorpusFactory()
    html = reviewer_client.get(reverse("dashboard")).content.decode()
    assert 'id="start-run"' not in html and ">mine<" not in html


def test_dashboard_query_count_is_flat(staff_client):
    counts = []
    for n in (1, 15):
        for _ in range(n):
            MiningRunFactory(status=JobStatus.FAILED, finished_at=timezone.now())
        with CaptureQueriesContext(connection) as ctx:
            assert staff_client.get(reverse("dashboard")).status_code == 200
        counts.append(len(ctx))
    assert counts[0] == counts[1]


def test_dashboard_campaigns_progress_good_rate_and_waiting(reviewer_client, reviewer_user):
    from annotation.models import Label
    from annotation.services import campaign_create
    from annotation.spec import CampaignSpec
    from tests.factories.mining import make_run

    run = make_run(4)
    campaign = campaign_create(
        spec=CampaignSpec(name="camp <1>", sample_size=4, seed=1), runs=[run], reviewers=[reviewer_user]
    )
    items = list(campaign.items.all())
    for item, verdict in zip(items[:3], ["GOOD", "GOOD", "BAD"], strict=True):
        Label.objects.create(
            campaign=campaign, item=item, reviewer=reviewer_user, verdict=verdict, sentence_pair=item.sentence_pair
        )
    html = reviewer_client.get(reverse("dashboard")).content.decode()
    assert "camp &lt;1&gt;" in html and "3/4" in html and "75 %" in html
    assert '<td class="good-rate">–</td>' in html  # no GOOD rate for reviewers (docs/PERMISSIONS.md)
    attention = html[html.index('id="attention"') : html.index('id="corpora"')]
    assert "1 item(s) waiting for your review" in attention
    assert reverse("campaign-review", args=[campaign.pk]) in attention
