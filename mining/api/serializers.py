"""Serializers of the mining REST API (output shapes, and the inputs the forms do not cover)."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from pcapp.roles import can_see_run_results, run_figures

from ..forms import START_KINDS, ExportForm
from ..models import Artefact, Corpus, MiningRun, Sentence, SentencePairCandidate
from ..params import DEFAULT_ENCODER, RunParams, params_class
from ..selectors import run_progress
from ..selectors.precision import threshold_statement


class CorpusOut(serializers.ModelSerializer):
    class Meta:
        model = Corpus
        fields = ["id", "name", "description", "languages", "source", "stats", "created_at"]


class EncoderOut(serializers.ModelSerializer):
    class Meta:
        model = Artefact
        fields = ["id", "name", "version", "kind"]


class RunOut(serializers.ModelSerializer):
    encoder = EncoderOut(read_only=True)
    elapsed_s = serializers.SerializerMethodField()
    rate = serializers.SerializerMethodField()
    is_finished = serializers.BooleanField(read_only=True)
    is_stalled = serializers.BooleanField(read_only=True)
    state = serializers.CharField(read_only=True, help_text='The status, or "stalled": running, its lease expired.')
    threshold_statement = serializers.SerializerMethodField(
        help_text="The threshold that keeps the run's pairs, its source ('default': label-free estimate, "
        "'calibrated': calibrated on n_labels labels, 'run': chosen by hand) and the precision stated for it with "
        "its interval (low, high), or the reason none is stated. Staff only (null for reviewers)."
    )

    class Meta:
        model = MiningRun
        fields = [
            "id",
            "kind",
            "name",
            "src_corpus",
            "tgt_corpus",
            "src_lang",
            "tgt_lang",
            "encoder",
            "parent",
            "params",
            "status",
            "state",
            "is_stalled",
            "stage",
            "done",
            "total",
            "progress",
            "elapsed_s",
            "rate",
            "timings",
            "stats",
            "error",
            "cancel_requested",
            "is_finished",
            "created_at",
            "started_at",
            "finished_at",
            "threshold_statement",
        ]

    def to_representation(self, run: MiningRun) -> dict:
        """Parameters and stats as the requesting user may see them (reviewers: no score figures)."""
        data = super().to_representation(run)
        request = self.context.get("request")
        if request is not None:
            data["params"], data["stats"] = run_figures(request.user, data["params"], data["stats"])
        else:  # no request, no user to trust: the reviewers' view
            data["params"], data["stats"] = run_figures(AnonymousUser(), data["params"], data["stats"])
        return data

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_threshold_statement(self, run: MiningRun) -> dict | None:
        request = self.context.get("request")
        if request is None or not can_see_run_results(request.user):
            return None
        return threshold_statement(run)

    def get_elapsed_s(self, run: MiningRun) -> float | None:
        return run_progress(run=run).elapsed_s

    def get_rate(self, run: MiningRun) -> float | None:
        return run_progress(run=run).rate


def param_serializer_fields(params: type[RunParams]) -> dict[str, serializers.Field]:
    """One optional serializer field per parameter of `params`: types here (and in the schema), every rule in
    `params.from_dict`, so the API answers a bad value with the form's and the CLI's message."""
    fields: dict[str, serializers.Field] = {}
    for spec in params.specs():
        common = {"required": False, "allow_null": True, "help_text": spec.describe()}
        if spec.kind is bool:
            fields[spec.name] = serializers.BooleanField(**common)
        elif spec.kind is int:
            fields[spec.name] = serializers.IntegerField(**common)
        elif spec.kind is float:
            fields[spec.name] = serializers.FloatField(**common)
        else:  # an enum: a string whose choices `from_dict` checks
            fields[spec.name] = serializers.CharField(**common)
    return fields


class RunStartIn(serializers.Serializer):
    """What a run is started on; its parameters are the other keys of the body, checked by the kind's class."""

    kind = serializers.ChoiceField(choices=START_KINDS, default="sentence")
    name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    src_corpus = serializers.IntegerField(required=False, allow_null=True, help_text="Not for alignment runs.")
    tgt_corpus = serializers.IntegerField(required=False, allow_null=True, help_text="Blank: the source corpus.")
    src_lang = serializers.CharField(
        max_length=16, required=False, allow_blank=True, help_text="Alignment runs: the document run's (leave out)."
    )
    tgt_lang = serializers.CharField(
        max_length=16, required=False, allow_blank=True, help_text="Alignment runs: the document run's (leave out)."
    )
    encoder = serializers.IntegerField(
        required=False, allow_null=True, help_text=f"Artefact id; blank: {DEFAULT_ENCODER} (alignment: the parent's)."
    )
    parent = serializers.IntegerField(required=False, allow_null=True, help_text="Document run (alignment only).")

    REQUIRED_UNLESS_ALIGN = ("src_corpus", "src_lang", "tgt_lang")


def _start_param_fields() -> dict[str, serializers.Field]:
    """Every start kind's parameters, for the schema (the view checks them with the kind's class: a field of another
    kind is refused by name)."""
    fields: dict[str, serializers.Field] = {}
    for kind, _ in START_KINDS:
        for name, f in param_serializer_fields(params_class(kind)).items():
            if name not in fields:
                f.help_text = f"{f.help_text} ({kind} runs)"
                fields[name] = f
    return fields


RunCreateIn = type("RunCreateIn", (RunStartIn,), _start_param_fields())
RunCreateIn.__doc__ = (
    "Start a run: what to run on (RunStartIn) and its kind's parameters (mining.params: a key that is not one of the "
    "kind's parameters is refused with a 400 naming it)."
)


class SentenceOut(serializers.ModelSerializer):
    class Meta:
        model = Sentence
        fields = ["id", "lang", "text", "document_id", "position"]


class CalibrationOut(serializers.ModelSerializer):
    """The calibration model (name and version) a candidate's confidence came from."""

    class Meta:
        model = Artefact
        fields = ["id", "name", "version"]


class CandidateOut(serializers.ModelSerializer):
    src = SentenceOut(read_only=True)
    tgt = SentenceOut(read_only=True)
    n_good = serializers.IntegerField(read_only=True)
    n_bad = serializers.IntegerField(read_only=True)
    calibration = CalibrationOut(
        read_only=True,
        allow_null=True,
        help_text="The model behind `confidence`; null when no calibration was applied.",
    )

    class Meta:
        model = SentencePairCandidate
        fields = [
            "id",
            "rank",
            "score",
            "cosine",
            "confidence",
            "calibration",
            "strategy",
            "filter_reason",
            "src",
            "tgt",
            "n_good",
            "n_bad",
            "evidence",
        ]


class CandidateFilterIn(serializers.Serializer):
    min_score = serializers.FloatField(required=False)
    max_score = serializers.FloatField(required=False)
    filter_reason = serializers.CharField(required=False, help_text="'none' or a pre-filter rule name.")
    label = serializers.ChoiceField(choices=["unlabelled", "good", "bad"], required=False)
    q = serializers.CharField(required=False, help_text="Text either side contains (case-insensitive).")


class ExportIn(serializers.Serializer):
    # not `format`: DRF reserves that query parameter for content negotiation
    fmt = serializers.ChoiceField(choices=[c for c, _ in ExportForm.FORMATS], default="tsv")
    keep = serializers.ChoiceField(choices=[c for c, _ in ExportForm.KEEP], default="threshold")
    threshold = serializers.FloatField(required=False, allow_null=True, default=None)
    include_filtered = serializers.BooleanField(default=False)
    side = serializers.ChoiceField(
        choices=["src", "tgt", "scores"],
        default="src",
        help_text="Moses: which side to stream ('scores': rank, score, cosine, confidence, calibration per line).",
    )


class ExportFileOut(serializers.Serializer):
    name = serializers.CharField()
    size = serializers.IntegerField()
    url = serializers.CharField()


class HistogramOut(serializers.Serializer):
    edges = serializers.ListField(child=serializers.FloatField())
    counts = serializers.ListField(child=serializers.IntegerField())
    kept_counts = serializers.ListField(child=serializers.IntegerField())
    yield_curve = serializers.ListField(child=serializers.ListField(child=serializers.FloatField()))
