"""The judgement vocabulary of every label (the papers' GOOD/BAD), shared by mining's label-aware queries and exports
and by the annotation app that records labels."""

from django.db import models


class Verdict(models.TextChoices):
    GOOD = "GOOD", "Good"
    BAD = "BAD", "Bad"
