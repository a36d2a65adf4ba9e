"""Forms of the calibration page: every field a POST or query string carries is parsed here, never by hand."""

from __future__ import annotations

from django import forms

from annotation.models import Campaign
from mining.models import Artefact, ArtefactKind, Corpus, MiningRun, RunKind
from mining.services.calibrators import METHOD_NAMES


class TargetForm(forms.Form):
    """The target precision of the threshold panel (?target=) and the runs whose kept pairs it counts (?runs=)."""

    target = forms.FloatField(min_value=0.5, max_value=0.999, required=False)
    scale = forms.CharField(required=False, max_length=200)
    runs = forms.ModelMultipleChoiceField(
        queryset=MiningRun.objects.filter(kind=RunKind.SENTENCE), required=False, widget=forms.CheckboxSelectMultiple
    )

    def selected_runs(self, default: list[MiningRun]) -> list[MiningRun]:
        """The runs asked for (?runs=), or `default` when the query names none or is invalid."""
        if "runs" in self.data and self.is_valid() and self.cleaned_data["runs"]:
            return list(self.cleaned_data["runs"])
        return default

    def scale_key(self) -> str:
        """The scoring configuration asked for (?scale=), or "" (the page then shows the newest run's)."""
        return self.cleaned_data.get("scale", "") if self.is_valid() else str(self.data.get("scale", ""))[:200]

    def value(self) -> float:
        """The target asked for, or 0.95 when absent or invalid (the panel then says so through the form errors)."""
        if self.is_valid() and self.cleaned_data["target"] is not None:
            return float(self.cleaned_data["target"])
        return 0.95


class CalibrationTrainForm(forms.Form):
    campaign = forms.ModelChoiceField(queryset=Campaign.objects.all(), required=False)
    method = forms.ChoiceField(choices=[(m, m) for m in METHOD_NAMES], initial="head")


class CalibrationApplyForm(forms.Form):
    """Store a threshold for the pair, and/or apply the latest calibration model to one of its runs."""

    threshold = forms.FloatField(required=False)
    scale = forms.CharField(
        required=False, max_length=200, help_text="The scoring configuration the threshold was found on."
    )
    target = forms.FloatField(required=False, min_value=0.0, max_value=1.0)
    estimate = forms.FloatField(required=False, min_value=0.0, max_value=1.0)
    run = forms.ModelChoiceField(queryset=MiningRun.objects.filter(kind=RunKind.SENTENCE), required=False)
    confirm = forms.BooleanField(required=False, help_text="Asked for when the estimate or the model is weak.")

    def clean(self) -> dict:
        data = super().clean()
        if data.get("threshold") is None and data.get("run") is None and not self.errors:
            raise forms.ValidationError("Give a threshold to store or a run to apply the calibration to.")
        return data


class FineTuneForm(forms.Form):
    encoder = forms.ModelChoiceField(
        queryset=Artefact.objects.filter(kind=ArtefactKind.ENCODER), error_messages={"required": "pick a DAN encoder"}
    )
    campaign = forms.ModelChoiceField(queryset=Campaign.objects.all(), required=False)
    eval_corpus = forms.ModelChoiceField(
        queryset=Corpus.objects.all(),
        error_messages={"required": "pick a held-out evaluation corpus with gold sentence pairs"},
    )
    seed = forms.IntegerField(min_value=0, initial=0, required=False)
