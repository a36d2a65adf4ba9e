"""Run results: ranked candidates with filters, score histogram and yield curve, comparison of two runs."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET

from pcapp.http import HtmxHttpRequest
from pcapp.permissions import run_results_required

from ..charts import histogram_svg, yield_svg
from ..forms import CandidateFilterForm
from ..models import MiningRun, RunKind
from ..selectors import (
    candidate_page,
    filter_reasons,
    run_compare,
    run_threshold,
    run_threshold_info,
    score_histogram,
)
from .runs import get_run_or_404

PAGE_SIZE = 50
CANDIDATE_KINDS = (RunKind.SENTENCE, RunKind.DOCUMENT, RunKind.ALIGN)


def _float_param(request: HttpRequest, name: str, default: float | None) -> float | None:
    raw = request.GET.get(name, "")
    if raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError:
        return default


@require_GET
@run_results_required
def run_results(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Candidates in rank order (keyset pages), with histogram and yield; htmx asks only for #candidate-list."""
    run = get_run_or_404(pk)
    if run.kind not in CANDIDATE_KINDS:
        return _no_candidates(request, run)
    reasons = filter_reasons(run=run)
    form = CandidateFilterForm(request.GET or None, reasons=reasons)
    filters = form.cleaned_data if form.is_valid() else {}
    page = candidate_page(run=run, filters=filters, after=filters.get("after"), size=PAGE_SIZE)
    query = request.GET.copy()
    query.pop("after", None)
    context = {
        "run": run,
        "form": form,
        "page": page,
        "base_query": query.urlencode(),
        "is_document": run.kind == RunKind.DOCUMENT,
    }
    if request.htmx and request.htmx.target == "candidate-list":
        return render(request, "mining/run_results.html#candidate-list", context)
    hist = score_histogram(run=run)
    info = run_threshold_info(run)
    threshold = info.value
    context.update(
        threshold_info=info,
        campaigns_url=reverse("campaign-new") + f"?runs={run.pk}",
        histogram=histogram_svg(hist.edges, hist.counts, hist.kept_counts, threshold=threshold),
        yield_chart=yield_svg(hist.yield_curve(), threshold=threshold),
        threshold_rows=hist.threshold_table()[:: max(1, len(hist.counts) // 10)],
        total=hist.total,
        threshold=threshold,
        reasons=reasons,
        align_runs=list(run.children.filter(kind=RunKind.ALIGN).order_by("-created_at")[:5])
        if run.kind == RunKind.DOCUMENT
        else [],
    )
    return render(request, "mining/run_results.html", context)


def _no_candidates(request: HttpRequest, run: MiningRun) -> HttpResponse:
    """Runs that produce no candidates (calibration, training, ...) have no results page: send the user where their
    outcome is shown."""
    if run.kind == RunKind.CALIBRATE and run.src_lang and run.tgt_lang:
        messages.info(
            request,
            f"{run} trains a calibration model: its figures are on the {run.src_lang}-{run.tgt_lang} calibration page.",
        )
        return redirect("calibration", src=run.src_lang, tgt=run.tgt_lang)
    if run.kind == RunKind.APPLY_CALIBRATION and run.parent_id:
        messages.info(request, f"{run} recomputed the confidences of run {run.parent_id}: these are its results.")
        return redirect("run-results", pk=run.parent_id)
    messages.info(request, f"{run} ({run.get_kind_display().lower()}) produces no candidate pairs to list.")
    return redirect("run-detail", pk=run.pk)


@require_GET
@run_results_required
def run_compare_view(request: HttpRequest) -> HttpResponse:
    """Compare two runs: overlap of kept pairs and each one's precision on labelled pairs."""
    # Only runs that have pairs to compare (not calibration or training jobs); unchosen, the form offers the two
    # newest, of one language pair when it can.
    runs = list(
        MiningRun.objects.filter(kind__in=CANDIDATE_KINDS)
        .select_related("src_corpus", "tgt_corpus")
        .order_by("-created_at")[:200]
    )
    a_id, b_id = request.GET.get("a"), request.GET.get("b")
    # "compare with another run" on a run's results page sends ?a=<that run>: it is run A, and run B the newest other
    # run of its language pair (else the newest other run)
    first = next((r for r in runs if a_id and str(r.pk) == a_id), runs[0] if runs else None)
    others = [r for r in runs if r is not first]
    second = next((r for r in others if (r.src_lang, r.tgt_lang) == (first.src_lang, first.tgt_lang)), None)
    context: dict = {"runs": runs, "default_a": first, "default_b": second or (others[0] if others else first)}
    if a_id and b_id and a_id.isdigit() and b_id.isdigit():
        a, b = get_run_or_404(int(a_id)), get_run_or_404(int(b_id))
        ta = _float_param(request, "ta", run_threshold(a))
        tb = _float_param(request, "tb", run_threshold(b))
        same_corpora = (a.src_corpus_id, a.tgt_corpus_id) == (b.src_corpus_id, b.tgt_corpus_id)
        context.update(
            a=a,
            b=b,
            ta=ta,
            tb=tb,
            same_corpora=same_corpora,
            same_pair=(a.src_lang, a.tgt_lang) == (b.src_lang, b.tgt_lang),
            same_run=a.pk == b.pk,
            cmp=run_compare(a=a, b=b, threshold_a=ta, threshold_b=tb),
        )
    return render(request, "mining/run_compare.html", context)


urlpatterns = [
    path("runs/<int:pk>/results/", run_results, name="run-results"),
    path("runs/compare/", run_compare_view, name="run-compare"),
]
