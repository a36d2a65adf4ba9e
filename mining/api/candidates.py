"""Candidates API: a run's candidates in rank order, filtered, cursor-paginated on (run, rank): sentence pairs, or a
document run's document pairs (ids, titles, URLs, score, rank, evidence)."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema
from rest_framework import serializers
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pcapp.api_schema import paginated
from pcapp.permissions import CanSeeRunResults

from ..models import Document, DocumentPairCandidate, MiningRun, RunKind
from ..selectors import candidate_queryset, run_get
from .serializers import CandidateFilterIn, CandidateOut


class DocumentOut(serializers.ModelSerializer):
    class Meta:
        model = Document
        fields = ["id", "lang", "external_id", "title", "url", "n_sentences"]


class DocumentCandidateOut(serializers.ModelSerializer):
    """A document run's candidate pair; `evidence` says what scored it (for rerank: each stage's rank)."""

    src = DocumentOut(read_only=True)
    tgt = DocumentOut(read_only=True)
    n_good = serializers.IntegerField(read_only=True)
    n_bad = serializers.IntegerField(read_only=True)

    class Meta:
        model = DocumentPairCandidate
        fields = [
            "id",
            "rank",
            "score",
            "cosine",
            "confidence",
            "strategy",
            "filter_reason",
            "src",
            "tgt",
            "n_good",
            "n_bad",
            "evidence",
        ]


RunCandidateOut = PolymorphicProxySerializer(
    component_name="RunCandidate",
    serializers=[CandidateOut, DocumentCandidateOut],
    resource_type_field_name=None,
    many=True,
)


class CandidatePagination(CursorPagination):
    ordering = "rank"
    page_size_query_param = "page_size"
    max_page_size = 500


class CandidateListApi(APIView):
    """Filter by score band, pre-filter reason, label state and text; one query per page at any table size."""

    permission_classes = [CanSeeRunResults]

    @extend_schema(parameters=[CandidateFilterIn], responses=paginated("RunCandidate", RunCandidateOut))
    def get(self, request: Request, pk: int) -> Response:
        try:
            run = run_get(pk=pk)
        except MiningRun.DoesNotExist as exc:
            raise Http404("no such run") from exc
        filters = CandidateFilterIn(data=request.query_params)
        filters.is_valid(raise_exception=True)
        qs = candidate_queryset(run=run, filters=filters.validated_data)
        paginator = CandidatePagination()
        page = paginator.paginate_queryset(qs, request, view=self)
        out = DocumentCandidateOut if run.kind == RunKind.DOCUMENT else CandidateOut
        return paginator.get_paginated_response(out(page, many=True).data)
