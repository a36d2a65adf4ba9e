"""The review flow: campaigns, the SKIP LOCKED queue, stale and duplicate submissions, undo, results, permissions,
escaping, query counts."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from annotation.models import Assignment, Campaign, CampaignItem, Label, Sampler
from annotation.selectors import campaign_results
from annotation.services import DuplicateLabel, StaleItem, campaign_create, item_claim, label_submit, label_undo
from annotation.spec import CampaignSpec
from mining.models import GoldSentencePair, SentencePairCandidate
from pcapp.roles import reviewers_group
from tests.factories.mining import make_run


def reviewers(django_user_model, n: int):
    users = [django_user_model.objects.create_user(f"rev{i}", password="pw-rev-123") for i in range(n)]
    for u in users:
        u.groups.add(reviewers_group())
    return users


def make_campaign(run, users, **kw) -> Campaign:
    return campaign_create(spec=CampaignSpec(name="eval", **{"sample_size": 6, **kw}), runs=[run], reviewers=users)


@pytest.mark.django_db
def test_samplers_pick_the_requested_items():
    run = make_run(20, scores=[2.0 - 0.05 * i for i in range(20)])
    top = campaign_create(spec=CampaignSpec(name="top", sampler=Sampler.TOP, sample_size=5), runs=[run], reviewers=[])
    assert sorted(top.items.values_list("sentence_pair__rank", flat=True)) == [1, 2, 3, 4, 5]
    uni_a = campaign_create(spec=CampaignSpec(name="u", sample_size=7, seed=3), runs=[run], reviewers=[])
    uni_b = campaign_create(spec=CampaignSpec(name="u", sample_size=7, seed=3), runs=[run], reviewers=[])
    assert sorted(uni_a.items.values_list("sentence_pair", flat=True)) == sorted(
        uni_b.items.values_list("sentence_pair", flat=True)
    )
    strat = campaign_create(
        spec=CampaignSpec(name="s", sampler=Sampler.STRATIFIED, sample_size=10, bands=5), runs=[run], reviewers=[]
    )
    assert set(strat.items.values_list("stratum", flat=True)) == {0, 1, 2, 3, 4}
    assert sum(size for _, size in set(strat.items.values_list("stratum", "stratum_size"))) == 20
    near = campaign_create(
        spec=CampaignSpec(name="t", sampler=Sampler.THRESHOLD, threshold=1.5, sample_size=3), runs=[run], reviewers=[]
    )
    assert sorted(near.items.values_list("sentence_pair__score", flat=True)) == pytest.approx([1.45, 1.5, 1.55])


@pytest.mark.django_db
def test_queue_respects_overlap_and_refuses_stale_and_duplicate(django_user_model):
    run = make_run(3)
    a, b, c = reviewers(django_user_model, 3)
    campaign = make_campaign(run, [a, b, c], overlap=2, sample_size=1)
    item_a, _ = item_claim(campaign=campaign, reviewer=a)
    item_b, _ = item_claim(campaign=campaign, reviewer=b)
    assert item_a == item_b  # overlap 2: both may hold it
    item_c, reason = item_claim(campaign=campaign, reviewer=c)
    assert item_c is None and reason == "done"  # a third reviewer is not given it
    label_submit(campaign=campaign, reviewer=a, item_id=item_a.pk, verdict="GOOD")
    with pytest.raises(DuplicateLabel):
        label_submit(campaign=campaign, reviewer=a, item_id=item_a.pk, verdict="BAD")
    with pytest.raises(StaleItem):
        label_submit(campaign=campaign, reviewer=c, item_id=item_a.pk, verdict="BAD")
    assert Label.objects.count() == 1


@pytest.mark.django_db
def test_an_abandoned_claim_expires_and_its_holder_is_then_stale(django_user_model):
    from datetime import timedelta

    from annotation.services import CLAIM_SECONDS

    a, b = reviewers(django_user_model, 2)
    campaign = make_campaign(make_run(3), [a, b], sample_size=1)
    item, _ = item_claim(campaign=campaign, reviewer=a)
    assert item_claim(campaign=campaign, reviewer=b) == (None, "done")  # held by a
    old = Assignment.objects.get(reviewer=a).claimed_at - timedelta(seconds=CLAIM_SECONDS + 1)
    Assignment.objects.filter(reviewer=a).update(claimed_at=old)
    assert item_claim(campaign=campaign, reviewer=b) == (item, "claimed")  # taken over
    with pytest.raises(StaleItem):
        label_submit(campaign=campaign, reviewer=a, item_id=item.pk, verdict="GOOD")
    label_submit(campaign=campaign, reviewer=b, item_id=item.pk, verdict="GOOD")
    assert item_claim(campaign=campaign, reviewer=a) == (None, "done")  # overlap 1 is used up
    assert Label.objects.count() == 1


@pytest.mark.django_db
def test_a_reviewer_back_after_a_pause_keeps_an_untaken_item(django_user_model):
    from datetime import timedelta

    from annotation.services import CLAIM_SECONDS

    (a,) = reviewers(django_user_model, 1)
    campaign = make_campaign(make_run(3), [a], sample_size=2)
    item, _ = item_claim(campaign=campaign, reviewer=a)
    Assignment.objects.filter(reviewer=a).update(
        claimed_at=Assignment.objects.get(reviewer=a).claimed_at - timedelta(seconds=CLAIM_SECONDS + 1)
    )
    assert item_claim(campaign=campaign, reviewer=a) == (item, "current")
    label_submit(campaign=campaign, reviewer=a, item_id=item.pk, verdict="GOOD")


@pytest.mark.django_db
def test_a_racing_double_submission_is_a_duplicate_not_a_second_label(django_user_model):
    (a,) = reviewers(django_user_model, 1)
    campaign = make_campaign(make_run(3), [a], sample_size=2)
    item, _ = item_claim(campaign=campaign, reviewer=a)
    # The other request of the race has inserted its label but this one already passed the current-item check:
    # simulate it by a label written behind the assignment's back.
    Label.objects.create(campaign=campaign, item=item, reviewer=a, verdict="GOOD")
    with pytest.raises(DuplicateLabel):
        label_submit(campaign=campaign, reviewer=a, item_id=item.pk, verdict="BAD")
    assert list(Label.objects.values_list("verdict", flat=True)) == ["GOOD"]
    assert Assignment.objects.filter(reviewer=a, item=item).exists()  # rolled back to the savepoint, intact


@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_never_share_an_item_beyond_overlap(django_user_model):
    run = make_run(10)
    users = reviewers(django_user_model, 6)
    campaign = make_campaign(run, users, overlap=1, sample_size=10)
    got: dict[int, int] = {}
    barrier = threading.Barrier(len(users))

    def claim(user):
        barrier.wait()
        item, _ = item_claim(campaign=campaign, reviewer=user)
        got[user.pk] = item.pk
        connection.close()

    threads = [threading.Thread(target=claim, args=(u,)) for u in users]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got.values())) == len(users)
    assert Assignment.objects.count() == len(users)


@pytest.mark.django_db
def test_undo_makes_the_last_item_current_again(django_user_model):
    (a,) = reviewers(django_user_model, 1)
    campaign = make_campaign(make_run(4), [a], sample_size=3)
    first, _ = item_claim(campaign=campaign, reviewer=a)
    label_submit(campaign=campaign, reviewer=a, item_id=first.pk, verdict="BAD")
    item_claim(campaign=campaign, reviewer=a)
    assert label_undo(campaign=campaign, reviewer=a) == first
    assert item_claim(campaign=campaign, reviewer=a) == (first, "current")
    assert Label.objects.count() == 0


@pytest.mark.django_db
def test_review_page_htmx_flow_escapes_text_and_answers_409(django_user_model):
    (a,) = reviewers(django_user_model, 1)
    run = make_run(3, texts=[("<script>alert(1)</script> x", "<b>y</b>")] * 3)
    campaign = make_campaign(run, [a], sample_size=3)
    client = Client()
    client.force_login(a)
    page = client.get(reverse("campaign-review", args=[campaign.pk]))
    html = page.content.decode()
    assert page.status_code == 200 and "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html
    assert "<html" in html
    item = Assignment.objects.get(reviewer=a).item
    partial = client.post(
        reverse("campaign-label", args=[campaign.pk]),
        {"item": item.pk, "verdict": "GOOD", "seconds": "2.5"},
        headers={"HX-Request": "true"},
    )
    assert partial.status_code == 200 and "<html" not in partial.content.decode()
    assert Label.objects.get().seconds_spent == 2.5
    again = client.post(
        reverse("campaign-label", args=[campaign.pk]),
        {"item": item.pk, "verdict": "BAD"},
        headers={"HX-Request": "true"},
    )
    assert again.status_code == 409 and b"already judged" in again.content


@pytest.mark.django_db
def test_permissions(django_user_model, staff_client):
    a, b = reviewers(django_user_model, 2)
    campaign = make_campaign(make_run(3), [a], sample_size=2)
    other = Client()
    other.force_login(b)
    assert other.get(reverse("campaign-review", args=[campaign.pk])).status_code == 404
    assert other.get(reverse("campaign-new")).status_code == 403
    assert other.get(reverse("campaign-results", args=[campaign.pk])).status_code == 403
    assert other.get(reverse("campaign-labels", args=[campaign.pk, "csv"])).status_code == 403
    assert staff_client.get(reverse("campaign-results", args=[campaign.pk])).status_code == 200
    assert b"eval" not in other.get(reverse("campaign-list")).content


@pytest.mark.django_db
def test_results_with_controls_kappa_and_exports(django_user_model, staff_client):
    a, b = reviewers(django_user_model, 2)
    run = make_run(6)
    for cand in SentencePairCandidate.objects.filter(run=run):
        GoldSentencePair.objects.get_or_create(corpus=run.src_corpus, src_id=cand.src_id, tgt_id=cand.tgt_id)
    campaign = make_campaign(run, [a, b], overlap=2, sample_size=4, n_controls=2)
    assert CampaignItem.objects.filter(campaign=campaign, is_control=True).count() == 2
    for user, verdicts in ((a, "GGBBGB"), (b, "GBBBGB")):
        for v in verdicts:
            item, _ = item_claim(campaign=campaign, reviewer=user)
            label_submit(campaign=campaign, reviewer=user, item_id=item.pk, verdict="GOOD" if v == "G" else "BAD")
    r = campaign_results(campaign)
    assert r["runs"][0].n_labels == 8 and 0 <= r["runs"][0].low <= r["runs"][0].good_rate <= r["runs"][0].high
    assert ("rev0", "rev1") in r["cohen"] and r["fleiss_items"] == 4
    assert r["reviewers"]["rev0"]["n_controls"] == 2
    page = staff_client.get(reverse("campaign-results", args=[campaign.pk]))
    assert page.status_code == 200 and b"Cohen" in page.content
    csv_body = b"".join(staff_client.get(reverse("campaign-labels", args=[campaign.pk, "csv"])).streaming_content)
    assert csv_body.count(b"\n") == 13  # header + 12 labels
    jsonl = b"".join(staff_client.get(reverse("campaign-labels", args=[campaign.pk, "jsonl"])).streaming_content)
    assert jsonl.count(b"\n") == 12


def _review_query_counts(client, campaign, user) -> tuple[int, int, int]:
    """Queries of the next-item GET (htmx), the label POST (answers the next item) and the campaign list."""
    from django.test.utils import CaptureQueriesContext

    client.get(reverse("campaign-review", args=[campaign.pk]))
    with CaptureQueriesContext(connection) as get:
        client.get(reverse("campaign-review", args=[campaign.pk]), headers={"HX-Request": "true"})
    item = Assignment.objects.get(reviewer=user, campaign=campaign).item
    with CaptureQueriesContext(connection) as post:
        r = client.post(
            reverse("campaign-label", args=[campaign.pk]),
            {"item": item.pk, "verdict": "GOOD"},
            headers={"HX-Request": "true"},
        )
    assert r.status_code == 200
    with CaptureQueriesContext(connection) as listing:
        client.get(reverse("campaign-list"))
    return len(get), len(post), len(listing)


@pytest.mark.django_db
def test_review_and_list_query_counts_are_pinned_and_flat(django_user_model, django_assert_num_queries):
    a, b = reviewers(django_user_model, 2)
    small = make_campaign(make_run(8), [a], sample_size=8)
    client = Client()
    client.force_login(a)
    client.get(reverse("campaign-review", args=[small.pk]))
    # Session, user, groups check, campaign, then one query for the current item with the card's rows, the
    # neighbours' texts and the progress (selectors.review_state: a plain read, no transaction).
    with django_assert_num_queries(5):
        client.get(reverse("campaign-review", args=[small.pk]), headers={"HX-Request": "true"})
    item = Assignment.objects.get(reviewer=a, campaign=small).item_id
    # Session, user, groups check, campaign; one transaction (here a savepoint in the test's, and its release): the
    # reviewer's row lock, the current item, the label with the claim's release (one statement), the next claim
    # (scan, recount under the lock, the new claim); then the next card with the progress (one query).
    with django_assert_num_queries(13):
        client.post(
            reverse("campaign-label", args=[small.pk]),
            {"item": item, "verdict": "GOOD"},
            headers={"HX-Request": "true"},
        )
    counts_small = _review_query_counts(client, small, a)
    # list 4 (session, user, groups check, campaigns with counts by subqueries).
    assert counts_small == (5, 13, 4)
    # Ten times the items, other campaigns, other reviewers' labels and a history of 25 labels: same counts.
    big = make_campaign(make_run(80), [a, b], sample_size=80, overlap=2)
    make_campaign(make_run(30), [a, b], sample_size=30)
    for who in (a, b):
        for _ in range(25):
            item, _ = item_claim(campaign=big, reviewer=who)
            label_submit(campaign=big, reviewer=who, item_id=item.pk, verdict="BAD")
    assert _review_query_counts(client, big, a) == counts_small


@pytest.mark.django_db
def test_judgement_api_follows_the_page_rules(django_user_model, staff_user):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    (a,) = reviewers(django_user_model, 1)
    campaign = make_campaign(make_run(3), [a], sample_size=2)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=a).key}")
    item, _ = item_claim(campaign=campaign, reviewer=a)
    ok = api.post(
        "/api/review/judgements/", {"campaign": campaign.pk, "item": item.pk, "verdict": "GOOD"}, format="json"
    )
    assert ok.status_code == 201 and ok.json()["next_item"] not in (None, item.pk)
    dup = api.post(
        "/api/review/judgements/", {"campaign": campaign.pk, "item": item.pk, "verdict": "BAD"}, format="json"
    )
    assert dup.status_code == 409
    assert api.get(f"/api/review/campaigns/{campaign.pk}/results/").status_code == 403
    staff = APIClient()
    staff.force_authenticate(staff_user)
    body = staff.get(f"/api/review/campaigns/{campaign.pk}/results/").json()
    assert body["n_labels"] == 1 and body["runs"][0]["good_rate"] == 1.0
    assert api.get(f"/api/review/campaigns/{campaign.pk}/labels/").status_code == 403  # reviewers do not export
    export = staff.get(f"/api/review/campaigns/{campaign.pk}/labels/")
    rows = [json.loads(line) for line in b"".join(export.streaming_content).splitlines()]
    assert [(r["item"], r["verdict"], r["reviewer"]) for r in rows] == [(item.pk, "GOOD", "rev0")]


@pytest.mark.django_db
def test_results_match_hand_computed_rate_interval_kappas_and_control_accuracy(django_user_model, staff_client):
    import math

    a, b = reviewers(django_user_model, 2)
    run = make_run(4)
    for cand in SentencePairCandidate.objects.filter(run=run):
        GoldSentencePair.objects.get_or_create(corpus=run.src_corpus, src_id=cand.src_id, tgt_id=cand.tgt_id)
    campaign = make_campaign(run, [a, b], overlap=2, sample_size=4, n_controls=2)
    plan = {a: ("GGBB", [True, True]), b: ("GBBB", [True, False])}  # verdicts by item order; controls right?
    for user, (verdicts, right) in plan.items():
        k = c = 0
        while True:
            item, _ = item_claim(campaign=campaign, reviewer=user)
            if item is None:
                break
            if item.is_control:
                flip = {"GOOD": "BAD", "BAD": "GOOD"}
                verdict = item.expected if right[c] else flip[item.expected]
                c += 1
            else:
                verdict = "GOOD" if verdicts[k] == "G" else "BAD"
                k += 1
            label_submit(campaign=campaign, reviewer=user, item_id=item.pk, verdict=verdict)
    r = campaign_results(campaign)
    (run_result,) = r["runs"]
    # 3 GOOD of 8 judgements; Wilson 95 % interval written out.
    z, n, p = 1.959963984540054, 8, 3 / 8
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert run_result.n_labels == 8 and run_result.good_rate == pytest.approx(p)
    assert (run_result.low, run_result.high) == pytest.approx((centre - half, centre + half), abs=1e-9)
    # Pairs (G,G) (G,B) (B,B) (B,B): po = 3/4, pe = 1/2 -> Cohen 0.5; Fleiss (0.75 - 34/64) / (1 - 34/64).
    kappa, shared = r["cohen"][("rev0", "rev1")]
    assert shared == 4 and kappa == pytest.approx(0.5)
    assert r["fleiss"] == pytest.approx((0.75 - 34 / 64) / (1 - 34 / 64))
    assert r["reviewers"]["rev0"]["control_accuracy"] == 1.0
    assert r["reviewers"]["rev1"]["control_accuracy"] == 0.5
    page = staff_client.get(reverse("campaign-results", args=[campaign.pk]))
    # shares as percentages, as the run page states precision (walk: "0.412 [0.109, 0.801]" beside "94.5 %")
    assert (
        f"<strong>37.5 %</strong> [{100 * (centre - half):.1f} %, {100 * (centre + half):.1f} %]".encode()
        in page.content
    )
    assert b'id="kept-precision-note"' not in page.content  # not a kept-set campaign
    assert b"<td>0.500</td><td>4</td>" in page.content  # Cohen's kappa of rev0 - rev1 on 4 shared items
