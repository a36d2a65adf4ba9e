"""The review queue: claim the next item, label it, undo, and label a pair directly."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from mining.models import (
    DocumentPairCandidate,
    SentencePairCandidate,
)
from pcapp.dbretry import retry_on_conflict
from pcapp.roles import is_staff
from pcapp.sql import prepared_cursor

from ..models import Assignment, Campaign, CampaignItem, Label, LabelMode, Verdict
from .errors import DuplicateLabel, NotAllowed, NotFound, ReviewError, StaleItem

CLAIM_SECONDS = 30 * 60
"""A claim (Assignment) older than this no longer holds its item against other reviewers (an abandoned tab)."""


def _lock_reviewer(reviewer: Any) -> None:
    """Serialise one reviewer's writes to the queue (claim, judge, undo) on their user row, inside the caller's
    transaction: parallel requests of one reviewer (several tabs, a double click, a burst of page loads) then run one
    after the other instead of racing into `one_current_item`. FOR NO KEY UPDATE does not block rows that merely
    reference the user (labels, assignments of other transactions)."""
    with prepared_cursor() as cur:
        cur.execute(f"SELECT id FROM {get_user_model()._meta.db_table} WHERE id = %s FOR NO KEY UPDATE", [reviewer.pk])


ASSIGNMENT = Assignment._meta.db_table
LABEL_COLUMNS = [f for f in Label._meta.concrete_fields if not f.primary_key]
"""What a campaign judgement writes (services._submit, one statement with the claim's release)."""
CARD = ("item__src", "item__tgt", "item__sentence_pair")
"""The item's sentences and candidate, loaded with the reviewer's assignment by item_claim."""


def _current(campaign: Campaign, reviewer: Any) -> Assignment | None:
    return Assignment.objects.filter(campaign=campaign, reviewer=reviewer).select_related(*CARD).first()


def claim_cutoff() -> datetime:
    """Claims made before this no longer hold their items (CLAIM_SECONDS)."""
    return timezone.now() - timedelta(seconds=CLAIM_SECONDS)


def item_claim(*, campaign: Campaign, reviewer: Any) -> tuple[CampaignItem | None, str]:
    """The reviewer's current item, claiming the next free one when there is none: (item, reason).

    A live current item is a plain read (one query, no transaction); otherwise `claim_locked`.
    """
    current = _current(campaign, reviewer)
    if current and current.claimed_at > claim_cutoff():
        return current.item, "current"
    return claim_locked(campaign=campaign, reviewer=reviewer)


def claim_locked(*, campaign: Campaign, reviewer: Any) -> tuple[CampaignItem | None, str]:
    """item_claim when the reviewer seemed to have no live current item: under the reviewer's lock
    (`_lock_reviewer`, so parallel first loads of the page share one claim), the current item is looked up again,
    an expired claim of it renewed, else `claim_next` takes the next free item (queue.md)."""
    cutoff = claim_cutoff()
    with transaction.atomic():
        _lock_reviewer(reviewer)  # then look again: a parallel request of this reviewer may have claimed meanwhile
        current = _current(campaign, reviewer)
        if current and current.claimed_at > cutoff:
            return current.item, "current"
        if current:  # back after a long pause: renew the claim unless another reviewer has taken the item over
            list(CampaignItem.objects.select_for_update(no_key=True).filter(pk=current.item_id).values_list("id"))
            if Assignment.objects.filter(pk=current.pk).update(claimed_at=timezone.now()):
                return current.item, "current"
        return claim_next(campaign=campaign, reviewer=reviewer)


def claim_next(*, campaign: Campaign, reviewer: Any) -> tuple[CampaignItem | None, str]:
    """Claim the next free item for the reviewer: (item, "claimed"), or (None, "done").

    Preconditions: inside a transaction that holds the reviewer's lock, and the reviewer has no live current item.
    Free = fewer than `overlap` labels plus live claims, not yet labelled by this reviewer. The row is locked FOR NO
    KEY UPDATE SKIP LOCKED: two reviewers claiming at once never get the same item beyond the overlap, and the lock
    does not conflict with the KEY SHARE locks that the foreign-key checks of other reviewers' labels and claims take
    on the item at their commit (a FOR UPDATE here deadlocked with them: issue 29). A claim older than CLAIM_SECONDS
    stops counting; whoever claims the item next deletes it (its holder then gets 409).
    """
    cutoff = claim_cutoff()
    skipped: list[int] = [0]
    with prepared_cursor() as cur:
        while True:
            cur.execute(
                """
                SELECT i.id FROM annotation_campaignitem i
                WHERE i.campaign_id = %(c)s AND NOT (i.id = ANY(%(skip)s::bigint[]))
                  AND NOT EXISTS (SELECT 1 FROM annotation_label l WHERE l.item_id = i.id AND l.reviewer_id = %(r)s)
                  AND (SELECT count(*) FROM annotation_label l WHERE l.item_id = i.id)
                    + (SELECT count(*) FROM annotation_assignment a
                       WHERE a.item_id = i.id AND a.claimed_at > %(cutoff)s) < %(o)s
                ORDER BY i.position
                FOR NO KEY UPDATE SKIP LOCKED
                LIMIT 1
                """,
                {"c": campaign.pk, "r": reviewer.pk, "o": campaign.overlap, "skip": skipped, "cutoff": cutoff},
            )
            row = cur.fetchone()
            if row is None:
                return None, "done"
            # The statement's snapshot may predate the commit of a claim that held this row's lock until just
            # now; a fresh statement (READ COMMITTED) under the lock sees it, so the overlap is never exceeded.
            cur.execute(
                "SELECT (SELECT count(*) FROM annotation_label WHERE item_id = %(i)s)"
                " + (SELECT count(*) FROM annotation_assignment WHERE item_id = %(i)s AND claimed_at > %(cutoff)s),"
                " EXISTS (SELECT 1 FROM annotation_assignment WHERE item_id = %(i)s AND claimed_at <= %(cutoff)s)",
                {"i": row[0], "cutoff": cutoff},
            )
            taken, expired = cur.fetchone()
            if taken < campaign.overlap:
                break
            skipped.append(row[0])
        if expired:  # expired claims on this item are taken over: their holders' submissions become stale (409)
            cur.execute(f"DELETE FROM {ASSIGNMENT} WHERE item_id = %s AND claimed_at <= %s", [row[0], cutoff])
        cur.execute(
            f"INSERT INTO {ASSIGNMENT} (campaign_id, item_id, reviewer_id, claimed_at) VALUES (%s, %s, %s, %s)",
            [campaign.pk, row[0], reviewer.pk, timezone.now()],
        )
    # The item without a query: its other fields load when first read (the review page reads its card in one query,
    # selectors.review_state; the API needs only its id).
    return CampaignItem.from_db(connection.alias, ["id", "campaign_id"], [row[0], campaign.pk]), "claimed"


def check_current(campaign: Campaign, reviewer: Any, item_id: int) -> tuple[int, int | None, int | None]:
    """The reviewer's assignment, which must be of `item_id` (else the submission is stale): (assignment id, the
    item's sentence pair id, its document pair id)."""
    with prepared_cursor() as cur:
        cur.execute(
            f"SELECT a.id, a.item_id, i.sentence_pair_id, i.document_pair_id FROM {ASSIGNMENT} a "
            f"JOIN {CampaignItem._meta.db_table} i ON i.id = a.item_id WHERE a.campaign_id = %s AND a.reviewer_id = %s",
            [campaign.pk, reviewer.pk],
        )
        current = cur.fetchone()
    if current is None or current[1] != item_id:
        if Label.objects.filter(item_id=item_id, reviewer=reviewer).exists():
            raise DuplicateLabel("you have already judged this item")
        raise StaleItem("this item is no longer your current one; the page shows your current item")
    return current[0], current[2], current[3]


@transaction.atomic
def label_submit(
    *,
    campaign: Campaign,
    reviewer: Any,
    item_id: int,
    verdict: str,
    reasons: Sequence[str] = (),
    comment: str = "",
    seconds: float = 0.0,
) -> Label:
    """Record a judgement of the reviewer's current item (refused as stale or duplicate when it is not)."""
    return _submit(campaign, reviewer, item_id, verdict, reasons, comment, seconds)


def _submit(
    campaign: Campaign, reviewer: Any, item_id: int, verdict: str, reasons: Sequence[str], comment: str, seconds: float
) -> Label:
    """label_submit's work, inside the caller's transaction (no savepoint of its own)."""
    if verdict not in Verdict.values:
        raise ReviewError(f"verdict must be GOOD or BAD, not '{verdict}'")
    _lock_reviewer(reviewer)
    assignment_id, pair_id, doc_pair_id = check_current(campaign, reviewer, item_id)
    label = Label(
        campaign=campaign,
        item_id=item_id,
        reviewer=reviewer,
        sentence_pair_id=pair_id,
        document_pair_id=doc_pair_id,
        verdict=verdict,
        mode=LabelMode.CAMPAIGN,
        reasons=list(reasons),
        comment=comment,
        seconds_spent=max(0.0, min(float(seconds), 3600.0)),
        created_at=timezone.now(),
    )
    # The label and the claim's release in one statement. A racing double submission hits label_once_per_item; the
    # whole transaction is then rolled back.
    columns = [f.column for f in LABEL_COLUMNS]
    values = [f.get_db_prep_save(getattr(label, f.attname), connection) for f in LABEL_COLUMNS]
    try:
        with prepared_cursor() as cur:
            cur.execute(
                f"WITH released AS (DELETE FROM {ASSIGNMENT} WHERE id = %s) "
                f"INSERT INTO {Label._meta.db_table} ({', '.join(columns)}) "
                f"VALUES ({', '.join(['%s'] * len(values))}) RETURNING id",
                [assignment_id, *values],
            )
            label.pk = cur.fetchone()[0]
    except IntegrityError as exc:
        raise DuplicateLabel("you have already judged this item") from exc
    label._state.adding, label._state.db = False, connection.alias
    return label


def label_and_next(
    *,
    campaign: Campaign,
    reviewer: Any,
    item_id: int,
    verdict: str,
    reasons: Sequence[str] = (),
    comment: str = "",
    seconds: float = 0.0,
    claim: bool = True,
) -> tuple[Label, CampaignItem | None]:
    """Judge the reviewer's current item and (with `claim`) claim their next one, in one transaction: one commit per
    judgement. Run again whole on a deadlock or serialisation failure, which keeps nothing of the failed try."""

    def attempt() -> tuple[Label, CampaignItem | None]:
        with transaction.atomic():
            label = _submit(campaign, reviewer, item_id, verdict, reasons, comment, seconds)
            return label, claim_next(campaign=campaign, reviewer=reviewer)[0] if claim else None

    return retry_on_conflict(attempt)


@transaction.atomic
def label_undo(*, campaign: Campaign, reviewer: Any) -> CampaignItem | None:
    """Take back the reviewer's last label in the campaign; its item becomes the current one again. Parallel undos
    of one reviewer run one after the other, each taking back one label."""
    _lock_reviewer(reviewer)
    last = Label.objects.filter(campaign=campaign, reviewer=reviewer).order_by("-created_at", "-id").first()
    if last is None:
        return None
    Assignment.objects.filter(campaign=campaign, reviewer=reviewer).delete()
    item = last.item
    last.delete()
    Assignment.objects.create(campaign=campaign, item=item, reviewer=reviewer)
    return item


@transaction.atomic
def label_pair(
    *,
    reviewer: Any,
    verdict: str,
    sentence_pair_id: int | None = None,
    document_pair_id: int | None = None,
    reasons: Sequence[str] = (),
    comment: str = "",
) -> Label:
    """A staff review of a sentence or document pair outside campaigns (the document-pair page, the API).

    Reviewers label only the items their campaigns hand them: anyone but staff is refused (NotAllowed), so every label
    outside campaigns is a staff review and says so (`mode`)."""
    if not is_staff(reviewer):
        raise NotAllowed("only staff judge pairs outside campaigns; reviewers judge the items of their campaigns")
    if verdict not in Verdict.values:
        raise ReviewError(f"verdict must be GOOD or BAD, not '{verdict}'")
    if (sentence_pair_id is None) == (document_pair_id is None):
        raise ReviewError("judge either a sentence pair or a document pair")
    # Checked here, since the foreign keys are only checked at commit, outside the duplicate check below.
    if sentence_pair_id is not None and not SentencePairCandidate.objects.filter(pk=sentence_pair_id).exists():
        raise NotFound(f"no such sentence pair: {sentence_pair_id}")
    if document_pair_id is not None and not DocumentPairCandidate.objects.filter(pk=document_pair_id).exists():
        raise NotFound(f"no such document pair: {document_pair_id}")
    try:
        with transaction.atomic():
            return Label.objects.create(
                reviewer=reviewer,
                verdict=verdict,
                mode=LabelMode.STAFF,
                reasons=list(reasons),
                comment=comment,
                sentence_pair_id=sentence_pair_id,
                document_pair_id=document_pair_id,
            )
    except IntegrityError as exc:
        raise DuplicateLabel("you have already judged this pair") from exc
