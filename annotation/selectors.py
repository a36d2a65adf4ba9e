"""Read side of the review app: campaigns a user may see, the item card's data, history and results.

The queue itself (which item a reviewer gets) is `services.item_claim`; its algorithm is described in queue.md.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from itertools import combinations
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import Count, Exists, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.urls import reverse

from mining.core.agreement import cohen_kappa, fleiss_kappa
from mining.core.calibration.estimates import weighted_proportion
from mining.models import Sentence, SentencePairCandidate
from pcapp.roles import is_staff
from pcapp.sql import prepared_cursor

from .models import Assignment, Campaign, CampaignItem, Label, LabelMode, Sampler, Verdict


def _count(qs: QuerySet) -> Subquery:
    return Subquery(
        qs.order_by().values("campaign").annotate(n=Count("id")).values("n")[:1], output_field=IntegerField()
    )


def estimable_labels() -> QuerySet[Label]:
    """The labels that may enter estimates (thresholds, precision, calibration) and training: labels of campaign items
    and staff reviews. Labels made outside campaigns before reviewers were held to their campaigns (mode 'unchecked')
    are kept out by this rule."""
    return Label.objects.filter(mode__in=[LabelMode.CAMPAIGN, LabelMode.STAFF])


def campaigns_for(user: Any) -> QuerySet[Campaign]:
    """Staff see every campaign; reviewers only theirs. Annotated with item and label counts by correlated
    subqueries (no join fan-out between items and labels), in one query. The GOOD count is staff's: a reviewer's
    campaign results are not shown to them (n_good is None), so they judge unanchored."""
    qs = Campaign.objects.all() if user.is_staff else Campaign.objects.filter(reviewers=user)
    labels = Label.objects.filter(campaign=OuterRef("pk"))
    good = Coalesce(_count(labels.filter(verdict=Verdict.GOOD)), 0) if is_staff(user) else Value(None, IntegerField())
    return qs.annotate(
        n_items=Coalesce(_count(CampaignItem.objects.filter(campaign=OuterRef("pk"))), 0),
        n_labels=Coalesce(_count(labels), 0),
        n_good=good,
        n_mine=Coalesce(_count(labels.filter(reviewer=user)), 0),
        is_reviewer=Exists(Campaign.reviewers.through.objects.filter(campaign_id=OuterRef("pk"), user_id=user.pk)),
    ).order_by("-created_at")


_CAMPAIGN_FIELDS = [f.attname for f in Campaign._meta.concrete_fields]
_CAMPAIGN_SQL = (
    f"SELECT {', '.join('c.' + f.column for f in Campaign._meta.concrete_fields)} FROM {Campaign._meta.db_table} c "
    "WHERE c.id = %(c)s"
)
_REVIEWERS = Campaign.reviewers.through._meta.db_table
CAMPAIGN_FOR_SQL = {
    True: _CAMPAIGN_SQL,
    False: _CAMPAIGN_SQL
    + f" AND EXISTS (SELECT 1 FROM {_REVIEWERS} r WHERE r.campaign_id = c.id AND r.user_id = %(u)s)",
}
"""campaign_for's query, by whether the user is staff (who may see every campaign)."""


def campaign_for(user: Any, pk: int) -> Campaign:
    """A campaign the user may review (DoesNotExist otherwise). Plain SQL: it runs on every review request, and the
    ORM's compilation of the query cost more than the query (the fields need no conversion from the database)."""
    with prepared_cursor() as cur:
        cur.execute(CAMPAIGN_FOR_SQL[bool(user.is_staff)], {"c": pk, "u": user.pk})
        row = cur.fetchone()
    if row is None:
        raise Campaign.DoesNotExist(f"no campaign {pk} among the user's")
    return Campaign.from_db(connection.alias, _CAMPAIGN_FIELDS, row)


@dataclass(frozen=True)
class ItemCard:
    """What the review card shows for one item."""

    item: CampaignItem
    src: Sentence
    tgt: Sentence
    evidence: dict
    src_neighbours: list[tuple[str, float]]
    tgt_neighbours: list[tuple[str, float]]


@dataclass(frozen=True)
class ReviewState:
    """What the review page shows a reviewer: their current item's card (None without a current item), when they
    claimed it, and their progress (items judged, items left)."""

    card: ItemCard | None
    claimed_at: datetime | None
    n_done: int
    n_left: int


def _neighbours(evidence: dict, key: str, texts: dict) -> list[tuple[str, float]]:
    return [(texts.get(str(int(i)), "?"), s) for i, s in evidence.get(key, [])]


def _as_array(path: str) -> str:
    return f"CASE jsonb_typeof({path}) WHEN 'array' THEN {path} ELSE '[]'::jsonb END"


_STATE_SQL = f"""
SELECT a.claimed_at, i.id, i.position, i.run_id, i.sentence_pair_id, i.document_pair_id, i.src_id, i.tgt_id,
  i.is_control, s.lang, s.text, t.lang, t.text, {{evidence}},
  (SELECT count(*) FROM {CampaignItem._meta.db_table} WHERE campaign_id = %(c)s),
  (SELECT count(*) FROM {Label._meta.db_table} WHERE campaign_id = %(c)s AND reviewer_id = %(r)s)
FROM (SELECT 1) AS one
LEFT JOIN {Assignment._meta.db_table} a ON a.campaign_id = %(c)s AND a.reviewer_id = %(r)s
LEFT JOIN {CampaignItem._meta.db_table} i ON i.id = a.item_id
LEFT JOIN {Sentence._meta.db_table} s ON s.id = i.src_id
LEFT JOIN {Sentence._meta.db_table} t ON t.id = i.tgt_id
{{join}}
"""
_NEIGHBOURS = " || ".join(_as_array(f"p.evidence->'{key}'") for key in ("src_neighbours", "tgt_neighbours"))
_EVIDENCE = (
    f"p.evidence, (SELECT jsonb_object_agg(n.id, n.text) FROM {Sentence._meta.db_table} n "
    f"WHERE n.id IN (SELECT (e->>0)::bigint FROM jsonb_array_elements({_NEIGHBOURS}) e))"
)
REVIEW_STATE_SQL = {
    False: _STATE_SQL.format(
        evidence=_EVIDENCE, join=f"LEFT JOIN {SentencePairCandidate._meta.db_table} p ON p.id = i.sentence_pair_id"
    ),
    True: _STATE_SQL.format(evidence="NULL, NULL", join=""),
}
"""The review state's query, by the campaign's blindness: a blind campaign's card never loads the evidence."""


def review_state(campaign: Campaign, reviewer: Any) -> ReviewState:
    """The reviewer's current item with everything its card shows (sentences, and unless the campaign is blind the
    mining evidence and the competing neighbours' texts) and their progress, in one query (no lock, no transaction).
    It runs on every review request: plain SQL, since the ORM's compilation of the joins cost more than the query."""
    with prepared_cursor() as cur:
        cur.execute(REVIEW_STATE_SQL[bool(campaign.blind)], {"c": campaign.pk, "r": reviewer.pk})
        row = cur.fetchone()
    claimed_at, item_id, n_items, n_mine = row[0], row[1], row[15], row[16]
    if item_id is None:
        return ReviewState(card=None, claimed_at=None, n_done=n_mine, n_left=n_items - n_mine)
    position, run_id, pair_id, doc_pair_id, src_id, tgt_id, is_control = row[2:9]
    item = CampaignItem(
        id=item_id,
        campaign_id=campaign.pk,
        run_id=run_id,
        position=position,
        sentence_pair_id=pair_id,
        document_pair_id=doc_pair_id,
        src_id=src_id,
        tgt_id=tgt_id,
        is_control=is_control,
    )
    item._state.adding, item._state.db = False, connection.alias
    src = Sentence(id=src_id, lang=row[9], text=row[10]) if src_id is not None else None
    tgt = Sentence(id=tgt_id, lang=row[11], text=row[12]) if tgt_id is not None else None
    evidence, texts = row[13], row[14]
    evidence = (json.loads(evidence) if isinstance(evidence, str) else evidence) or {}
    texts = (json.loads(texts) if isinstance(texts, str) else texts) or {}
    card = ItemCard(
        item=item,
        src=src,
        tgt=tgt,
        evidence=evidence,
        src_neighbours=_neighbours(evidence, "src_neighbours", texts),
        tgt_neighbours=_neighbours(evidence, "tgt_neighbours", texts),
    )
    return ReviewState(card=card, claimed_at=claimed_at, n_done=n_mine, n_left=n_items - n_mine)


def history(campaign: Campaign, reviewer: Any) -> list[Label]:
    """The reviewer's labels in the campaign, oldest first, with their sentences (one query)."""
    return list(
        Label.objects.filter(campaign=campaign, reviewer=reviewer)
        .select_related("item__src", "item__tgt")
        .order_by("created_at", "id")
    )


@dataclass(frozen=True)
class RunResult:
    run_id: int
    run_name: str
    n_labels: int
    good_rate: float
    low: float
    high: float


def _run_estimates(rows: list[tuple], runs: dict[int, str]) -> list[RunResult]:
    """GOOD rate per run with its Wilson interval; stratified items weighted by stratum size over labels drawn."""
    per_run: dict[int, list[tuple]] = defaultdict(list)
    for row in rows:
        per_run[row[1]].append(row)
    results = []
    for run_id, mine in sorted(per_run.items()):
        good = np.array([r[7] == Verdict.GOOD for r in mine])
        weights = None
        if any(r[9] in (Sampler.STRATIFIED, Sampler.KEPT) for r in mine):
            drawn: dict[int, int] = defaultdict(int)
            for r in mine:
                drawn[r[4]] += 1
            weights = np.array([r[5] / drawn[r[4]] for r in mine], dtype=np.float64)
        est = weighted_proportion(good, weights)
        results.append(
            RunResult(run_id, runs.get(run_id, f"run {run_id}"), len(mine), est.precision, est.low, est.high)
        )
    return results


def campaign_results(campaign: Campaign) -> dict[str, Any]:
    """GOOD rate with a 95 % interval per run, Cohen's and Fleiss' kappa, control accuracy and progress per
    reviewer. Stratified campaigns (and those stratified over the kept set) weight each label by its stratum's size
    over the labels drawn from it.

    Items drawn by the uncertain sampler (active sampling) never enter the per-run rates: they were picked for being
    near the threshold, so they would bias them. Their GOOD rate is given apart (`active`), without an interval.
    """
    labels = list(
        Label.objects.filter(campaign=campaign).values_list(
            "item_id",
            "item__run_id",
            "item__is_control",
            "item__expected",
            "item__stratum",
            "item__stratum_size",
            "reviewer__username",
            "verdict",
            "seconds_spent",
            "item__sampler",
        )
    )
    runs = {r.pk: str(r) for r in campaign.runs.all()}
    sampled = [r for r in labels if not r[2]]
    results = _run_estimates([r for r in sampled if r[9] != Sampler.UNCERTAIN], runs)
    active = [
        RunResult(x.run_id, x.run_name, x.n_labels, x.good_rate, float("nan"), float("nan"))
        for x in _run_estimates([r for r in sampled if r[9] == Sampler.UNCERTAIN], runs)
    ]
    by_item: dict[int, dict[str, str]] = defaultdict(dict)
    for item_id, _, is_control, _, _, _, who, verdict, _, _ in labels:
        if not is_control:
            by_item[item_id][who] = verdict
    reviewers = sorted({r[6] for r in labels})
    cohen = {}
    for a, b in combinations(reviewers, 2):
        shared = [(v[a], v[b]) for v in by_item.values() if a in v and b in v]
        if shared:
            cohen[(a, b)] = (
                cohen_kappa(np.array([x for x, _ in shared]), np.array([y for _, y in shared])),
                len(shared),
            )
    full = [v for v in by_item.values() if len(v) == campaign.overlap]
    fleiss = float("nan")
    if campaign.overlap >= 2 and full:
        counts = np.array(
            [[sum(x == Verdict.GOOD for x in v.values()), sum(x == Verdict.BAD for x in v.values())] for v in full]
        )
        fleiss = fleiss_kappa(counts)
    per_reviewer = {}
    n_items = CampaignItem.objects.filter(campaign=campaign).count()
    for who in reviewers:
        mine = [r for r in labels if r[6] == who]
        controls = [r for r in mine if r[2]]
        per_reviewer[who] = {
            "labels": len(mine),
            "items": n_items,
            "control_accuracy": (sum(r[7] == r[3] for r in controls) / len(controls)) if controls else None,
            "n_controls": len(controls),
            "median_seconds": float(np.median([r[8] for r in mine])) if mine else None,
        }
    return {
        "runs": results,
        "active": active,
        "cohen": cohen,
        "fleiss": fleiss,
        "fleiss_items": len(full),
        "reviewers": per_reviewer,
        "n_items": n_items,
        "n_labels": len(labels),
    }


LABEL_FIELDS = [
    "campaign",
    "item",
    "run",
    "reviewer",
    "verdict",
    "reasons",
    "comment",
    "seconds_spent",
    "is_control",
    "expected",
    "sampler",
    "stratum",
    "stratum_size",
    "src",
    "tgt",
    "score",
    "created_at",
]


def label_rows(campaign: Campaign) -> Iterator[dict]:
    """The campaign's labels as export rows (LABEL_FIELDS), streamed from the database in chunks."""
    qs = (
        Label.objects.filter(campaign=campaign)
        .select_related("item__src", "item__tgt", "reviewer", "sentence_pair")
        .order_by("id")
    )
    for lab in qs.iterator(chunk_size=2000):
        item = lab.item
        yield {
            "campaign": campaign.pk,
            "item": item.pk if item else None,
            "run": item.run_id if item else None,
            "reviewer": lab.reviewer.get_username(),
            "verdict": lab.verdict,
            "reasons": ";".join(lab.reasons),
            "comment": lab.comment,
            "seconds_spent": round(lab.seconds_spent, 2),
            "is_control": item.is_control if item else False,
            "expected": item.expected if item else "",
            "sampler": item.sampler if item else "",
            "stratum": item.stratum if item else None,
            "stratum_size": item.stratum_size if item else None,
            "src": item.src.text if item and item.src else "",
            "tgt": item.tgt.text if item and item.tgt else "",
            "score": lab.sentence_pair.score if lab.sentence_pair else None,
            "created_at": lab.created_at.isoformat(),
        }


def campaign_summaries(*, user: Any) -> list[dict[str, Any]]:
    """The user's campaigns (staff: all) with items, labels, progress, items waiting for the user and, for staff,
    the GOOD rate."""
    out = []
    for c in campaigns_for(user)[:20]:
        expected = c.n_items * c.overlap
        out.append(
            {
                "name": c.name,
                "url": reverse("campaign-review", args=[c.pk]),
                "items": c.n_items,
                "results_url": reverse("campaign-results", args=[c.pk]) if is_staff(user) else "",
                "labelled": c.n_labels,
                "wanted": expected,
                "progress": 100.0 * min(c.n_labels, expected) / expected if expected else 0.0,
                "good_rate": c.n_good / c.n_labels if c.n_labels and c.n_good is not None else None,
                "waiting_for_user": max(0, c.n_items - c.n_mine) if c.is_reviewer else 0,
            }
        )
    return out
