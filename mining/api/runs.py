"""Runs API: list, create (staff), status, cancel and re-run (staff), score histogram."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pcapp.permissions import IsReviewer, IsStaff

from ..forms import RunStartForm
from ..models import MiningRun
from ..selectors import run_get, score_histogram
from ..services.runs import run_cancel, run_create, run_retry
from .serializers import HistogramOut, RunCreateIn, RunOut


class RunPagination(CursorPagination):
    ordering = "-id"


def _run_or_404(pk: int) -> MiningRun:
    try:
        return run_get(pk=pk)
    except MiningRun.DoesNotExist as exc:
        raise Http404("no such run") from exc


class RunListCreateApi(APIView):
    """GET: runs, newest first (reviewers). POST: start a run (staff), validated like the run form."""

    def get_permissions(self):
        return [IsStaff()] if self.request.method == "POST" else [IsReviewer()]

    @extend_schema(responses=RunOut(many=True))
    def get(self, request: Request) -> Response:
        qs = MiningRun.objects.select_related("encoder").order_by("-id")
        paginator = RunPagination()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(RunOut(page, many=True).data)

    @extend_schema(request=RunCreateIn, responses={201: RunOut})
    def post(self, request: Request) -> Response:
        data = RunCreateIn(data=request.data)
        data.is_valid(raise_exception=True)
        values = {k: v for k, v in data.validated_data.items() if v is not None}
        form = RunStartForm(data=values)
        if not form.is_valid():
            return Response(form.errors, status=status.HTTP_400_BAD_REQUEST)
        run = run_create(user=request.user, **form.run_kwargs())
        return Response(RunOut(run_get(pk=run.pk)).data, status=status.HTTP_201_CREATED)


class RunDetailApi(APIView):
    """A run's parameters, status and live progress."""

    permission_classes = [IsReviewer]

    @extend_schema(responses=RunOut)
    def get(self, request: Request, pk: int) -> Response:
        return Response(RunOut(_run_or_404(pk)).data)


class RunCancelApi(APIView):
    """Ask a pending or running run to stop (409 if it already finished)."""

    permission_classes = [IsStaff]

    @extend_schema(request=None, responses={200: RunOut, 409: None})
    def post(self, request: Request, pk: int) -> Response:
        run = _run_or_404(pk)
        try:
            run = run_cancel(run=run)
        except ValueError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(RunOut(run).data)


class RunRetryApi(APIView):
    """Re-run a failed or cancelled run; it resumes from its finished shards (409 otherwise)."""

    permission_classes = [IsStaff]

    @extend_schema(request=None, responses={200: RunOut, 409: None})
    def post(self, request: Request, pk: int) -> Response:
        run = _run_or_404(pk)
        try:
            run = run_retry(run=run)
        except ValueError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(RunOut(run).data)


class RunHistogramApi(APIView):
    """Score histogram and yield (pairs kept at each bin's lower edge) of a run, from one aggregate query."""

    permission_classes = [IsReviewer]

    @extend_schema(responses=HistogramOut)
    def get(self, request: Request, pk: int) -> Response:
        run = _run_or_404(pk)
        try:
            bins = min(max(int(request.query_params.get("bins", 40)), 1), 200)
        except ValueError:
            bins = 40
        hist = score_histogram(run=run, bins=bins)
        return Response(
            {
                "edges": hist.edges,
                "counts": hist.counts,
                "kept_counts": hist.kept_counts,
                "yield_curve": [list(p) for p in hist.yield_curve()],
            }
        )
