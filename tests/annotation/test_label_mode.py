"""A label records how it came about (Label.mode), the database ties the mode to the campaign and item, reviewers are
refused outside campaigns, and migration 0003 marks the labels made outside campaigns before the rule."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from annotation.models import Label, LabelMode
from annotation.selectors import estimable_labels
from annotation.services import NotAllowed, NotFound, label_pair
from tests.factories.mining import SentencePairCandidateFactory

BEFORE = [("annotation", "0002_item_sampler_uncertain")]


@pytest.mark.django_db
def test_the_database_refuses_a_label_whose_mode_does_not_match_its_campaign(django_user_model):
    user = django_user_model.objects.create_user("u")
    pair = SentencePairCandidateFactory()
    for mode in (LabelMode.CAMPAIGN, LabelMode.STAFF):  # campaign mode without a campaign; staff mode is fine
        try:
            with transaction.atomic():
                Label.objects.create(reviewer=user, sentence_pair=pair, verdict="GOOD", mode=mode)
            created = True
        except IntegrityError as exc:
            assert "label_campaign_or_staff" in str(exc)
            created = False
        assert created is (mode == LabelMode.STAFF)


@pytest.mark.django_db
def test_only_staff_label_pairs_outside_campaigns(django_user_model):
    pair = SentencePairCandidateFactory()
    reviewer = django_user_model.objects.create_user("rev")
    staff = django_user_model.objects.create_user("boss", is_staff=True)
    with pytest.raises(NotAllowed, match="only staff judge pairs outside campaigns"):
        label_pair(reviewer=reviewer, sentence_pair_id=pair.pk, verdict="GOOD")
    with pytest.raises(NotFound, match="no such sentence pair: 999999"):
        label_pair(reviewer=staff, sentence_pair_id=999_999, verdict="GOOD")
    label = label_pair(reviewer=staff, sentence_pair_id=pair.pk, verdict="BAD")
    assert list(Label.objects.values_list("reviewer__username", "mode", "verdict")) == [("boss", "staff", "BAD")]
    assert list(estimable_labels()) == [label]


@pytest.mark.django_db(transaction=True)
def test_migration_0003_marks_labels_outside_campaigns_by_their_author(django_user_model):
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    OldLabel, OldCampaign, OldItem = (old.get_model("annotation", m) for m in ("Label", "Campaign", "CampaignItem"))
    staff = django_user_model.objects.create_user("boss", is_staff=True)
    reviewer = django_user_model.objects.create_user("rev")
    pairs = [SentencePairCandidateFactory() for _ in range(3)]
    campaign = OldCampaign.objects.create(name="old")
    item = OldItem.objects.create(campaign=campaign, position=0, sentence_pair_id=pairs[2].pk, run_id=pairs[2].run_id)
    OldLabel.objects.create(reviewer_id=staff.pk, sentence_pair_id=pairs[0].pk, verdict="GOOD")
    OldLabel.objects.create(reviewer_id=reviewer.pk, sentence_pair_id=pairs[1].pk, verdict="BAD")
    OldLabel.objects.create(
        reviewer_id=reviewer.pk, campaign=campaign, item=item, sentence_pair_id=pairs[2].pk, verdict="GOOD"
    )
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    modes = sorted(Label.objects.values_list("reviewer__username", "sentence_pair_id", "mode"))
    assert modes == sorted(
        [("boss", pairs[0].pk, "staff"), ("rev", pairs[1].pk, "unchecked"), ("rev", pairs[2].pk, "campaign")]
    )
    assert sorted(estimable_labels().values_list("sentence_pair_id", flat=True)) == [pairs[0].pk, pairs[2].pk]
