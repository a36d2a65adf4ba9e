"""Corpus upload pages (staff only): the form, then the import job's live progress."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from pcapp.permissions import staff_required

from ..forms_import import ImportForm
from ..ingest.errors import ImportFailure
from ..models import ImportJob, JobStatus
from ..selectors.imports import crawl_import_view
from ..services.imports import import_job_create, import_job_enqueue, import_retry
from ..services.jobs import BrokerUnavailable, JobStateError
from ..services.uploads import SizeLimitUploadHandler, over_limit_message, save_uploads

ZIPPED = (ImportJob.Format.FOLDER, ImportJob.Format.HTML)  # a folder is uploaded as one .zip


@csrf_exempt  # the limit handler must be installed before the body is read; CSRF is checked just below
@require_http_methods(["GET", "POST"])
@staff_required
def import_start(request: HttpRequest) -> HttpResponse:
    """Upload files and start an import job."""
    limiter = SizeLimitUploadHandler(request)
    request.upload_handlers.insert(0, limiter)
    if request.method == "POST":
        request.POST  # noqa: B018 -- read the body through the limiter, which stops at the limit
        if limiter.exceeded:
            # Refused before the CSRF check, which would need the part of the body that was not read. Nothing is
            # stored or changed: the answer is the empty form with the error.
            return _render(request, ImportForm(), limiter, error=over_limit_message(limiter.limit), status=400)
    return _import_start(request, limiter)


@csrf_protect
def _import_start(request: HttpRequest, limiter: SizeLimitUploadHandler) -> HttpResponse:
    form = ImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        upload = None
        try:
            with transaction.atomic():
                upload = save_uploads(form.cleaned_data["files"], folder_zip=form.cleaned_data["format"] in ZIPPED)
                job = import_job_create(
                    corpus_name=form.cleaned_data["name"],
                    fmt=form.cleaned_data["format"],
                    paths=upload.paths,
                    options={**form.options(), **upload.job_options()},
                    user=request.user,
                )
                import_job_enqueue(job=job)
        except ImportFailure as exc:
            form.add_error(None, upload.public(str(exc)) if upload else str(exc))
            if upload:
                upload.remove()
        except BrokerUnavailable as exc:  # the job is stored, failed, with its upload kept for a retry
            messages.error(request, str(exc))
            return redirect("import-list")
        except BaseException:
            if upload:
                upload.remove()
            raise
        else:
            messages.success(request, f"Import of '{job.corpus_name}' queued.")
            return redirect("import-detail", pk=job.pk)
    return _render(request, form, limiter, status=400 if request.method == "POST" else 200)


def _render(
    request: HttpRequest, form: ImportForm, limiter: SizeLimitUploadHandler, *, error: str = "", status: int
) -> HttpResponse:
    context = {
        "form": form,
        "limit": limiter.limit,
        "upload_error": error,
        "max_sentence_chars": settings.PCAPP_MAX_SENTENCE_CHARS,
    }
    return render(request, "mining/import_start.html", context, status=status)


@require_GET
@staff_required
def import_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """An import job's page; its #import-progress fragment polls until the job ends."""
    job = ImportJob.objects.select_related("corpus").filter(pk=pk).first()
    if job is None:
        raise Http404("no such import")
    finished = job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)
    context = {"job": job, "finished": finished, **crawl_import_view(job=job)}
    if getattr(request, "htmx", False):
        response = render(request, "mining/import_detail.html#import-progress", context)
        if finished:
            response.status_code = HttpResponseStopPolling.status_code
        return response
    return render(request, "mining/import_detail.html", context)


@require_POST
@staff_required
def import_retry_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Queue a failed, cancelled or stalled import again."""
    job = ImportJob.objects.filter(pk=pk).first()
    if job is None:
        raise Http404("no such import")
    try:
        import_retry(job=job)
        messages.success(request, f"Import {job.pk} queued again.")
    except (JobStateError, BrokerUnavailable) as exc:
        messages.error(request, str(exc))
    return redirect("import-detail", pk=job.pk)


@require_GET
@staff_required
def import_list(request: HttpRequest) -> HttpResponse:
    """Recent imports."""
    return render(request, "mining/import_list.html", {"jobs": ImportJob.objects.select_related("corpus")[:100]})


urlpatterns = [
    path("imports/", import_list, name="import-list"),
    path("imports/new/", import_start, name="import-start"),
    path("imports/<int:pk>/", import_detail, name="import-detail"),
    path("imports/<int:pk>/retry/", import_retry_view, name="import-retry"),
]
