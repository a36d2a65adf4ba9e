"""Every cell of the access table (pcapp.roles.ACCESS, printed in docs/PERMISSIONS.md) against the running views:
anonymous, a plain user, a reviewer of the blind campaign A, a reviewer of campaign B only, and staff not in A.

Each row has one request builder here; the test checks the builders and the table cover each other, that each cell
is the status the view answers, and that a refused judgement stores nothing while an allowed one stores one label.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Campaign, Label, LabelMode
from annotation.selectors import estimable_labels
from annotation.services import campaign_create, item_claim, label_submit
from annotation.spec import CampaignSpec
from mining.models import DocumentPairCandidate, RunKind
from pcapp.roles import ACCESS, LOGIN, Access, Role, access_markdown, reviewers_group
from tests.factories.mining import CorpusFactory, DocumentFactory, MiningRunFactory, make_run

DOC = Path(__file__).resolve().parents[2] / "docs" / "PERMISSIONS.md"


@dataclass
class World:
    """Campaign A (blind, run R, reviewer `own`), campaign B (run S, reviewer `other`), run P in no campaign, a
    document pair D of a document run, a plain user and staff in no campaign."""

    a: Campaign
    b: Campaign
    r: Any
    s: Any
    p: Any
    d: DocumentPairCandidate
    users: dict[Role, Any]


@pytest.fixture
def world(django_user_model) -> World:
    def user(name: str, *, reviewer: bool = False, staff: bool = False):
        u = django_user_model.objects.create_user(name, is_staff=staff)  # no password: no hashing, force_login
        if reviewer:
            u.groups.add(reviewers_group())
        return u

    own, other = user("own", reviewer=True), user("other", reviewer=True)
    r, s, p = make_run(6), make_run(4), make_run(3)
    a = campaign_create(spec=CampaignSpec(name="A", sample_size=4, blind=True, seed=1), runs=[r], reviewers=[own])
    b = campaign_create(spec=CampaignSpec(name="B", sample_size=2, seed=1), runs=[s], reviewers=[other])
    corpus = CorpusFactory()
    d = DocumentPairCandidate.objects.create(
        run=MiningRunFactory(kind=RunKind.DOCUMENT, src_corpus=corpus),
        src=DocumentFactory(corpus=corpus, lang="en"),
        tgt=DocumentFactory(corpus=corpus, lang="fr"),
        cosine=0.9,
        score=1.3,
        rank=1,
    )
    users = {
        Role.ANONYMOUS: None,
        Role.USER: user("plain"),
        Role.REVIEWER_OWN: own,
        Role.REVIEWER_OTHER: other,
        Role.STAFF: user("boss", staff=True),
    }
    return World(a, b, r, s, p, d, users)


def _judged(w: World, who: Any) -> None:
    """`who` has judged one item of A (written through the services, which leave permissions to the views)."""
    item, _ = item_claim(campaign=w.a, reviewer=who)
    label_submit(campaign=w.a, reviewer=who, item_id=item.pk, verdict="GOOD")


def _current(w: World, who: Any) -> int:
    """An item of A held by `who` (any item of A for anonymous)."""
    if who is None:
        return w.a.items.first().pk
    return item_claim(campaign=w.a, reviewer=who)[0].pk


Request = Callable[[World, Any, Client, APIClient], Any]

REQUESTS: dict[str, Request] = {
    "dashboard": lambda w, u, c, api: c.get(reverse("dashboard")),
    "campaign-list": lambda w, u, c, api: c.get(reverse("campaign-list")),
    "campaign-review": lambda w, u, c, api: c.get(reverse("campaign-review", args=[w.a.pk])),
    "campaign-label": lambda w, u, c, api: c.post(
        reverse("campaign-label", args=[w.a.pk]), {"item": _current(w, u), "verdict": "BAD"}
    ),
    "campaign-undo": lambda w, u, c, api: (u and _judged(w, u), c.post(reverse("campaign-undo", args=[w.a.pk])))[1],
    "campaign-history": lambda w, u, c, api: (
        u and _judged(w, u),
        c.get(reverse("campaign-history", args=[w.a.pk, 0])),
    )[1],
    "campaign-new": lambda w, u, c, api: c.get(reverse("campaign-new")),
    "campaign-create": lambda w, u, c, api: c.post(
        reverse("campaign-new"),
        {"name": "C", "runs": [w.r.pk], "reviewers": [w.users[Role.REVIEWER_OWN].pk], "sample_size": 2},
    ),
    "campaign-results": lambda w, u, c, api: c.get(reverse("campaign-results", args=[w.a.pk])),
    "campaign-labels": lambda w, u, c, api: c.get(reverse("campaign-labels", args=[w.a.pk, "csv"])),
    "document-pair": lambda w, u, c, api: c.get(reverse("document-pair", args=[w.d.pk])),
    "document-pair-judge": lambda w, u, c, api: c.post(
        reverse("document-pair", args=[w.d.pk]), {"document_pair": w.d.pk, "verdict": "GOOD"}
    ),
    "run-list": lambda w, u, c, api: c.get(reverse("run-list")),
    "run-detail": lambda w, u, c, api: c.get(reverse("run-detail", args=[w.r.pk])),
    "run-results": lambda w, u, c, api: c.get(reverse("run-results", args=[w.r.pk])),
    "run-compare": lambda w, u, c, api: c.get(reverse("run-compare"), {"a": w.r.pk, "b": w.s.pk}),
    "run-check-estimate": lambda w, u, c, api: c.post(reverse("run-check-estimate", args=[w.r.pk])),
    "api-judge-item": lambda w, u, c, api: api.post(
        "/api/review/judgements/", {"campaign": w.a.pk, "item": _current(w, u), "verdict": "BAD"}, format="json"
    ),
    "api-judge-sampled": lambda w, u, c, api: api.post(
        "/api/review/judgements/",
        {"sentence_pair": w.a.items.first().sentence_pair_id, "verdict": "BAD"},
        format="json",
    ),
    "api-judge-pair": lambda w, u, c, api: api.post(
        "/api/review/judgements/", {"sentence_pair": w.p.sentence_pairs.first().pk, "verdict": "BAD"}, format="json"
    ),
    "api-campaign-create": lambda w, u, c, api: api.post(
        "/api/review/campaigns/",
        {"name": "C", "runs": [w.r.pk], "reviewers": [w.users[Role.REVIEWER_OWN].pk], "sample_size": 2},
        format="json",
    ),
    "api-campaign-results": lambda w, u, c, api: api.get(f"/api/review/campaigns/{w.a.pk}/results/"),
    "api-campaign-labels": lambda w, u, c, api: api.get(f"/api/review/campaigns/{w.a.pk}/labels/"),
    "api-run-list": lambda w, u, c, api: api.get("/api/runs/"),
    "api-run-detail": lambda w, u, c, api: api.get(f"/api/runs/{w.r.pk}/"),
    "api-candidates": lambda w, u, c, api: api.get(f"/api/runs/{w.r.pk}/candidates/"),
    "api-histogram": lambda w, u, c, api: api.get(f"/api/runs/{w.r.pk}/histogram/"),
    "api-root": lambda w, u, c, api: api.get("/api/"),
    "api-schema": lambda w, u, c, api: api.get("/api/schema/"),
    "api-docs": lambda w, u, c, api: api.get("/api/docs/"),
    "api-corpus-list": lambda w, u, c, api: api.get("/api/corpora/"),
    "api-corpus-detail": lambda w, u, c, api: api.get(f"/api/corpora/{w.r.src_corpus_id}/"),
}

WRITES_ONE_LABEL = {"campaign-label", "document-pair-judge", "api-judge-item", "api-judge-sampled", "api-judge-pair"}


def test_the_table_and_the_requests_cover_each_other():
    assert [row.key for row in ACCESS] == list(REQUESTS)
    assert WRITES_ONE_LABEL <= set(REQUESTS)


def test_docs_permissions_carries_the_table():
    assert access_markdown() in DOC.read_text(encoding="utf-8")


@pytest.mark.django_db
@pytest.mark.parametrize("role", list(Role), ids=[r.name.lower() for r in Role])
@pytest.mark.parametrize("row", ACCESS, ids=[row.key for row in ACCESS])
def test_access_cell(world: World, row: Access, role: Role):
    who = world.users[role]
    client, api = Client(), APIClient()
    if who is not None:
        client.force_login(who)
        api.force_authenticate(who)
    before = Label.objects.count()
    response = REQUESTS[row.key](world, who, client, api)
    expected = row.cell(role)
    if expected == LOGIN:
        assert response.status_code == 302 and response["Location"].startswith(reverse("login") + "?next=")
    else:
        assert response.status_code == expected, getattr(response, "content", b"")[:300]
    if row.key in WRITES_ONE_LABEL:
        assert Label.objects.count() - before == (1 if expected in (201, 302) and who is not None else 0)


@pytest.mark.django_db
def test_labels_by_route_carry_their_mode_and_only_rule_abiding_labels_are_estimable(world: World):
    own, staff = world.users[Role.REVIEWER_OWN], world.users[Role.STAFF]
    api = APIClient()
    api.force_authenticate(own)
    item = _current(world, own)
    assert (
        api.post("/api/review/judgements/", {"campaign": world.a.pk, "item": item, "verdict": "GOOD"}).status_code
        == 201
    )
    api.force_authenticate(staff)
    pair = world.p.sentence_pairs.first().pk
    assert api.post("/api/review/judgements/", {"sentence_pair": pair, "verdict": "BAD"}).status_code == 201
    rows = sorted(Label.objects.values_list("reviewer__username", "mode", "campaign_id", "item_id", "sentence_pair_id"))
    a_pair = world.a.items.get(pk=item).sentence_pair_id
    assert rows == [("boss", "staff", None, None, pair), ("own", "campaign", world.a.pk, item, a_pair)]
    assert sorted(estimable_labels().values_list("mode", flat=True)) == ["campaign", "staff"]
    assert LabelMode.UNCHECKED not in estimable_labels().values_list("mode", flat=True)


@pytest.mark.django_db
def test_a_blind_campaigns_reviewer_sees_no_score_and_no_good_rate(world: World):
    from django.db.models import F

    own = world.users[Role.REVIEWER_OWN]
    world.r.sentence_pairs.update(
        evidence={"cosine": 0.8123, "margin": 1.2345, "src_neighbours": [], "tgt_neighbours": []}
    )
    world.r.sentence_pairs.update(score=F("score") + 0.00017)  # scores like 1.50017: findable in a page if shown
    _judged(world, own)
    client = Client()
    client.force_login(own)
    pages = [
        client.get(reverse(name, args=args)).content.decode()
        for name, args in [("campaign-review", [world.a.pk]), ("campaign-list", []), ("dashboard", [])]
    ]
    for html in pages:
        assert "1.2345" not in html and "0.8123" not in html and "00017" not in html and "Mining evidence" not in html
    assert "GOOD rate" not in pages[1]  # the campaign list has no GOOD rate column for reviewers
    dashboard = pages[2]
    assert '<td class="good-rate">–</td>' in dashboard and "compare runs" not in dashboard
    detail = client.get(reverse("run-detail", args=[world.r.pk])).content.decode()
    assert 'id="results-link"' not in detail and "00017" not in detail
    staff = Client()
    staff.force_login(world.users[Role.STAFF])
    assert '<td class="good-rate">100 %</td>' in staff.get(reverse("dashboard")).content.decode()
    assert "100 %" in staff.get(reverse("campaign-list")).content.decode()


SCORE_KEYS = {
    "score",
    "cosine",
    "margin",
    "confidence",
    "threshold",
    "precision",
    "estimated_precision",
    "gold_precision",
    "default_threshold",
    "evidence",
    "good_rate",
    "yield_curve",
}
"""JSON keys that carry a score or a figure derived from scores."""
MARKS = ("23457", "87654", "91357", "11317", "00017", "8123", "2345")
"""Digits of the distinctive figures the test plants: none may appear in a body a reviewer gets."""


def _keys(value: Any) -> set[str]:
    """The keys under `value` that hold a figure (a number, a list or a block; a word such as margin "ratio" is a
    method's name, not a figure)."""
    if isinstance(value, dict):
        return {k for k, v in value.items() if not isinstance(v, str)} | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


@pytest.mark.django_db
def test_no_body_a_reviewer_of_a_blind_campaign_can_reach_carries_a_score(world: World):
    """Every GET the table allows the reviewer of blind campaign A, plus the htmx fragments their pages load: no
    planted score digit in any body, and no score key in any JSON data."""
    import json

    from django.db.models import F

    from mining.models import MiningRun

    own = world.users[Role.REVIEWER_OWN]
    world.r.sentence_pairs.update(
        evidence={"cosine": 0.8123, "margin": 1.2345, "src_neighbours": [], "tgt_neighbours": []},
        score=F("score") + 0.00017,
    )
    MiningRun.objects.filter(pk=world.r.pk).update(
        status="succeeded",
        params={"threshold": 1.11317, "k": 4, "margin": "ratio"},
        stats={
            "candidates": 6,
            "default_threshold": {"threshold": 1.23457, "estimated_precision": 0.87654, "assumption": "two modes"},
            "gold_precision": 0.91357,
            "knn": {"method": "exact", "compute": "fp32", "device": "cpu"},
        },
    )
    _judged(world, own)
    client, api = Client(), APIClient()
    client.force_login(own)
    api.force_authenticate(own)
    hx = {"HX-Request": "true"}
    fragments = {
        "run-progress": lambda: client.get(reverse("run-progress", args=[world.r.pk]), headers=hx),
        "item-card": lambda: client.get(reverse("campaign-review", args=[world.a.pk]), headers=hx),
        "history-card": lambda: client.get(reverse("campaign-history", args=[world.a.pk, 0]), headers=hx),
    }
    requests = {row.key: (lambda row=row: REQUESTS[row.key](world, own, client, api)) for row in ACCESS}
    allowed = [row.key for row in ACCESS if row.method == "GET" and row.cell(Role.REVIEWER_OWN) == 200]
    seen = []
    for key in [*allowed, *fragments]:
        response = (fragments.get(key) or requests[key])()
        assert response.status_code in (200, 286), key  # 286: the finished run's last progress fragment
        text = response.content.decode()
        assert [m for m in MARKS if m in text] == [], key
        if response["Content-Type"].startswith("application/json"):
            assert _keys(json.loads(text)) & SCORE_KEYS == set(), key
        seen.append(key)
    assert {"run-detail", "api-run-detail", "api-run-list", "campaign-review", "run-progress"} <= set(seen)
    # Staff see the figures the reviewer does not (so the planted values are there to be found).
    staff = APIClient()
    staff.force_authenticate(world.users[Role.STAFF])
    body = staff.get(f"/api/runs/{world.r.pk}/").json()
    assert body["params"]["threshold"] == 1.11317 and body["stats"]["gold_precision"] == 0.91357
    mine = api.get(f"/api/runs/{world.r.pk}/").json()
    assert mine["params"] == {"k": 4, "margin": "ratio"}
    assert mine["stats"] == {"candidates": 6, "knn": {"method": "exact", "compute": "fp32", "device": "cpu"}}


@pytest.mark.django_db
def test_blind_campaign_ids_follow_the_shuffle_not_the_sampler(django_user_model):
    """Items are written in queue order: ids rise with the seeded shuffle, so they carry no score order, and control
    items are spread among the others rather than written as one block with alternating answers."""
    from scipy.stats import spearmanr

    from annotation.models import CampaignItem

    run = make_run(60)
    reviewer = django_user_model.objects.create_user("blind")
    campaign = campaign_create(
        spec=CampaignSpec(name="blind", sample_size=60, sampler="top", blind=True, seed=3),
        runs=[run],
        reviewers=[reviewer],
    )
    rows = list(
        CampaignItem.objects.filter(campaign=campaign).order_by("id").values_list("position", "sentence_pair__rank")
    )
    assert [p for p, _ in rows] == sorted(p for p, _ in rows)  # id order is queue order
    ranks = [r for _, r in rows]
    assert abs(spearmanr(range(len(ranks)), ranks).statistic) < 0.3  # the top sampler's rank order is gone


@pytest.mark.django_db
def test_in_a_blind_campaign_a_control_items_card_is_a_sampled_items_card(django_user_model):
    """Control items (gold pairs, shuffled gold pairs) show the reviewer the same card as sampled candidates: the
    page differs only in the two sentences, the item id and the progress figures."""
    import re

    from annotation.models import CampaignItem
    from mining.models import GoldSentencePair

    run = make_run(6)
    pairs = list(run.sentence_pairs.select_related("src", "tgt"))
    for p in pairs:
        GoldSentencePair.objects.create(corpus=run.src_corpus, src=p.src, tgt=p.tgt)
    reviewer = django_user_model.objects.create_user("ctl")
    reviewer.groups.add(reviewers_group())
    campaign = campaign_create(
        spec=CampaignSpec(name="controls", sample_size=6, n_controls=4, blind=True, seed=2),
        runs=[run],
        reviewers=[reviewer],
    )
    client = Client()
    client.force_login(reviewer)
    cards: dict[bool, str] = {}
    texts = {s.pk: s.text for p in pairs for s in (p.src, p.tgt)}
    while len(cards) < 2:
        item, _ = item_claim(campaign=campaign, reviewer=reviewer)
        html = client.get(reverse("campaign-review", args=[campaign.pk]), headers={"HX-Request": "true"}).content
        html = html.decode().replace(texts[item.src_id], "SRC").replace(texts[item.tgt_id], "TGT")
        html = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "CSRF", html)  # new per response
        cards.setdefault(item.is_control, re.sub(r"\d+", "N", html))
        label_submit(campaign=campaign, reviewer=reviewer, item_id=item.pk, verdict="GOOD")
    assert CampaignItem.objects.filter(campaign=campaign, is_control=True).count() == 4
    assert cards[True] == cards[False]
