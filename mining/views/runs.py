"""Mining run pages: start a run (staff), watch its live progress, cancel it, re-run it."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseStopPolling

from pcapp.http import HtmxHttpRequest
from pcapp.permissions import reviewer_required, staff_required
from pcapp.roles import can_see_run_results, run_figures

from ..forms import RunStartForm
from ..models import JobStatus, MiningRun, RunKind
from ..selectors import run_get, run_list, run_progress, scale_key
from ..selectors.precision import run_label_count, threshold_statement
from ..services.export_files import export_files
from ..services.runs import BrokerUnavailable, RunStartError, run_cancel, run_create, run_delete, run_retry


def get_run_or_404(pk: int) -> MiningRun:
    """The run with its corpora and encoder, or 404."""
    try:
        return run_get(pk=pk)
    except MiningRun.DoesNotExist as exc:
        raise Http404("no such run") from exc


@require_http_methods(["GET", "POST"])
@staff_required
def run_start(request: HtmxHttpRequest) -> HttpResponse:
    """The run form; a valid POST creates the run (enqueued on commit) and redirects to its page.

    Picking a corpus re-renders the form (htmx GET with the current values) to offer only its languages.
    """
    initial = dict(request.GET.items())  # preselections (a corpus, a kind, the parent run); the form reads its own
    form = RunStartForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            run = run_create(user=request.user, **form.run_kwargs())
            messages.success(request, f"Run {run.pk} queued.")
        except RunStartError as exc:  # the form checked the same rules: only a change meanwhile gets here
            for name, message in exc.errors.items():
                form.add_error(name if name in form.fields else None, message)
            return render(request, "mining/run_start.html", {"form": form})
        except BrokerUnavailable as exc:  # the run was created and marked failed: its page says why
            messages.error(request, str(exc))
            run = MiningRun.objects.filter(created_by=request.user).order_by("-pk").first()
            return redirect("run-detail", pk=run.pk) if run else redirect("run-list")
        return redirect("run-detail", pk=run.pk)
    template = "mining/run_start.html#run-start-form" if request.htmx else "mining/run_start.html"
    return render(request, template, {"form": form})


@require_GET
@reviewer_required
def run_index(request: HttpRequest) -> HttpResponse:
    """All recent runs."""
    runs = run_list(limit=200)
    return render(request, "mining/run_list.html", {"runs": runs, "any_active": any(not r.is_finished for r in runs)})


@require_GET
@reviewer_required
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The run page; its #run-progress fragment polls itself every second until the run ends."""
    run = get_run_or_404(pk)
    return render(request, "mining/run_detail.html", _detail_context(request, run))


def _detail_context(request: HttpRequest, run: MiningRun) -> dict:
    """The run page's context; parameters and stats as the user may see them (reviewers: no score figures)."""
    params, stats = run_figures(request.user, run.params, run.stats)
    context = {
        "run": run,
        "progress": run_progress(run=run),
        "params": params,
        "stats": stats,
        # the threshold and its scale as the results page states them (one resolver), for those who may see scores
        "show_threshold": can_see_run_results(request.user),
        "scale_key": scale_key(run),
    }
    if can_see_run_results(request.user) and run.kind == RunKind.SENTENCE and run.status == JobStatus.SUCCEEDED:
        # the threshold, its source and the precision stated for it: score-derived, so staff's only
        context["statement"] = threshold_statement(run)
        context["run_labels"] = run_label_count(run)
    return context


@require_GET
@reviewer_required
def run_progress_partial(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The #run-progress fragment; once the run has ended it is sent without the trigger, as htmx's stop-polling
    response (286)."""
    run = get_run_or_404(pk)
    context = _detail_context(request, run)
    response = render(request, "mining/run_detail.html#run-progress", context)
    if context["progress"].finished and request.htmx:
        return HttpResponseStopPolling(response.content)
    return response


@require_GET
@staff_required
def export_index(request: HttpRequest) -> HttpResponse:
    """Runs whose pairs can be exported (succeeded sentence, document and alignment runs), with the files built."""
    runs = run_list(limit=100, kinds=(RunKind.SENTENCE, RunKind.DOCUMENT, RunKind.ALIGN), status=JobStatus.SUCCEEDED)
    rows = [(run, export_files(run=run)[:5]) for run in runs]
    return render(request, "mining/export_list.html", {"rows": rows})


def _after_action(request: HtmxHttpRequest, run: MiningRun) -> HttpResponse:
    if request.htmx:
        return HttpResponseClientRedirect(reverse("run-detail", args=[run.pk]))
    return redirect("run-detail", pk=run.pk)


@require_POST
@staff_required
def run_cancel_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Cancel a pending or running run: it shows as cancelled at once; its worker stops at its next check."""
    run = get_run_or_404(pk)
    try:
        run_cancel(run=run)
        messages.success(request, f"Run {run.pk}: cancelled.")
    except ValueError as exc:
        messages.error(request, str(exc))
    return _after_action(request, run)


@require_POST
@staff_required
def run_retry_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Re-run a failed or cancelled run; it resumes from its finished shards."""
    run = get_run_or_404(pk)
    try:
        run_retry(run=run)
        messages.success(request, f"Run {run.pk} queued again; it resumes where it stopped.")
    except (ValueError, BrokerUnavailable) as exc:
        messages.error(request, str(exc))
    return _after_action(request, run)


@require_POST
@staff_required
def run_delete_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Delete a finished (or stalled) run with its candidates and files, once the box is ticked."""
    run = get_run_or_404(pk)
    if request.POST.get("confirm") != "yes":
        messages.error(request, "Tick the box to confirm the deletion.")
        return _after_action(request, run)
    try:
        counts = run_delete(run=run)
    except ValueError as exc:
        messages.error(request, str(exc))
        return _after_action(request, run)
    messages.success(request, f"Run {pk} deleted ({counts.get('candidates', 0)} candidates).")
    if request.htmx:
        return HttpResponseClientRedirect(reverse("run-list"))
    return redirect("run-list")


urlpatterns = [
    path("runs/", run_index, name="run-list"),
    path("runs/new/", run_start, name="run-start"),
    path("runs/<int:pk>/", run_detail, name="run-detail"),
    path("runs/<int:pk>/progress/", run_progress_partial, name="run-progress"),
    path("runs/<int:pk>/cancel/", run_cancel_view, name="run-cancel"),
    path("runs/<int:pk>/retry/", run_retry_view, name="run-retry"),
    path("runs/<int:pk>/delete/", run_delete_view, name="run-delete"),
    path("exports/", export_index, name="export-list"),
]
