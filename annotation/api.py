"""Review API: judgements (same rules as the page: current item only, 409 on duplicates) and campaign results."""

from __future__ import annotations

import json
import math

from django.contrib.auth import get_user_model
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from mining.models import JobStatus, MiningRun, RunKind
from pcapp.permissions import IsReviewer, IsStaff

from .models import DEFAULT_GUIDELINES, Campaign, Reason, Sampler, Verdict
from .selectors import campaign_for, campaign_results, label_rows
from .services import ReviewError, campaign_create, item_claim, label_pair, label_submit


class JudgementIn(serializers.Serializer):
    campaign = serializers.IntegerField(required=False)
    item = serializers.IntegerField(required=False)
    sentence_pair = serializers.IntegerField(required=False)
    document_pair = serializers.IntegerField(required=False)
    verdict = serializers.ChoiceField(choices=Verdict.choices)
    reasons = serializers.ListField(child=serializers.ChoiceField(choices=Reason.choices), required=False)
    comment = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    seconds = serializers.FloatField(required=False, min_value=0)


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
                label = label_submit(
                    campaign=campaign,
                    reviewer=request.user,
                    item_id=d.get("item", -1),
                    verdict=d["verdict"],
                    reasons=d.get("reasons", []),
                    comment=d.get("comment", ""),
                    seconds=d.get("seconds", 0.0),
                )
                nxt, _ = item_claim(campaign=campaign, reviewer=request.user)
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


class CampaignCreateIn(serializers.Serializer):
    """Same fields and limits as the campaign form of the pages."""

    name = serializers.CharField(max_length=200)
    runs = serializers.PrimaryKeyRelatedField(
        many=True,
        queryset=MiningRun.objects.filter(kind__in=[RunKind.SENTENCE, RunKind.ALIGN], status=JobStatus.SUCCEEDED),
    )
    reviewers = serializers.PrimaryKeyRelatedField(many=True, queryset=get_user_model().objects.filter(is_active=True))
    sample_size = serializers.IntegerField(min_value=1, max_value=100_000, default=200)
    sampler = serializers.ChoiceField(
        choices=Sampler.choices,
        default=Sampler.UNIFORM,
        help_text="'uncertain': calibrated confidence nearest the pair's threshold (kept out of precision estimates).",
    )
    n_uncertain = serializers.IntegerField(
        min_value=0, max_value=100_000, default=0, help_text="Extra uncertain-sampler items per run (active sampling)."
    )
    threshold = serializers.FloatField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Score threshold of the 'around the threshold' sampler.",
    )
    bands = serializers.IntegerField(min_value=2, max_value=20, default=5)
    seed = serializers.IntegerField(default=0)
    overlap = serializers.IntegerField(min_value=1, max_value=10, default=1)
    n_controls = serializers.IntegerField(min_value=0, max_value=1000, default=0)
    blind = serializers.BooleanField(default=False)
    guidelines = serializers.CharField(default=DEFAULT_GUIDELINES)


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
            campaign = campaign_create(
                name=d["name"],
                runs=d["runs"],
                reviewers=d["reviewers"],
                user=request.user,
                sample_size=d["sample_size"],
                sampler=d["sampler"],
                seed=d["seed"],
                overlap=d["overlap"],
                guidelines=d["guidelines"],
                n_controls=d["n_controls"],
                blind=d["blind"],
                threshold=d["threshold"],
                bands=d["bands"],
                n_uncertain=d["n_uncertain"],
            )
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
