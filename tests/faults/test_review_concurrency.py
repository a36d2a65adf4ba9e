"""One reviewer's concurrent requests are serialised: parallel first loads of a campaign's review page and parallel
undos each get a normal answer (never a 500), and the queue's invariants hold afterwards.

Threads run the real views through Django's test client, each with its own database connection, on committed data
(transactional_db); a barrier starts them together. Counts are bounded and no assertion depends on timing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse

from annotation.models import Assignment, Campaign, Label
from annotation.services import campaign_create, item_claim, label_submit
from annotation.spec import CampaignSpec
from pcapp.roles import reviewers_group
from tests.factories.mining import make_run

pytestmark = pytest.mark.django_db(transaction=True)


def _reviewer(django_user_model, name: str):
    user = django_user_model.objects.create_user(name, password="pw-conc-1234")
    user.groups.add(reviewers_group())
    return user


def _campaign(reviewer, n: int) -> Campaign:
    return campaign_create(
        spec=CampaignSpec(name="concurrent", sample_size=n, seed=1), runs=[make_run(n)], reviewers=[reviewer]
    )


def _in_parallel(n: int, request: Callable[[Client], int], user) -> list[int]:
    """Status codes of `n` requests sent at once by the same logged-in user, each from its own thread."""
    statuses: list[int] = []
    barrier = threading.Barrier(n)
    lock = threading.Lock()

    def one() -> None:
        client = Client(raise_request_exception=False)
        client.force_login(user)
        try:
            barrier.wait()
            status = request(client)
        finally:
            connection.close()
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses


@pytest.mark.parametrize("htmx", [False, True])
def test_parallel_first_loads_of_the_review_page_share_one_claim(django_user_model, htmx):
    reviewer = _reviewer(django_user_model, "rita")
    campaign = _campaign(reviewer, 30)
    url = reverse("campaign-review", args=[campaign.pk])
    headers = {"HX-Request": "true"} if htmx else {}
    bodies: list[str] = []

    def load(client: Client) -> int:
        response = client.get(url, headers=headers)
        bodies.append(response.content.decode())
        return response.status_code

    statuses = _in_parallel(25, load, reviewer)
    assert statuses == [200] * 25
    (claim,) = Assignment.objects.filter(campaign=campaign, reviewer=reviewer)
    marker = f'name="item" value="{claim.item_id}"'
    assert sum(marker in body for body in bodies) == 25  # every page shows the one claimed item


def test_parallel_undos_each_take_back_one_label(django_user_model):
    reviewer = _reviewer(django_user_model, "ursula")
    campaign = _campaign(reviewer, 8)
    judged = []
    for _ in range(5):
        item, _ = item_claim(campaign=campaign, reviewer=reviewer)
        label_submit(campaign=campaign, reviewer=reviewer, item_id=item.pk, verdict="GOOD")
        judged.append(item.pk)
    item_claim(campaign=campaign, reviewer=reviewer)  # the sixth item is current, as after a judgement on the page
    url = reverse("campaign-undo", args=[campaign.pk])
    statuses = _in_parallel(5, lambda client: client.post(url).status_code, reviewer)
    assert statuses == [302] * 5  # each undo answers with the review page
    assert Label.objects.filter(campaign=campaign).count() == 0  # five undos took back the five labels, one each
    assert list(Assignment.objects.filter(campaign=campaign).values_list("reviewer_id", "item_id")) == [
        (reviewer.pk, judged[0])
    ]


def test_more_parallel_undos_than_labels_are_harmless(django_user_model):
    reviewer = _reviewer(django_user_model, "victor")
    campaign = _campaign(reviewer, 4)
    item, _ = item_claim(campaign=campaign, reviewer=reviewer)
    label_submit(campaign=campaign, reviewer=reviewer, item_id=item.pk, verdict="BAD")
    url = reverse("campaign-undo", args=[campaign.pk])
    statuses = _in_parallel(5, lambda client: client.post(url, headers={"HX-Request": "true"}).status_code, reviewer)
    assert statuses == [200] * 5
    assert Label.objects.filter(campaign=campaign).count() == 0
    assert list(Assignment.objects.filter(campaign=campaign).values_list("item_id", flat=True)) == [item.pk]


def test_parallel_submissions_of_one_item_give_one_label_and_409s(django_user_model):
    reviewer = _reviewer(django_user_model, "walter")
    campaign = _campaign(reviewer, 6)
    item, _ = item_claim(campaign=campaign, reviewer=reviewer)
    url = reverse("campaign-label", args=[campaign.pk])
    statuses = _in_parallel(
        5,
        lambda client: (
            client.post(url, {"item": item.pk, "verdict": "GOOD"}, headers={"HX-Request": "true"}).status_code
        ),
        reviewer,
    )
    assert sorted(statuses) == [200, 409, 409, 409, 409]
    assert list(Label.objects.filter(campaign=campaign).values_list("item_id", flat=True)) == [item.pk]
    assert Assignment.objects.filter(campaign=campaign, reviewer=reviewer).count() == 1


def test_a_claim_lock_does_not_block_the_foreign_key_checks_of_other_reviewers(django_user_model):
    """A claim locks its item FOR NO KEY UPDATE, which lets another transaction's foreign-key check (KEY SHARE, taken
    at the commit of a label or claim naming the item) through. With FOR UPDATE, two reviewers each holding a fresh
    claim on the item the other had just judged deadlocked at commit (issue 29); here the check would time out."""
    a, b = _reviewer(django_user_model, "xena"), _reviewer(django_user_model, "yann")
    campaign = campaign_create(
        spec=CampaignSpec(name="locks", sample_size=4, overlap=2, seed=1), runs=[make_run(4)], reviewers=[a, b]
    )
    claimed: list[int] = []
    holding, release = threading.Event(), threading.Event()

    def claim_and_hold() -> None:
        try:
            with transaction.atomic():
                claimed.append(item_claim(campaign=campaign, reviewer=a)[0].pk)
                holding.set()
                release.wait(30)
        finally:
            connection.close()

    thread = threading.Thread(target=claim_and_hold)
    thread.start()
    try:
        assert holding.wait(30)
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute("SET LOCAL lock_timeout = '5s'")
            cur.execute("SELECT id FROM annotation_campaignitem WHERE id = %s FOR KEY SHARE", [claimed[0]])
            assert cur.fetchall() == [(claimed[0],)]
    finally:
        release.set()
        thread.join()


def test_a_judgement_aborted_by_a_deadlock_is_run_again_and_stored_once(django_user_model, monkeypatch):
    import psycopg
    from django.db import OperationalError

    from annotation.services import review as services  # claim_next is looked up in the review module

    reviewer = _reviewer(django_user_model, "zoe")
    campaign = _campaign(reviewer, 6)
    item, _ = item_claim(campaign=campaign, reviewer=reviewer)
    real, failures = services.claim_next, []

    def deadlock_once(**kw):
        if not failures:  # after the label was written in the same transaction: all of it must roll back
            failures.append(1)
            try:
                raise psycopg.errors.DeadlockDetected("deadlock detected")
            except psycopg.Error as exc:
                raise OperationalError("deadlock detected") from exc
        return real(**kw)

    monkeypatch.setattr(services, "claim_next", deadlock_once)
    client = Client()
    client.force_login(reviewer)
    url = reverse("campaign-label", args=[campaign.pk])
    response = client.post(url, {"item": item.pk, "verdict": "GOOD"}, headers={"HX-Request": "true"})
    assert response.status_code == 200 and failures == [1]
    assert list(Label.objects.filter(campaign=campaign).values_list("item_id", flat=True)) == [item.pk]
    (nxt,) = Assignment.objects.filter(campaign=campaign, reviewer=reviewer)
    assert nxt.item_id != item.pk and f'name="item" value="{nxt.item_id}"' in response.content.decode()
