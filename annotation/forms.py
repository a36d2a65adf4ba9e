"""Forms of the review app."""

from __future__ import annotations

from typing import Any

from django import forms

from mining.models import JobStatus, MiningRun, RunKind
from mining.params import ParamsError, ParamSpec
from pcapp.roles import may_review

from .models import Reason, Verdict
from .spec import CampaignSpec

SPECS: dict[str, ParamSpec] = {s.name: s for s in CampaignSpec.specs()}
"""The campaign's parameters, from which the form's fields are generated."""


def _widget(p: ParamSpec) -> forms.Widget:
    """The HTML input of a parameter; its attributes mirror the spec's bounds (`from_dict` still checks them)."""
    if p.choices:
        return forms.Select(choices=p.choices)
    if p.kind is bool:
        return forms.CheckboxInput()
    if p.kind is int:
        return forms.NumberInput(attrs={"min": p.lo, "max": p.hi, "step": 1})
    if p.kind is float:
        return forms.NumberInput(attrs={"step": "any"})
    if p.hi is not None and p.hi > 200:
        return forms.Textarea(attrs={"rows": 3, "maxlength": p.hi})
    return forms.TextInput(attrs={"maxlength": p.hi})


class SpecField(forms.Field):
    """A campaign parameter: the form keeps the raw value and `CampaignForm.clean` has CampaignSpec parse and check
    it, so the form says exactly what the API (and a run's parameters) say about the same value."""

    def __init__(self, p: ParamSpec) -> None:
        super().__init__(required=False, widget=_widget(p), label=p.label, help_text=p.help, initial=p.initial)


class CampaignForm(forms.Form):
    """A campaign's runs and reviewers, and its parameters (CampaignSpec). Valid: `self.spec` holds the spec."""

    runs = forms.ModelMultipleChoiceField(
        queryset=MiningRun.objects.filter(kind__in=[RunKind.SENTENCE, RunKind.ALIGN], status=JobStatus.SUCCEEDED),
        widget=forms.CheckboxSelectMultiple,
    )
    reviewers = forms.ModelMultipleChoiceField(
        queryset=may_review(),
        widget=forms.CheckboxSelectMultiple,
        help_text="Staff and members of the reviewers group. To add someone: Admin → Users → their name → Groups → "
        "reviewers.",
    )
    field_order = ["name", "runs", "reviewers"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields.update({name: SpecField(p) for name, p in SPECS.items()})
        self.order_fields(self.field_order)
        self.spec: CampaignSpec | None = None

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        try:
            self.spec = CampaignSpec.from_dict({name: data.get(name) for name in SPECS})
        except ParamsError as exc:
            for name, message in exc.errors.items():
                self.add_error(name, message)
        return data


ID_MAX = 2**63 - 1
"""Row ids are 64-bit: a larger number is refused by the form instead of failing in the database."""


class LabelForm(forms.Form):
    item = forms.IntegerField(min_value=1, max_value=ID_MAX)
    verdict = forms.ChoiceField(choices=Verdict.choices)
    reasons = forms.MultipleChoiceField(choices=Reason.choices, required=False)
    comment = forms.CharField(required=False, max_length=2000)
    seconds = forms.FloatField(required=False, min_value=0)


class PairLabelForm(forms.Form):
    verdict = forms.ChoiceField(choices=Verdict.choices)
    sentence_pair = forms.IntegerField(required=False, min_value=1, max_value=ID_MAX)
    document_pair = forms.IntegerField(required=False, min_value=1, max_value=ID_MAX)
