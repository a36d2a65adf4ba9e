"""Corpora API: list and detail (staff, as the corpus pages); imports are under /api/imports/."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pcapp.api_schema import paginated
from pcapp.permissions import IsStaff

from ..models import Corpus
from .serializers import CorpusOut


class CorpusPagination(CursorPagination):
    ordering = "id"


class CorpusListApi(APIView):
    """All corpora with their languages and counts."""

    permission_classes = [IsStaff]

    @extend_schema(operation_id="corpora_list", responses=paginated("Corpus", CorpusOut(many=True)))
    def get(self, request: Request) -> Response:
        paginator = CorpusPagination()
        page = paginator.paginate_queryset(Corpus.objects.all(), request, view=self)
        return paginator.get_paginated_response(CorpusOut(page, many=True).data)


class CorpusDetailApi(APIView):
    """One corpus."""

    permission_classes = [IsStaff]

    @extend_schema(responses=CorpusOut)
    def get(self, request: Request, pk: int) -> Response:
        return Response(CorpusOut(get_object_or_404(Corpus, pk=pk)).data)
