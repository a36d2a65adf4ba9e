"""Candidates API: a run's candidates in rank order, filtered, cursor-paginated on (run, rank)."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pcapp.permissions import IsReviewer

from ..models import MiningRun
from ..selectors import candidate_queryset, run_get
from .serializers import CandidateFilterIn, CandidateOut


class CandidatePagination(CursorPagination):
    ordering = "rank"
    page_size_query_param = "page_size"
    max_page_size = 500


class CandidateListApi(APIView):
    """Filter by score band, pre-filter reason, label state and text; one query per page at any table size."""

    permission_classes = [IsReviewer]

    @extend_schema(parameters=[CandidateFilterIn], responses=CandidateOut(many=True))
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
        return paginator.get_paginated_response(CandidateOut(page, many=True).data)
