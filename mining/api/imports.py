"""Import API (staff): upload files to start an import job; read a job's status and progress."""

from __future__ import annotations

from django.db import transaction
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pcapp.permissions import IsStaff

from ..ingest.errors import ImportFailure
from ..models import ImportJob, ImportPart
from ..services.imports import import_job_create, import_job_enqueue, import_retry
from ..services.jobs import BrokerUnavailable, JobStateError
from ..services.uploads import SizeLimitUploadHandler, check_server_paths, over_limit_message, save_uploads


class ImportPartOut(serializers.ModelSerializer):
    """One file of a crawl import: its progress in bytes (done / total), its counts and skips, its error."""

    class Meta:
        model = ImportPart
        fields = ["part_no", "status", "stage", "done", "total", "stats", "error", "started_at", "finished_at"]


class ImportJobOut(serializers.ModelSerializer):
    parts = ImportPartOut(many=True, read_only=True, help_text="Crawl imports: one per file.")

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
            "parts",
            "created_at",
            "started_at",
            "finished_at",
        ]


class ImportIn(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    format = serializers.ChoiceField(choices=ImportJob.Format.choices)
    files = serializers.ListField(child=serializers.FileField(), required=False)
    paths = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="Files (or a folder) on the server to import instead of uploads: under PCAPP_DATA_DIR/crawls/ or a "
        "folder of PCAPP_IMPORT_PATH_ROOTS (e.g. a crawler's WARC output).",
    )
    extractor = serializers.ChoiceField(choices=["resiliparse", "trafilatura"], required=False)

    def validate(self, data: dict) -> dict:
        if bool(data.get("files")) == bool(data.get("paths")):
            raise serializers.ValidationError("give either files (uploads) or paths (files on the server)")
        return data

    src_lang = serializers.CharField(required=False, allow_blank=True)
    tgt_lang = serializers.CharField(required=False, allow_blank=True)
    header = serializers.BooleanField(required=False, allow_null=True, default=None)
    into = serializers.BooleanField(required=False, default=False)


class ImportCreateApi(APIView):
    """Upload corpus files (multipart) and start an import; 202 with the job. Over PCAPP_MAX_UPLOAD_BYTES: 413, and
    the body is read no further than the limit."""

    permission_classes = [IsStaff]
    parser_classes = [MultiPartParser, FormParser]

    def initial(self, request: Request, *args, **kwargs) -> None:
        # Before authentication: a session's CSRF check reads the body.
        self.limiter = SizeLimitUploadHandler(request)
        request.upload_handlers.insert(0, self.limiter)
        super().initial(request, *args, **kwargs)

    @extend_schema(
        request=ImportIn,
        responses={202: ImportJobOut, 413: OpenApiResponse(description="Over PCAPP_MAX_UPLOAD_BYTES: {detail}.")},
    )
    def post(self, request: Request) -> Response:
        raw = request.data
        if self.limiter.exceeded:
            return Response(
                {"detail": over_limit_message(self.limiter.limit)}, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
            )
        data = (
            {**raw.dict(), "files": request.FILES.getlist("files"), "paths": raw.getlist("paths")}
            if hasattr(raw, "dict")
            else raw
        )
        ser = ImportIn(data=data)
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        options = {k: d[k] for k in ("src_lang", "tgt_lang", "extractor") if d.get(k)}
        options.update(into=d["into"], header=d["header"])
        upload = None
        try:
            with transaction.atomic():
                if d.get("paths"):
                    paths, extra = check_server_paths(d["paths"]), {}
                else:
                    zipped = d["format"] in (ImportJob.Format.FOLDER, ImportJob.Format.HTML)
                    upload = save_uploads(d["files"], folder_zip=zipped)
                    paths, extra = upload.paths, upload.job_options()
                job = import_job_create(
                    corpus_name=d["name"], fmt=d["format"], paths=paths, options={**options, **extra}, user=request.user
                )
                import_job_enqueue(job=job)
        except ImportFailure as exc:
            if upload:
                upload.remove()
            return Response(
                {"detail": upload.public(str(exc)) if upload else str(exc)}, status=status.HTTP_400_BAD_REQUEST
            )
        except BrokerUnavailable as exc:  # the job is stored, failed, with its upload kept for a retry
            return Response(
                {"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE, headers={"Retry-After": "30"}
            )
        except BaseException:
            if upload:
                upload.remove()
            raise
        return Response(ImportJobOut(job).data, status=status.HTTP_202_ACCEPTED)


class ImportDetailApi(APIView):
    """One import job: status, progress, counts, error."""

    permission_classes = [IsStaff]

    @extend_schema(responses=ImportJobOut)
    def get(self, request: Request, pk: int) -> Response:
        return Response(ImportJobOut(get_object_or_404(ImportJob, pk=pk)).data)


class ImportRetryApi(APIView):
    """Queue a failed, cancelled or stalled import again (409 when it cannot be retried; 503, broker down)."""

    permission_classes = [IsStaff]

    @extend_schema(request=None, responses={202: ImportJobOut, 409: None, 503: None})
    def post(self, request: Request, pk: int) -> Response:
        job = get_object_or_404(ImportJob, pk=pk)
        try:
            job = import_retry(job=job)
        except BrokerUnavailable as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        except JobStateError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(ImportJobOut(job).data, status=status.HTTP_202_ACCEPTED)
