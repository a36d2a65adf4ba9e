"""Corpus upload pages (staff only): the form, then the import job's live progress."""

from __future__ import annotations

from django.contrib import messages
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseStopPolling

from pcapp.permissions import staff_required

from ..forms_import import ImportForm
from ..ingest.errors import ImportFailure
from ..models import ImportJob, JobStatus
from ..services.imports import import_job_create, import_job_enqueue
from ..services.uploads import SizeLimitUploadHandler, save_uploads


@csrf_exempt  # the limit handler must be installed before the body is read; CSRF is checked just below
@require_http_methods(["GET", "POST"])
@staff_required
def import_start(request: HttpRequest) -> HttpResponse:
    """Upload files and start an import job."""
    limiter = SizeLimitUploadHandler(request)
    request.upload_handlers.insert(0, limiter)
    return _import_start(request, limiter)


@csrf_protect
def _import_start(request: HttpRequest, limiter: SizeLimitUploadHandler) -> HttpResponse:
    form = ImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST":
        if limiter.exceeded:
            form.add_error(None, f"The upload is over the limit of {limiter.limit:,} bytes (PCAPP_MAX_UPLOAD_BYTES).")
        elif form.is_valid():
            try:
                with transaction.atomic():
                    paths = save_uploads(
                        form.cleaned_data["files"], unzip=form.cleaned_data["format"] == ImportJob.Format.FOLDER
                    )
                    job = import_job_create(
                        corpus_name=form.cleaned_data["name"],
                        fmt=form.cleaned_data["format"],
                        paths=paths,
                        options=form.options(),
                        user=request.user,
                    )
                    import_job_enqueue(job=job)
            except ImportFailure as exc:
                form.add_error(None, str(exc))
            else:
                messages.success(request, f"Import of '{job.corpus_name}' queued.")
                return redirect("import-detail", pk=job.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "mining/import_start.html", {"form": form, "limit": limiter.limit}, status=status)


@require_GET
@staff_required
def import_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """An import job's page; its #import-progress fragment polls until the job ends."""
    job = ImportJob.objects.select_related("corpus").filter(pk=pk).first()
    if job is None:
        raise Http404("no such import")
    finished = job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)
    if getattr(request, "htmx", False):
        response = render(request, "mining/import_detail.html#import-progress", {"job": job, "finished": finished})
        if finished:
            response.status_code = HttpResponseStopPolling.status_code
        return response
    return render(request, "mining/import_detail.html", {"job": job, "finished": finished})


@require_GET
@staff_required
def import_list(request: HttpRequest) -> HttpResponse:
    """Recent imports."""
    return render(request, "mining/import_list.html", {"jobs": ImportJob.objects.select_related("corpus")[:100]})


urlpatterns = [
    path("imports/", import_list, name="import-list"),
    path("imports/new/", import_start, name="import-start"),
    path("imports/<int:pk>/", import_detail, name="import-detail"),
]
