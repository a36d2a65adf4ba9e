"""Import API (staff): upload files to start an import job; read a job's status and progress."""

from __future__ import annotations

from django.db import transaction
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pcapp.permissions import IsStaff

from ..ingest.errors import ImportFailure
from ..models import ImportJob
from ..services.imports import import_job_create, import_job_enqueue
from ..services.uploads import save_uploads


class ImportJobOut(serializers.ModelSerializer):
    class Meta:
        model = ImportJob
        fields = [
            "id",
            "corpus_name",
            "corpus",
            "format",
            "status",
            "stage",
            "done",
            "total",
            "stats",
            "error",
            "created_at",
            "started_at",
            "finished_at",
        ]


class ImportIn(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    format = serializers.ChoiceField(choices=ImportJob.Format.choices)
    files = serializers.ListField(child=serializers.FileField(), allow_empty=False)
    src_lang = serializers.CharField(required=False, allow_blank=True)
    tgt_lang = serializers.CharField(required=False, allow_blank=True)
    header = serializers.BooleanField(required=False, allow_null=True, default=None)
    into = serializers.BooleanField(required=False, default=False)


class ImportCreateApi(APIView):
    """Upload corpus files (multipart) and start an import; 202 with the job."""

    permission_classes = [IsStaff]
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(request=ImportIn, responses={202: ImportJobOut})
    def post(self, request: Request) -> Response:
        data = (
            {**request.data.dict(), "files": request.FILES.getlist("files")}
            if hasattr(request.data, "dict")
            else request.data
        )
        ser = ImportIn(data=data)
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        options = {k: d[k] for k in ("src_lang", "tgt_lang") if d.get(k)}
        options.update(into=d["into"], header=d["header"])
        try:
            with transaction.atomic():
                paths = save_uploads(d["files"], unzip=d["format"] == ImportJob.Format.FOLDER)
                job = import_job_create(
                    corpus_name=d["name"], fmt=d["format"], paths=paths, options=options, user=request.user
                )
                import_job_enqueue(job=job)
        except ImportFailure as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        return Response(ImportJobOut(job).data, status=status.HTTP_202_ACCEPTED)


class ImportDetailApi(APIView):
    """One import job: status, progress, counts, error."""

    permission_classes = [IsStaff]

    @extend_schema(responses=ImportJobOut)
    def get(self, request: Request, pk: int) -> Response:
        return Response(ImportJobOut(get_object_or_404(ImportJob, pk=pk)).data)
