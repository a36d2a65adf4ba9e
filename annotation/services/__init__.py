"""Write side of the review app: create campaigns (`campaigns`: sampling), the review queue (`review`: claim the
next item, label, undo) and their refusals (`errors`)."""

from .campaigns import CHECK_BANDS, CHECK_SAMPLE, campaign_create, check_estimate_campaign, confidence_threshold
from .errors import DuplicateLabel, NotAllowed, NotFound, ReviewError, StaleItem
from .review import (
    CLAIM_SECONDS,
    check_current,
    claim_cutoff,
    claim_locked,
    claim_next,
    item_claim,
    label_and_next,
    label_pair,
    label_submit,
    label_undo,
)

__all__ = [
    "CHECK_BANDS",
    "CHECK_SAMPLE",
    "CLAIM_SECONDS",
    "DuplicateLabel",
    "NotAllowed",
    "NotFound",
    "ReviewError",
    "StaleItem",
    "campaign_create",
    "check_current",
    "check_estimate_campaign",
    "claim_cutoff",
    "claim_locked",
    "claim_next",
    "confidence_threshold",
    "item_claim",
    "label_and_next",
    "label_pair",
    "label_submit",
    "label_undo",
]
