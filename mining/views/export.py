"""Export of a run's kept bitext (staff): streamed downloads, or a file built by a Celery task for large sets."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, QueryDict, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from pcapp.permissions import staff_required

from ..forms import ExportForm
from ..services.export import ExportDownload, ExportFormat, KeepMode, KeepRule, export_download
from ..services.export_files import export_enqueue, export_file_for_download, export_files
from .runs import get_run_or_404


class ExportPageForm(ExportForm):
    """The export page's form: ExportForm, and (TSV) a first line naming the columns, as the CLI's --header."""

    header = forms.BooleanField(required=False, label="TSV: a first line naming the columns")


FORM_FIELDS = ("format", "keep", "threshold", "include_filtered", "side", "header")
"""What the page's form submits; after "Build in the background" the page opens again with the same choices."""


def rule_from_form(form: ExportForm) -> KeepRule:
    """The KeepRule of a valid ExportForm."""
    d = form.cleaned_data
    return KeepRule(mode=KeepMode(d["keep"]), threshold=d["threshold"], include_filtered=bool(d["include_filtered"]))


def streamed(download: ExportDownload) -> StreamingHttpResponse:
    """A streamed attachment of an export download."""
    response = StreamingHttpResponse(download.chunks, content_type=download.content_type)
    response["Content-Disposition"] = f'attachment; filename="{download.filename}"'
    if download.statement:
        response["X-Pcapp-Threshold"] = download.statement
    return response


@require_http_methods(["GET", "POST"])
@staff_required
def run_export(request: HttpRequest, pk: int) -> HttpResponse:
    """The export page; with `download=1` it streams the file instead. The page's form POSTs it (so its CSRF token
    never lands in an address); a GET with the same query (`?format=tsv&download=1`) is a link that downloads too."""
    run = get_run_or_404(pk)
    data = request.POST if request.method == "POST" else request.GET
    form = ExportPageForm(data if "format" in data else None)
    if data.get("download") and form.is_valid():
        fmt = ExportFormat(form.cleaned_data["format"])
        side = form.cleaned_data["side"] or "src"
        header = bool(form.cleaned_data["header"])
        return streamed(export_download(run=run, rule=rule_from_form(form), fmt=fmt, side=side, header=header))
    status = 400 if form.is_bound and form.errors else 200
    context = {"run": run, "form": form, "files": export_files(run=run)}
    return render(request, "mining/run_export.html", context, status=status)


@require_POST
@staff_required
def run_export_build(request: HttpRequest, pk: int) -> HttpResponse:
    """Enqueue the export task; the file appears on the export page when it is written."""
    run = get_run_or_404(pk)
    form = ExportPageForm(request.POST)
    if not form.is_valid():
        return render(
            request, "mining/run_export.html", {"run": run, "form": form, "files": export_files(run=run)}, status=400
        )
    fmt = ExportFormat(form.cleaned_data["format"])
    export_enqueue(run=run, rule=rule_from_form(form), fmt=fmt, header=bool(form.cleaned_data["header"]))
    messages.success(request, "Export queued; reload this page to see the download link when it is written.")
    chosen = QueryDict(mutable=True)
    for name in FORM_FIELDS:
        chosen.setlist(name, request.POST.getlist(name))
    return redirect(reverse("run-export", args=[run.pk]) + "?" + chosen.urlencode())  # the same choices again


@require_GET
@staff_required
def run_export_download(request: HttpRequest, pk: int, name: str) -> HttpResponse:
    """Download one export file the task wrote."""
    run = get_run_or_404(pk)
    file_path = export_file_for_download(run=run, name=name)
    if file_path is None:
        raise Http404("no such export")
    return FileResponse(file_path.open("rb"), as_attachment=True, filename=name)


urlpatterns = [
    path("runs/<int:pk>/export/", run_export, name="run-export"),
    path("runs/<int:pk>/export/build/", run_export_build, name="run-export-build"),
    path("runs/<int:pk>/export/files/<str:name>", run_export_download, name="run-export-download"),
]
