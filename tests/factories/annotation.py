"""Factories of the review app."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model
from factory.django import DjangoModelFactory

from annotation.models import Label, Verdict


class UserFactory(DjangoModelFactory):
    class Meta:
        model = get_user_model()

    username = factory.Sequence(lambda n: f"reviewer{n}")


class LabelFactory(DjangoModelFactory):
    """A label outside any campaign, by a fresh reviewer unless one is given."""

    class Meta:
        model = Label

    reviewer = factory.SubFactory(UserFactory)
    verdict = Verdict.GOOD
