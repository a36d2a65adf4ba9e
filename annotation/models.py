"""Review data model: campaigns of sampled items, reviewers' current items (assignments), and labels."""

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from mining.models.verdict import Verdict

from .spec import DEFAULT_GUIDELINES, DEFAULTS, Sampler

__all__ = ["DEFAULT_GUIDELINES", "Sampler", "Verdict"]  # re-exported: defined with the campaign spec / shared


class Reason(models.TextChoices):
    WRONG_LANGUAGE = "wrong_language", "Wrong language"
    PARTIAL = "partial", "Partial translation"
    NOT_TRANSLATION = "not_translation", "Not a translation"
    MACHINE = "machine_translation", "Machine translation"


class LabelMode(models.TextChoices):
    """How a label came about. Only CAMPAIGN and STAFF labels may enter estimates and training
    (`selectors.estimable_labels`)."""

    CAMPAIGN = "campaign", "A campaign item handed to its reviewer by the queue"
    STAFF = "staff", "Staff review of a pair outside campaigns"
    UNCHECKED = "unchecked", "Made outside campaigns before this rule (kept out of estimates and training)"


ESTIMATE_SAMPLERS = (Sampler.UNIFORM, Sampler.STRATIFIED)
"""Probability samplers: every candidate has a known chance of being drawn, so their labels (stratum-weighted)
estimate a run's precision at any threshold. The others pick by score or confidence: their labels may train a
calibration model but never enter a precision estimate."""


class Campaign(models.Model):
    """A human evaluation of one or more runs (the papers' GOOD/BAD judgements)."""

    name = models.CharField(max_length=200)
    runs = models.ManyToManyField("mining.MiningRun", related_name="campaigns")
    reviewers = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="review_campaigns")
    guidelines = models.TextField(default=DEFAULTS["guidelines"])
    sample_size = models.PositiveIntegerField(
        default=DEFAULTS["sample_size"], help_text="Items per run (the paper used 200)."
    )
    sampler = models.CharField(max_length=16, choices=Sampler.choices, default=DEFAULTS["sampler"])
    threshold = models.FloatField(null=True, blank=True, help_text="For the 'around the threshold' sampler.")
    bands = models.PositiveSmallIntegerField(
        default=DEFAULTS["bands"], help_text="Score bands of the stratified sampler."
    )
    n_uncertain = models.PositiveIntegerField(
        default=DEFAULTS["n_uncertain"],
        help_text=(
            "Extra items per run drawn by the uncertain sampler (active sampling), kept apart from the sample that "
            "estimates precision."
        ),
    )
    seed = models.IntegerField(default=DEFAULTS["seed"])
    overlap = models.PositiveSmallIntegerField(default=DEFAULTS["overlap"], help_text="Reviewers who judge each item.")
    n_controls = models.PositiveIntegerField(
        default=DEFAULTS["n_controls"], help_text="Known GOOD/BAD control items per run."
    )
    blind = models.BooleanField(default=DEFAULTS["blind"], help_text="Hide the mining evidence from reviewers.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name


class CampaignItem(models.Model):
    """One pair to judge: a sampled candidate, or a control item built from the corpus (no candidate)."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="items")
    run = models.ForeignKey("mining.MiningRun", null=True, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveIntegerField()
    sentence_pair = models.ForeignKey(  # checked by statement triggers, not a per-row FK: see migration 0004
        "mining.SentencePairCandidate",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="campaign_items",
        db_constraint=False,
    )
    document_pair = models.ForeignKey(
        "mining.DocumentPairCandidate", null=True, blank=True, on_delete=models.CASCADE, related_name="campaign_items"
    )
    src = models.ForeignKey("mining.Sentence", null=True, on_delete=models.CASCADE, related_name="+")
    tgt = models.ForeignKey("mining.Sentence", null=True, on_delete=models.CASCADE, related_name="+")
    is_control = models.BooleanField(default=False)
    expected = models.CharField(
        max_length=4,
        choices=Verdict.choices,
        blank=True,
        help_text="Known answer of a control item (never shown to reviewers).",
    )
    sampler = models.CharField(
        max_length=16,
        choices=Sampler.choices,
        blank=True,
        help_text="The sampler that drew this item (blank for control items).",
    )
    stratum = models.SmallIntegerField(default=0)
    stratum_size = models.PositiveIntegerField(default=0, help_text="Candidates of the run in this item's stratum.")

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["campaign", "position"], name="item_unique_position")]


class Assignment(models.Model):
    """The item a reviewer is judging now (at most one per reviewer and campaign)."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="assignments")
    item = models.ForeignKey(CampaignItem, on_delete=models.CASCADE, related_name="assignments")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    claimed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["campaign", "reviewer"], name="one_current_item"),
            models.UniqueConstraint(fields=["item", "reviewer"], name="assignment_unique_item_reviewer"),
        ]


class Label(models.Model):
    """A GOOD/BAD judgement of a pair: of a campaign item by a reviewer the queue handed it to, or a staff review of a
    pair outside campaigns (`mode` records which; a database constraint ties it to the campaign and item)."""

    campaign = models.ForeignKey(Campaign, null=True, blank=True, on_delete=models.CASCADE, related_name="labels")
    item = models.ForeignKey(CampaignItem, null=True, blank=True, on_delete=models.CASCADE, related_name="labels")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="labels")
    sentence_pair = models.ForeignKey(  # checked by statement triggers, not a per-row FK: see migration 0004
        "mining.SentencePairCandidate",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="labels",
        db_constraint=False,
    )
    document_pair = models.ForeignKey(
        "mining.DocumentPairCandidate", null=True, blank=True, on_delete=models.CASCADE, related_name="labels"
    )
    verdict = models.CharField(max_length=4, choices=Verdict.choices)
    mode = models.CharField(max_length=16, choices=LabelMode.choices, default=LabelMode.CAMPAIGN)
    reasons = ArrayField(models.CharField(max_length=32, choices=Reason.choices), default=list, blank=True)
    comment = models.TextField(blank=True)
    seconds_spent = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["item", "reviewer"], name="label_once_per_item", condition=Q(item__isnull=False)
            ),
            models.UniqueConstraint(
                fields=["sentence_pair", "reviewer"],
                name="label_once_per_pair",
                condition=Q(campaign__isnull=True, sentence_pair__isnull=False),
            ),
            models.UniqueConstraint(
                fields=["document_pair", "reviewer"],
                name="label_once_per_doc_pair",
                condition=Q(campaign__isnull=True, document_pair__isnull=False),
            ),
            models.CheckConstraint(
                condition=Q(mode=LabelMode.CAMPAIGN, campaign__isnull=False, item__isnull=False)
                | Q(mode__in=[LabelMode.STAFF, LabelMode.UNCHECKED], campaign__isnull=True, item__isnull=True),
                name="label_campaign_or_staff",
            ),
        ]
        indexes = [models.Index(fields=["campaign", "reviewer", "-created_at"], name="label_campaign_reviewer")]
