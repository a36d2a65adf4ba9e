"""Factories of the review app."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model
from factory.django import DjangoModelFactory

from annotation.models import Label, LabelMode, Verdict


class UserFactory(DjangoModelFactory):
    class Meta:
        model = get_user_model()

    username = factory.Sequence(lambda n: f"reviewer{n}")


class LabelFactory(DjangoModelFactory):
    """A staff review outside any campaign (the only labels allowed outside campaigns), by a fresh staff user unless
    one is given."""

    class Meta:
        model = Label

    reviewer = factory.SubFactory(UserFactory, is_staff=True)
    verdict = Verdict.GOOD
    mode = LabelMode.STAFF
