"""The calibration page of a language pair (staff): how each method calibrates (cross-validated reliability, ECE,
Brier), train a new model from a campaign's labels, pick the threshold for a target precision live, apply both."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_POST

from annotation.models import Campaign
from mining.models import MiningRun, RunKind
from mining.services.calibrators import threshold_apply
from mining.services.runs import run_create
from pcapp.permissions import staff_required

from .charts import reliability_svg
from .forms import CalibrationApplyForm, CalibrationTrainForm, FineTuneForm, TargetForm
from .selectors import (
    ScaleGroup,
    fine_tune_options,
    latest_calibration_any,
    model_cautions,
    pair_exists,
    pair_overview,
    pair_runs,
    pair_scales,
    threshold_choice,
)
from .services.calibration import calibration_label_shortfall
from .services.fine_tuning import check_fine_tune


def _check_pair(src: str, tgt: str) -> None:
    if not pair_exists(src, tgt):
        raise Http404(f"no run or setting for the language pair {src}-{tgt}")


def _form_errors(request: HttpRequest, form) -> None:
    for field, errors in form.errors.items():
        for error in errors:
            messages.error(request, error if field == "__all__" else f"{field}: {error}")


@require_GET
@staff_required
def feedback_index(request: HttpRequest) -> HttpResponse:
    """The feedback loop's entry: each language pair with its runs, labels, calibration model and stored threshold,
    linking the pair's calibration page."""
    return render(request, "feedback/index.html", {"pairs": pair_overview()})


@require_GET
@staff_required
def calibration_page(request: HttpRequest, src: str, tgt: str) -> HttpResponse:
    """The page, or (htmx) just the threshold panel for the target precision in ?target= over the runs in ?runs=
    (default: the pair's newest run). ?campaign= preselects the campaign whose labels train a new model."""
    _check_pair(src, tgt)
    target_form = TargetForm(request.GET)
    scales = pair_scales(src, tgt)
    wanted = target_form.scale_key()
    scale = next((g for g in scales if g.key == wanted), None) or next(iter(scales), None)
    runs = scale.runs if scale is not None else []
    selected = target_form.selected_runs(default=runs[:1])
    threshold = {
        **threshold_choice(src, tgt, target_form.value(), selected, scale or ScaleGroup("", [], None)),
        "target_form": target_form,
        "pair_runs": runs,
        "scales": scales,
        "selected_ids": {r.pk for r in selected},
    }
    if request.htmx:
        return render(request, "feedback/calibration.html#threshold-panel", {"src": src, "tgt": tgt, **threshold})
    artefact = latest_calibration_any(src, tgt)
    report = artefact.metrics.get("cross_validated", {}) if artefact else {}
    chart = (
        reliability_svg(
            {
                name: (
                    r["reliability"]["confidence"],
                    r["reliability"]["frequency"],
                    r["reliability"].get("count") or [0] * len(r["reliability"]["confidence"]),
                )
                for name, r in report.items()
            }
        )
        if report
        else None
    )
    campaign = request.GET.get("campaign", "")
    context = {
        "src": src,
        "tgt": tgt,
        "artefact": artefact,
        "report": report,
        "chart": chart,
        "model_cautions": model_cautions(artefact),
        "setting": scale.setting if scale is not None else None,
        "campaigns": Campaign.objects.filter(runs__src_lang=src, runs__tgt_lang=tgt).distinct(),
        "chosen_campaign": int(campaign) if campaign.isdigit() else None,
        "runs": pair_runs(src, tgt)[:20],
        "applications": MiningRun.objects.filter(kind=RunKind.APPLY_CALIBRATION, src_lang=src, tgt_lang=tgt)
        .select_related("parent")
        .order_by("-created_at")[:5],
        **fine_tune_options(src, tgt),
        **threshold,
    }
    return render(request, "feedback/calibration.html", context)


@require_POST
@staff_required
def calibration_train(request: HttpRequest, src: str, tgt: str) -> HttpResponse:
    """Start a calibration run on a campaign's labels (or all labels of the pair)."""
    _check_pair(src, tgt)
    form = CalibrationTrainForm(request.POST)
    if not form.is_valid():
        _form_errors(request, form)
        return redirect("calibration", src=src, tgt=tgt)
    campaign = form.cleaned_data["campaign"]
    shortfall = calibration_label_shortfall(src_lang=src, tgt_lang=tgt, campaign_id=campaign.pk if campaign else None)
    if shortfall:  # the run would fail at once: say so here instead of queuing it
        messages.error(request, f"Not trained: {shortfall}. Review more pairs first.")
        return redirect("calibration", src=src, tgt=tgt)
    run = run_create(
        kind=RunKind.CALIBRATE,
        user=request.user,
        src_lang=src,
        tgt_lang=tgt,
        params={"method": form.cleaned_data["method"], "campaign": campaign.pk if campaign else None},
        name=f"calibrate {src}-{tgt}",
    )
    messages.success(request, f"Calibration run {run.pk} queued.")
    return redirect("run-detail", pk=run.pk)


@require_POST
@staff_required
def calibration_apply_view(request: HttpRequest, src: str, tgt: str) -> HttpResponse:
    """Apply the latest calibration to a run (a background run), and/or store the threshold for the pair."""
    _check_pair(src, tgt)
    form = CalibrationApplyForm(request.POST)
    if not form.is_valid():
        _form_errors(request, form)
        return redirect("calibration", src=src, tgt=tgt)
    d = form.cleaned_data
    artefact = latest_calibration_any(src, tgt)
    scale = next((g for g in pair_scales(src, tgt) if g.runs and g.key == d["scale"]), None)
    if d["threshold"] is not None and scale is None:
        messages.error(
            request,
            f"A threshold is a point on one scoring configuration's scale: '{d['scale'] or '(none)'}' is not one of "
            f"the {src}-{tgt} runs'. Pick the configuration on this page and store it again.",
        )
        return redirect("calibration", src=src, tgt=tgt)
    if not d["confirm"]:
        weak = (
            d["threshold"] is not None and d["target"] and threshold_choice(src, tgt, d["target"], scale=scale)["weak"]
        )
        if weak or (d["run"] is not None and model_cautions(artefact)):
            messages.error(
                request,
                "The estimate behind this step is weak (see the cautions on this page): tick the confirmation box "
                "to apply it anyway.",
            )
            return redirect("calibration", src=src, tgt=tgt)
    if d["threshold"] is not None:
        threshold_apply(
            src_lang=src,
            tgt_lang=tgt,
            scale_key=scale.key,
            threshold=d["threshold"],
            target_precision=d["target"] or None,
            estimated_precision=d["estimate"] or None,
            calibration=artefact,
            user=request.user,
        )
        messages.success(request, f"Threshold {d['threshold']:.4f} stored for {src}-{tgt} on {scale.key} runs.")
    if d["run"] is not None and artefact:
        target = d["run"]
        run = run_create(
            kind=RunKind.APPLY_CALIBRATION,
            user=request.user,
            parent=target,
            src_lang=src,
            tgt_lang=tgt,
            params={"calibration": artefact.pk},
            name=f"apply {artefact} to run {target.pk}",
        )
        messages.success(request, f"Applying {artefact} to run {target.pk}: this page follows it; its results follow.")
        return redirect("run-detail", pk=run.pk)  # the job's page: progress, then the link to the run's results
    if scale is not None:
        return redirect(reverse("calibration", args=[src, tgt]) + "?" + urlencode({"scale": scale.key}))
    return redirect("calibration", src=src, tgt=tgt)


@require_POST
@staff_required
def calibration_fine_tune(request: HttpRequest, src: str, tgt: str) -> HttpResponse:
    """Start a run that fine-tunes a DAN encoder on the pair's reviews (all, or a campaign's) and gates the result on
    a held-out evaluation corpus."""
    _check_pair(src, tgt)
    form = FineTuneForm(request.POST)
    if not form.is_valid():
        _form_errors(request, form)
        return redirect("calibration", src=src, tgt=tgt)
    d = form.cleaned_data
    base = d["encoder"]
    params = {
        "campaign": d["campaign"].pk if d["campaign"] else None,
        "eval_corpus": d["eval_corpus"].pk,
        "seed": d["seed"] or 0,
    }
    try:
        check_fine_tune(base=base, src_lang=src, tgt_lang=tgt, params=params)
    except ValueError as exc:
        messages.error(request, str(exc))
        return redirect("calibration", src=src, tgt=tgt)
    run = run_create(
        kind=RunKind.FINE_TUNE,
        user=request.user,
        src_corpus=base.trained_on,
        encoder=base,
        src_lang=src,
        tgt_lang=tgt,
        params=params,
        name=f"fine-tune {base} on {src}-{tgt} reviews",
    )
    messages.success(request, f"Fine-tuning run {run.pk} queued.")
    return redirect("run-detail", pk=run.pk)
