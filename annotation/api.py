"""Review API: judgements (same rules as the page: current item only, 409 on duplicates) and campaign results."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from django.contrib.auth import get_user_model
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from mining.models import JobStatus, MiningRun, RunKind
from mining.params import REQUIRED, ParamsError
from pcapp.permissions import IsReviewer, IsStaff
from pcapp.roles import may_review

from .forms import ID_MAX, SPECS
from .models import Campaign, Reason, Verdict
from .selectors import campaign_for, campaign_results, label_rows
from .services import ReviewError, campaign_create, label_and_next, label_pair
from .spec import CampaignSpec


def _id(**kw) -> serializers.IntegerField:
    return serializers.IntegerField(required=False, min_value=1, max_value=ID_MAX, **kw)


class JudgementIn(serializers.Serializer):
    """A campaign's current item (campaign + item), or, for staff only, a pair outside campaigns."""

    campaign = _id()
    item = _id(help_text="The campaign's item you were handed (your current one).")
    sentence_pair = _id(help_text="Staff only: a sentence pair judged outside campaigns.")
    document_pair = _id(help_text="Staff only: a document pair judged outside campaigns.")
    verdict = serializers.ChoiceField(choices=Verdict.choices)
    reasons = serializers.ListField(child=serializers.ChoiceField(choices=Reason.choices), required=False)
    comment = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    seconds = serializers.FloatField(required=False, min_value=0, max_value=86_400)

    def validate(self, attrs: dict) -> dict:
        if "campaign" in attrs and "item" not in attrs:
            raise serializers.ValidationError({"item": "a judgement in a campaign names its item"})
        if "campaign" in attrs and ({"sentence_pair", "document_pair"} & set(attrs)):
            raise serializers.ValidationError("a campaign judgement names its item, not a pair")
        return attrs


class JudgementOut(serializers.Serializer):
    id = serializers.IntegerField()
    verdict = serializers.CharField()
    next_item = serializers.IntegerField(allow_null=True)


class JudgementCreateApi(APIView):
    """Judge the current item of a campaign (campaign + item), or a pair outside campaigns."""

    permission_classes = [IsReviewer]

    @extend_schema(request=JudgementIn, responses={201: JudgementOut})
    def post(self, request: Request) -> Response:
        ser = JudgementIn(data=request.data)
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        try:
            if "campaign" in d:
                try:
                    campaign = campaign_for(request.user, d["campaign"])
                except Campaign.DoesNotExist:
                    return Response({"detail": "no such campaign among yours"}, status=404)
                label, nxt = label_and_next(
                    campaign=campaign,
                    reviewer=request.user,
                    item_id=d["item"],
                    verdict=d["verdict"],
                    reasons=d.get("reasons", []),
                    comment=d.get("comment", ""),
                    seconds=d.get("seconds", 0.0),
                )
            else:
                label = label_pair(
                    reviewer=request.user,
                    verdict=d["verdict"],
                    sentence_pair_id=d.get("sentence_pair"),
                    document_pair_id=d.get("document_pair"),
                    reasons=d.get("reasons", []),
                    comment=d.get("comment", ""),
                )
                nxt = None
        except ReviewError as exc:
            return Response({"detail": str(exc)}, status=exc.status)
        return Response(
            {"id": label.pk, "verdict": label.verdict, "next_item": nxt.pk if nxt else None},
            status=status.HTTP_201_CREATED,
        )


class SpecValue(serializers.Field):
    """A campaign parameter as sent: CampaignCreateIn has CampaignSpec parse and check it, so the API says exactly
    what the form says about the same value. Subclasses carry the parameter's OpenAPI schema."""

    def to_internal_value(self, data: object) -> object:
        return data

    def to_representation(self, value: object) -> object:
        return value


def _schema(name: str) -> dict:
    """A parameter's OpenAPI schema, from its ParamSpec (type, bounds, choices, default)."""
    p = SPECS[name]
    bounds = {"minimum": p.lo, "maximum": p.hi}
    if p.choices:
        schema: dict = {"type": "string", "enum": [v for v, _ in p.choices]}
    elif p.kind is bool:
        schema = {"type": "boolean"}
    elif p.kind is int:
        schema = {"type": "integer", **bounds}
    elif p.kind is float:
        schema = {"type": "number", **bounds}
    else:
        schema = {"type": "string", "minLength": p.lo, "maxLength": p.hi}
    schema = {k: v for k, v in schema.items() if v is not None}
    if p.optional:
        schema["nullable"] = True
    if not p.required:
        schema["default"] = p.initial
    return schema


def _spec_field(name: str) -> SpecValue:
    field_class = extend_schema_field(_schema(name))(type(f"{name.title().replace('_', '')}Value", (SpecValue,), {}))
    return field_class(
        required=SPECS[name].required,
        allow_null=True,
        help_text=SPECS[name].describe() or None,
        error_messages={"required": REQUIRED},
    )


@extend_schema_field({"type": "array", "items": {"type": "integer"}, "minItems": 1})
class _RunIds(serializers.ManyRelatedField):
    """The campaign's runs: at least one (the schema says so too)."""


class CampaignCreateIn(serializers.Serializer):
    """The campaign's runs and reviewers, and its parameters (CampaignSpec, as the campaign form)."""

    runs = _RunIds(
        child_relation=serializers.PrimaryKeyRelatedField(
            queryset=MiningRun.objects.filter(kind__in=[RunKind.SENTENCE, RunKind.ALIGN], status=JobStatus.SUCCEEDED)
        ),
        allow_empty=False,
    )
    reviewers = serializers.PrimaryKeyRelatedField(many=True, queryset=get_user_model().objects.filter(is_active=True))

    def validate_reviewers(self, users: list) -> list:
        """Only users who may review (staff, the reviewers group): anyone else would be handed items they cannot see."""
        allowed = set(may_review().filter(pk__in=[u.pk for u in users]).values_list("pk", flat=True))
        refused = [u.get_username() for u in users if u.pk not in allowed]
        if refused:
            raise serializers.ValidationError(
                f"not staff and not in the reviewers group, so they cannot review: {', '.join(refused)}"
            )
        return users

    def get_fields(self) -> dict:
        return {**super().get_fields(), **{name: _spec_field(name) for name in SPECS}}

    def to_internal_value(self, data: Any) -> dict:
        """{"runs", "reviewers", "spec"}; the errors of the rows and of the parameters come back together."""
        if not isinstance(data, Mapping):
            return super().to_internal_value(data)  # refused: "expected a dictionary"
        errors: dict = {}
        try:
            attrs = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            errors, attrs = dict(exc.detail), {}
        try:
            # every key but the rows is a parameter: one that is not is refused by name, as for runs
            skip = ("runs", "reviewers", "csrfmiddlewaretoken")
            spec = CampaignSpec.from_dict({k: data[k] for k in data if k not in skip})
        except ParamsError as exc:
            errors.update({name: [text] for name, text in exc.errors.items()})
        if errors:
            raise serializers.ValidationError(errors)
        return {"runs": attrs["runs"], "reviewers": attrs["reviewers"], "spec": spec}


class CampaignOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    sampler = serializers.CharField()
    n_uncertain = serializers.IntegerField()
    n_items = serializers.IntegerField()


class CampaignCreateApi(APIView):
    """Create a campaign from runs (staff): the same service and rules as the campaign form."""

    permission_classes = [IsStaff]

    @extend_schema(request=CampaignCreateIn, responses={201: CampaignOut})
    def post(self, request: Request) -> Response:
        ser = CampaignCreateIn(data=request.data)
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        try:
            campaign = campaign_create(spec=d["spec"], runs=d["runs"], reviewers=d["reviewers"], user=request.user)
        except ReviewError as exc:
            return Response({"detail": str(exc)}, status=exc.status)
        return Response(
            {
                "id": campaign.pk,
                "name": campaign.name,
                "sampler": campaign.sampler,
                "n_uncertain": campaign.n_uncertain,
                "n_items": campaign.items.count(),
            },
            status=status.HTTP_201_CREATED,
        )


class CampaignLabelsApi(APIView):
    """All labels of a campaign as JSON lines, streamed (staff)."""

    permission_classes = [IsStaff]

    @extend_schema(responses={(200, "application/x-ndjson"): str})
    def get(self, request: Request, pk: int) -> StreamingHttpResponse:
        campaign = get_object_or_404(Campaign, pk=pk)
        lines = (json.dumps(row, ensure_ascii=False) + "\n" for row in label_rows(campaign))
        return StreamingHttpResponse(lines, content_type="application/x-ndjson")


class CampaignResultsApi(APIView):
    """GOOD rate per run with its interval, agreement and per-reviewer figures."""

    permission_classes = [IsStaff]

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> Response:
        campaign = get_object_or_404(Campaign, pk=pk)
        r = campaign_results(campaign)

        def num(x):
            return None if x is None or (isinstance(x, float) and math.isnan(x)) else x

        return Response(
            {
                "campaign": campaign.pk,
                "n_items": r["n_items"],
                "n_labels": r["n_labels"],
                "runs": [
                    {
                        "run": x.run_id,
                        "name": x.run_name,
                        "labels": x.n_labels,
                        "good_rate": num(x.good_rate),
                        "low": num(x.low),
                        "high": num(x.high),
                    }
                    for x in r["runs"]
                ],
                "active": [
                    {"run": x.run_id, "name": x.run_name, "labels": x.n_labels, "good_rate": num(x.good_rate)}
                    for x in r["active"]
                ],
                "cohen_kappa": [
                    {"reviewers": list(k), "kappa": num(v[0]), "shared_items": v[1]} for k, v in r["cohen"].items()
                ],
                "fleiss_kappa": num(r["fleiss"]),
                "reviewers": r["reviewers"],
            }
        )
