"""Forms of the mining pages: start a run, filter a run's candidates, export a run's kept bitext."""

from __future__ import annotations

from typing import Any

from django import forms

from .core.docmethod import DocMethod
from .core.filters import FilterReason
from .models import Artefact, ArtefactKind, Corpus, JobStatus, MiningRun, RunKind
from .params import DEFAULT_ENCODER, ParamsError, RunParams, params_class
from .services.runs import check_run_start
from .words import readable

START_KINDS = [(k.value, k.label) for k in (RunKind.SENTENCE, RunKind.DOCUMENT, RunKind.ALIGN, RunKind.SELF_TRAIN)]
DOC_METHOD_CHOICES = [
    (m.value, m.value.replace("_", " ") + (" (needs a trained document model)" if m.needs_model else ""))
    for m in DocMethod
]
LABEL_STATES = [("", "Any"), ("unlabelled", "Unlabelled"), ("good", "Labelled GOOD"), ("bad", "Labelled BAD")]


def _all_languages() -> list[str]:
    langs: set[str] = set()
    for row in Corpus.objects.values_list("languages", flat=True):
        langs.update(row or [])
    return sorted(langs)


class EncoderChoiceField(forms.ModelChoiceField):
    """Encoder artefacts; a fine-tuned one shows its held-out figures against the encoder it started from."""

    def label_from_instance(self, obj: Artefact) -> str:
        tuned = (obj.metrics or {}).get("fine_tune")
        if not tuned:
            return str(obj)
        before, after = tuned["before"], tuned["after"]
        return (
            f"{obj} (fine-tuned from #{obj.params.get('fine_tuned_from')} on reviews: P@1 {before['p_at_1']:.3f} → "
            f"{after['p_at_1']:.3f}, F1 {before['f1']:.3f} → {after['f1']:.3f})"
        )


class ParamChoiceField(forms.ChoiceField):
    """A closed choice of a run parameter; the parameter dataclass checks the value (one message everywhere)."""

    def valid_value(self, value: str) -> bool:
        return True


def param_form_fields(
    params: type[RunParams], only: tuple[str, ...] | None = None, note: str = ""
) -> dict[str, forms.Field]:
    """One untyped-bounds form field per parameter of `params` (or of those named in `only`), its help text after
    `note`: type parsing here, every rule in `from_dict`."""
    fields: dict[str, forms.Field] = {}
    for spec in params.specs():
        if only is not None and spec.name not in only:
            continue
        help_text = f"{note} {spec.describe()}".strip()
        common = {"required": False, "label": spec.label, "help_text": help_text, "initial": spec.initial}
        if spec.choices:  # an optional choice offers its blank ("the default") first
            blank = [("", "(default)")] if spec.optional else []
            fields[spec.name] = ParamChoiceField(choices=blank + spec.choices, **common)
        elif spec.kind is bool:
            fields[spec.name] = forms.BooleanField(**common)
        elif spec.kind in (int, float):  # parsed by `from_dict`, so the form's words are the API's and the CLI's
            step = "1" if spec.kind is int else "any"
            fields[spec.name] = forms.CharField(widget=forms.NumberInput(attrs={"step": step}), **common)
        else:
            fields[spec.name] = forms.CharField(**common)
    return fields


KIND_NOTES = {
    RunKind.ALIGN: "The languages, corpora and document pairs are the document run's.",
}


class RunStartForm(forms.Form):
    """Everything a staff user picks to start a run; `run_kwargs()` gives `run_create`'s arguments.

    The "How" fields are generated from the chosen kind's parameter class (`mining.params`), which also checks them:
    a kind's form shows only its own fields (changing the kind re-renders the form, like picking a corpus). An
    alignment run takes its document run (the parent) and an encoder: its languages and corpora are the parent's."""

    kind = forms.ChoiceField(choices=START_KINDS, initial=RunKind.SENTENCE)
    name = forms.CharField(max_length=200, required=False)
    src_corpus = forms.ModelChoiceField(queryset=Corpus.objects.order_by("name"), label="Source corpus")
    tgt_corpus = forms.ModelChoiceField(
        queryset=Corpus.objects.order_by("name"),
        required=False,
        label="Target corpus",
        empty_label="(same as source)",
    )
    src_lang = forms.ChoiceField(label="Source language")
    tgt_lang = forms.ChoiceField(label="Target language")
    # Inactive encoders (e.g. fine-tuned ones that did worse on their held-out evaluation) are not offered.
    encoder = EncoderChoiceField(
        queryset=Artefact.objects.filter(kind=ArtefactKind.ENCODER, is_active=True).order_by("name", "-version"),
        required=False,
        empty_label=f"{DEFAULT_ENCODER} (built-in default)",
    )
    parent = forms.ModelChoiceField(
        queryset=MiningRun.objects.filter(kind=RunKind.DOCUMENT, status=JobStatus.SUCCEEDED).select_related(
            "src_corpus", "tgt_corpus"
        ),
        label="Document run to align",
        help_text=KIND_NOTES[RunKind.ALIGN],
    )

    # The kind the fields were shown for: a post whose kind differs (a page without htmx, such as the admin's, where
    # changing the kind does not re-render the fields) is shown again with the new kind's fields, not started with
    # defaults (an unticked box would read as "off").
    shown_kind = forms.CharField(required=False, widget=forms.HiddenInput)

    WHAT = {
        RunKind.ALIGN: ("kind", "name", "parent", "shown_kind"),
    }
    WHAT_DEFAULT = ("kind", "name", "src_corpus", "tgt_corpus", "src_lang", "tgt_lang", "shown_kind")
    ENCODER_KINDS = (RunKind.SENTENCE, RunKind.DOCUMENT, RunKind.ALIGN)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.run_kind = self._chosen_kind()
        self.posted_kind = self.data.get("shown_kind", "") if self.is_bound else ""
        if self.is_bound:
            self.data = self.data.copy()
            self.data["shown_kind"] = self.run_kind
        self.initial["shown_kind"] = self.run_kind
        self.params_class = params_class(self.run_kind)
        what = self.WHAT.get(self.run_kind, self.WHAT_DEFAULT)
        keep = {*what, *(("encoder",) if self.run_kind in self.ENCODER_KINDS else ())}
        for name in list(self.fields):
            if name not in keep:
                del self.fields[name]
        self.param_names = [spec.name for spec in self.params_class.specs()]
        self.fields.update(param_form_fields(self.params_class))
        if "method" in self.fields:
            self.fields["method"].choices = DOC_METHOD_CHOICES
        if "src_corpus" in self.fields:
            self._offer_languages()

    def _chosen_kind(self) -> str:
        raw = (self.data.get("kind") if self.is_bound else None) or self.initial.get("kind") or RunKind.SENTENCE
        return raw if raw in dict(START_KINDS) else RunKind.SENTENCE

    def _offer_languages(self) -> None:
        everything = _all_languages()
        if not self.is_bound and not self.initial.get("src_corpus"):
            # Offer the newest corpus (most likely the one just imported), so that its languages, two different
            # ones, are the defaults rather than the first language of all corpora on both sides.
            newest = Corpus.objects.order_by("-created_at").first()
            if newest is not None:
                self.initial["src_corpus"] = newest.pk
        src = self._chosen_corpus("src_corpus")
        tgt = self._chosen_corpus("tgt_corpus") or src
        self.fields["src_lang"].choices = [(x, x) for x in (src.languages if src else everything)]
        self.fields["tgt_lang"].choices = [(x, x) for x in (tgt.languages if tgt else everything)]
        if src and tgt and not self.is_bound and "tgt_lang" not in self.initial:
            # Default to two different languages so the first submit of a one-corpus run is valid (English first
            # when the corpus has it: most corpora pair English with others).
            langs = list(src.languages or [])
            src_lang = self.initial.get("src_lang") or ("en" if "en" in langs else next(iter(langs), None))
            if src_lang:
                self.initial["src_lang"] = src_lang
            others = [x for x in tgt.languages or [] if x != src_lang]
            if others:
                self.initial["tgt_lang"] = others[0]

    def fieldsets(self) -> list[tuple[str, list[forms.BoundField]]]:
        """(legend, bound fields) groups for the template: what to run on, and how (the kind's own fields)."""
        what = [name for name in self.fields if name not in self.param_names and name not in ("encoder", "shown_kind")]
        how = [name for name in ("encoder", *self.param_names) if name in self.fields]
        return [("What to run", [self[n] for n in what]), ("How", [self[n] for n in how])]

    def _chosen_corpus(self, name: str) -> Corpus | None:
        """The corpus picked so far (bound data, else initial), to offer only its languages."""
        raw = self.data.get(name) if self.is_bound else self.initial.get(name)
        if not raw:
            return None
        if isinstance(raw, Corpus):
            return raw
        try:
            return Corpus.objects.filter(pk=int(raw)).first()
        except (TypeError, ValueError):
            return None

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.posted_kind and self.posted_kind != self.run_kind:
            raise forms.ValidationError(
                f"The fields below are now a {dict(START_KINDS)[self.run_kind].lower()} run's: check them and start "
                "it again."
            )
        self.where = {
            "src_corpus": data.get("src_corpus"),
            "tgt_corpus": data.get("tgt_corpus") or data.get("src_corpus"),
            "src_lang": data.get("src_lang", ""),
            "tgt_lang": data.get("tgt_lang", ""),
            "parent": data.get("parent"),
        }
        if self.run_kind == RunKind.ALIGN and "parent" in self.errors:
            return data
        for name, message in check_run_start(kind=self.run_kind, **self.where).items():
            if name not in self.errors:
                self.add_error(name if name in self.fields else None, message)
        try:
            # a field the post leaves out takes its default; an unticked box is sent as nothing, and means off
            given = {
                s.name: data.get(s.name)
                for s in self.params_class.specs()
                if s.name in self.data or (s.kind is bool and self.is_bound)
            }
            self.typed_params = self.params_class.from_dict(given)
        except ParamsError as exc:
            for name, message in exc.errors.items():
                if name not in self.errors:
                    self.add_error(name if name in self.fields else None, message)
        return data

    def run_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `run_create` (call after `is_valid()`)."""
        from .services.encoders import encoder_default

        d = self.cleaned_data
        encoder = d.get("encoder")
        if encoder is None and self.run_kind != RunKind.ALIGN:  # an alignment run reads its parent's by default
            encoder = encoder_default()
        return {
            **self.where,
            "kind": self.run_kind,
            "name": d.get("name", ""),
            "encoder": encoder,
            "params": self.typed_params,
        }


class CandidateFilterForm(forms.Form):
    """Filters of a run's candidate list (all optional, from the query string)."""

    min_score = forms.FloatField(required=False, label="Score at least")
    max_score = forms.FloatField(required=False, label="Score at most")
    filter_reason = forms.ChoiceField(required=False, label="Pre-filter")
    label = forms.ChoiceField(choices=LABEL_STATES, required=False)
    q = forms.CharField(required=False, max_length=200, label="Text contains")
    after = forms.IntegerField(required=False, min_value=0, widget=forms.HiddenInput)

    def __init__(self, *args: Any, reasons: list[tuple[str, int]] | None = None, **kwargs: Any) -> None:
        """`reasons`: (rule, count) of the run's rejections; every known rule is offered, with its count."""
        super().__init__(*args, **kwargs)
        counts = dict(reasons or [])
        names = [r.value for r in FilterReason] + sorted(set(counts) - {r.value for r in FilterReason})
        self.fields["filter_reason"].choices = [
            ("", "Any"),
            ("none", "Not rejected (kept)"),
            *((name, f"Rejected: {readable(name)} ({counts.get(name, 0)})") for name in names),
        ]


class ExportForm(forms.Form):
    """Which pairs of a run to export, and in which format."""

    FORMATS = [
        ("tsv", "TSV"),
        ("moses", "Moses (two sides + scores)"),
        ("tmx", "TMX 1.4"),
        ("jsonl", "JSONL"),
        ("parquet", "Parquet (datasets tooling)"),
    ]
    KEEP = [
        ("threshold", "Score at least the threshold"),
        ("good", "Labelled GOOD"),
        ("both", "Both: above the threshold and labelled GOOD"),
    ]

    format = forms.ChoiceField(choices=FORMATS, initial="tsv")
    keep = forms.ChoiceField(choices=KEEP, initial="threshold")
    threshold = forms.FloatField(required=False, help_text="Blank: the run's own threshold (or keep all).")
    include_filtered = forms.BooleanField(required=False, label="Include pairs a pre-filter rejected")
    side = forms.ChoiceField(
        choices=[
            ("src", "source"),
            ("tgt", "target"),
            ("scores", "scores (rank, score, cosine, confidence, calibration)"),
        ],
        required=False,
        help_text="Moses only: a download holds one side; a file built in the background holds all three (zip).",
    )
