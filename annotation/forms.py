"""Forms of the review app."""

from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model

from mining.models import JobStatus, MiningRun, RunKind

from .models import DEFAULT_GUIDELINES, Reason, Sampler, Verdict


class CampaignForm(forms.Form):
    name = forms.CharField(max_length=200)
    runs = forms.ModelMultipleChoiceField(
        queryset=MiningRun.objects.filter(kind__in=[RunKind.SENTENCE, RunKind.ALIGN], status=JobStatus.SUCCEEDED),
        widget=forms.CheckboxSelectMultiple,
    )
    reviewers = forms.ModelMultipleChoiceField(
        queryset=get_user_model().objects.filter(is_active=True).order_by("username"),
        widget=forms.CheckboxSelectMultiple,
    )
    sample_size = forms.IntegerField(min_value=1, max_value=100_000, initial=200, help_text="Items per run.")
    sampler = forms.ChoiceField(choices=Sampler.choices, initial=Sampler.UNIFORM)
    threshold = forms.FloatField(required=False, help_text="For 'around the threshold' (on the score).")
    n_uncertain = forms.IntegerField(
        min_value=0,
        max_value=100_000,
        initial=0,
        required=False,
        label="Uncertain items per run",
        help_text="Active sampling: extra items whose calibrated confidence is nearest the language pair's threshold "
        "(needs a calibration applied to the run). Kept out of the precision estimates.",
    )
    bands = forms.IntegerField(min_value=2, max_value=20, initial=5, help_text="Score bands (stratified).")
    seed = forms.IntegerField(initial=0)
    overlap = forms.IntegerField(min_value=1, max_value=10, initial=1, help_text="Reviewers per item.")
    n_controls = forms.IntegerField(min_value=0, max_value=1000, initial=0, label="Control items per run")
    blind = forms.BooleanField(required=False, help_text="Hide the mining evidence from reviewers.")
    guidelines = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), initial=DEFAULT_GUIDELINES)


class LabelForm(forms.Form):
    item = forms.IntegerField()
    verdict = forms.ChoiceField(choices=Verdict.choices)
    reasons = forms.MultipleChoiceField(choices=Reason.choices, required=False)
    comment = forms.CharField(required=False, max_length=2000)
    seconds = forms.FloatField(required=False, min_value=0)


class PairLabelForm(forms.Form):
    verdict = forms.ChoiceField(choices=Verdict.choices)
    sentence_pair = forms.IntegerField(required=False)
    document_pair = forms.IntegerField(required=False)
