"""Export API (staff): stream a run's kept bitext, or have the export task build a file and list the files."""

from __future__ import annotations

from django.http import Http404, StreamingHttpResponse
from django.urls import reverse
from drf_spectacular.utils import OpenApiTypes, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pcapp.permissions import IsStaff

from ..models import MiningRun
from ..selectors import run_get
from ..services.export import CONTENT_TYPES, ExportFormat, KeepMode, KeepRule, export_download
from ..services.export_files import export_enqueue, export_files
from .serializers import ExportFileOut, ExportIn


def _run(pk: int) -> MiningRun:
    try:
        return run_get(pk=pk)
    except MiningRun.DoesNotExist as exc:
        raise Http404("no such run") from exc


def _rule(data: dict) -> KeepRule:
    return KeepRule(mode=KeepMode(data["keep"]), threshold=data["threshold"], include_filtered=data["include_filtered"])


class RunExportApi(APIView):
    """GET streams the export (TSV, one Moses side, TMX or JSONL); POST queues the file-building task (202)."""

    permission_classes = [IsStaff]

    @extend_schema(
        parameters=[ExportIn],
        responses={(200, ct.split(";")[0]): OpenApiTypes.STR for ct in CONTENT_TYPES.values()},
        description="The file streamed as its format's media type (fmt): TSV, Moses text, TMX or JSON lines.",
    )
    def get(self, request: Request, pk: int):
        data = ExportIn(data=request.query_params)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        download = export_download(run=_run(pk), rule=_rule(d), fmt=ExportFormat(d["fmt"]), side=d["side"])
        response = StreamingHttpResponse(download.chunks, content_type=download.content_type)
        response["Content-Disposition"] = f'attachment; filename="{download.filename}"'
        if download.statement:
            response["X-Pcapp-Threshold"] = download.statement
        return response

    @extend_schema(request=ExportIn, responses={202: ExportFileOut})
    def post(self, request: Request, pk: int) -> Response:
        run = _run(pk)
        data = ExportIn(data=request.data)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        path = export_enqueue(run=run, rule=_rule(d), fmt=ExportFormat(d["fmt"]))
        url = reverse("run-export-download", args=[run.pk, path.name])
        return Response({"name": path.name, "size": 0, "url": url}, status=status.HTTP_202_ACCEPTED)


class RunExportFilesApi(APIView):
    """Export files the task has finished for a run (a queued file appears here once written)."""

    permission_classes = [IsStaff]

    @extend_schema(responses=ExportFileOut(many=True))
    def get(self, request: Request, pk: int) -> Response:
        run = _run(pk)
        return Response(
            [
                {"name": p.name, "size": p.stat().st_size, "url": reverse("run-export-download", args=[run.pk, p.name])}
                for p in export_files(run=run)
            ]
        )
