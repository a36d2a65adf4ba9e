"""Runs API: list, create (staff), status, cancel and re-run (staff), score histogram."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pcapp.api_schema import paginated
from pcapp.permissions import CanSeeRunResults, IsReviewer, IsStaff

from ..models import Artefact, ArtefactKind, Corpus, MiningRun, RunKind
from ..params import ParamsError, params_class
from ..selectors import run_get, score_histogram
from ..services.encoders import encoder_default
from ..services.runs import (
    BrokerUnavailable,
    RunStartError,
    check_run_start,
    run_cancel,
    run_create,
    run_delete,
    run_retry,
)
from .serializers import HistogramOut, RunCreateIn, RunOut, RunStartIn


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

    @extend_schema(operation_id="runs_list", responses=paginated("Run", RunOut(many=True)))
    def get(self, request: Request) -> Response:
        qs = MiningRun.objects.select_related("encoder").order_by("-id")
        paginator = RunPagination()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(RunOut(page, many=True, context={"request": request}).data)

    @extend_schema(request=RunCreateIn, responses={201: RunOut})
    def post(self, request: Request) -> Response:
        data = RunStartIn(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        kind = v["kind"]
        errors: dict[str, str] = {}
        if kind != RunKind.ALIGN:
            for name in RunStartIn.REQUIRED_UNLESS_ALIGN:
                if v.get(name) in (None, ""):
                    errors[name] = "This field is required."
        src = _pick(Corpus.objects, v.get("src_corpus"), "src_corpus", errors)
        tgt = _pick(Corpus.objects, v.get("tgt_corpus"), "tgt_corpus", errors) or src
        encoder = _pick(
            Artefact.objects.filter(kind=ArtefactKind.ENCODER, is_active=True), v.get("encoder"), "encoder", errors
        )
        parent = _pick(MiningRun.objects.all(), v.get("parent"), "parent", errors)
        if parent is not None and kind != RunKind.ALIGN:
            errors["parent"] = f"is not a parameter of {kind.replace('_', ' ')} runs"
        where = {
            "src_corpus": src,
            "tgt_corpus": tgt,
            "src_lang": v.get("src_lang", ""),
            "tgt_lang": v.get("tgt_lang", ""),
            "parent": parent,
        }
        if not errors:
            errors.update(check_run_start(kind=kind, **where))
        skip = {*RunStartIn().fields, "csrfmiddlewaretoken"}
        given = {k: request.data[k] for k in request.data if k not in skip}
        try:
            params = params_class(kind).from_dict(given)
        except ParamsError as exc:
            errors.update({k: m for k, m in exc.errors.items() if k not in errors})
        if errors:
            return Response({name: [message] for name, message in errors.items()}, status=status.HTTP_400_BAD_REQUEST)
        if encoder is None and kind != RunKind.ALIGN:  # an alignment run reads its parent's by default
            encoder = encoder_default()
        try:
            run = run_create(
                kind=kind, user=request.user, name=v.get("name", ""), encoder=encoder, params=params, **where
            )
        except RunStartError as exc:
            return Response({k: [m] for k, m in exc.errors.items()}, status=status.HTTP_400_BAD_REQUEST)
        except BrokerUnavailable as exc:
            return _broker_down(exc)
        return Response(RunOut(run_get(pk=run.pk), context={"request": request}).data, status=status.HTTP_201_CREATED)


def _broker_down(exc: BrokerUnavailable) -> Response:
    """503: the job could not be handed to a worker (it was marked failed, and says so)."""
    return Response({"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE, headers={"Retry-After": "30"})


def _pick(qs, pk: int | None, field: str, errors: dict[str, str]):
    """The row of `qs` with id `pk` (None when pk is None); a missing one becomes `errors[field]`."""
    if pk is None:
        return None
    row = qs.filter(pk=pk).first()
    if row is None:
        errors[field] = f"no {field.replace('_', ' ')} with id {pk}"
    return row


class RunDetailApi(APIView):
    """GET: a run's parameters, status and live progress (reviewers). DELETE: the run, its candidates and files
    (staff; 409 while it runs)."""

    def get_permissions(self):
        return [IsStaff()] if self.request.method == "DELETE" else [IsReviewer()]

    @extend_schema(responses=RunOut)
    def get(self, request: Request, pk: int) -> Response:
        return Response(RunOut(_run_or_404(pk), context={"request": request}).data)

    @extend_schema(request=None, responses={200: None, 409: None})
    def delete(self, request: Request, pk: int) -> Response:
        try:
            counts = run_delete(run=_run_or_404(pk))
        except ValueError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response({"deleted": counts})


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
        return Response(RunOut(run, context={"request": request}).data)


class RunRetryApi(APIView):
    """Re-run a failed, cancelled or stalled run; it resumes from its finished shards (409 otherwise; 503 when the
    broker cannot be reached)."""

    permission_classes = [IsStaff]

    @extend_schema(request=None, responses={200: RunOut, 409: None})
    def post(self, request: Request, pk: int) -> Response:
        run = _run_or_404(pk)
        try:
            run = run_retry(run=run)
        except BrokerUnavailable as exc:
            return _broker_down(exc)
        except ValueError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(RunOut(run, context={"request": request}).data)


class RunHistogramApi(APIView):
    """Score histogram and yield (pairs kept at each bin's lower edge) of a run, from one aggregate query."""

    permission_classes = [CanSeeRunResults]

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
