"""The calibration page of a language pair (staff): how each method calibrates (cross-validated reliability, ECE,
Brier), train a new model from a campaign's labels, pick the threshold for a target precision live, apply both."""

from __future__ import annotations

import numpy as np
from django.contrib import messages
from django.db.models import Exists, OuterRef
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from annotation.models import Campaign
from mining.core.calibration.estimates import choose_threshold
from mining.models import (
    Artefact,
    ArtefactKind,
    Corpus,
    GoldSentencePair,
    JobStatus,
    LanguagePairSetting,
    MiningRun,
    RunKind,
    SentencePairCandidate,
)
from mining.services.calibrators import threshold_apply
from mining.services.runs import run_create
from pcapp.permissions import staff_required

from .charts import reliability_svg
from .services.calibration import threshold_labels
from .services.fine_tuning import check_fine_tune


def _latest(src: str, tgt: str) -> Artefact | None:
    return (
        Artefact.objects.filter(kind=ArtefactKind.CALIBRATION, name=f"calibration-{src}-{tgt}")
        .order_by("-version")
        .first()
    )


def _threshold_context(src: str, tgt: str, target: float) -> dict:
    """The lowest score threshold whose stratum-weighted precision on the labels reaches `target`, with its Wilson
    interval and the number of candidates it keeps over every run of the pair. Labels of items a campaign drew by
    score or confidence (top, around a threshold, uncertain) are left out of the estimate and counted."""
    data = threshold_labels(src_lang=src, tgt_lang=tgt)
    if not len(data.labels):
        return {"target": target, "choice": None, "n_labels": 0, "n_left_out": data.n_left_out}
    all_scores = np.array(
        list(
            SentencePairCandidate.objects.filter(run__src_lang=src, run__tgt_lang=tgt, run__kind=RunKind.SENTENCE)
            .values_list("score", flat=True)
            .iterator(chunk_size=100_000)
        )
    )
    choice = choose_threshold(
        data.scores, data.labels, target, weights=data.weights, all_scores=all_scores if len(all_scores) else None
    )
    return {"target": target, "choice": choice, "n_labels": len(data.labels), "n_left_out": data.n_left_out}


@require_GET
@staff_required
def calibration_page(request: HttpRequest, src: str, tgt: str) -> HttpResponse:
    """The page, or (htmx) just the threshold panel for the target precision in ?target=."""
    target = min(0.999, max(0.5, float(request.GET.get("target", 0.95) or 0.95)))
    threshold = _threshold_context(src, tgt, target)
    if request.htmx:
        return render(request, "feedback/calibration.html#threshold-panel", {"src": src, "tgt": tgt, **threshold})
    artefact = _latest(src, tgt)
    report = artefact.metrics.get("cross_validated", {}) if artefact else {}
    chart = (
        reliability_svg(
            {name: (r["reliability"]["confidence"], r["reliability"]["frequency"]) for name, r in report.items()}
        )
        if report
        else None
    )
    context = {
        "src": src,
        "tgt": tgt,
        "artefact": artefact,
        "report": report,
        "chart": chart,
        "setting": LanguagePairSetting.objects.filter(src_lang=src, tgt_lang=tgt).first(),
        "campaigns": Campaign.objects.filter(runs__src_lang=src, runs__tgt_lang=tgt).distinct(),
        "runs": MiningRun.objects.filter(
            kind=RunKind.SENTENCE, src_lang=src, tgt_lang=tgt, status=JobStatus.SUCCEEDED
        ).order_by("-created_at")[:20],
        **_fine_tune_context(src, tgt),
        **threshold,
    }
    return render(request, "feedback/calibration.html", context)


@require_POST
@staff_required
def calibration_train(request: HttpRequest, src: str, tgt: str) -> HttpResponse:
    """Start a calibration run on a campaign's labels (or all labels of the pair)."""
    campaign = request.POST.get("campaign") or None
    method = request.POST.get("method", "head")
    run = run_create(
        kind=RunKind.CALIBRATE,
        user=request.user,
        src_lang=src,
        tgt_lang=tgt,
        params={"method": method, "campaign": int(campaign) if campaign else None},
        name=f"calibrate {src}-{tgt}",
    )
    messages.success(request, f"Calibration run {run.pk} queued.")
    return redirect("run-detail", pk=run.pk)


@require_POST
@staff_required
def calibration_apply_view(request: HttpRequest, src: str, tgt: str) -> HttpResponse:
    """Apply the latest calibration to a run (a background run), and/or store the threshold for the pair."""
    artefact = _latest(src, tgt)
    if request.POST.get("threshold"):
        threshold_apply(
            src_lang=src,
            tgt_lang=tgt,
            threshold=float(request.POST["threshold"]),
            target_precision=float(request.POST.get("target") or 0) or None,
            estimated_precision=float(request.POST.get("estimate") or 0) or None,
            calibration=artefact,
            user=request.user,
        )
        messages.success(request, f"Threshold {float(request.POST['threshold']):.4f} stored for {src}-{tgt}.")
    if request.POST.get("run") and artefact:
        target = MiningRun.objects.get(pk=int(request.POST["run"]))
        run = run_create(
            kind=RunKind.APPLY_CALIBRATION,
            user=request.user,
            parent=target,
            src_lang=src,
            tgt_lang=tgt,
            params={"calibration": artefact.pk},
            name=f"apply {artefact} to run {target.pk}",
        )
        messages.success(request, f"Applying {artefact} to run {target.pk} (run {run.pk}).")
    return redirect("calibration", src=src, tgt=tgt)


def _fine_tune_context(src: str, tgt: str) -> dict:
    """The DAN encoders of the pair that can be fine-tuned, corpora with gold pairs to evaluate on, and the
    fine-tuned encoders so far with their before/after figures and gate decision."""
    dans = Artefact.objects.filter(kind=ArtefactKind.ENCODER, name="dan", src_lang=src, tgt_lang=tgt)
    return {
        "dan_encoders": dans.filter(is_active=True).exclude(path="").order_by("-version"),
        "eval_corpora": Corpus.objects.filter(
            Exists(GoldSentencePair.objects.filter(corpus=OuterRef("pk"))), languages__contains=[src, tgt]
        ).order_by("name"),
        "fine_tuned": [a for a in dans.order_by("-version")[:20] if "fine_tune" in a.metrics],
    }


@require_POST
@staff_required
def calibration_fine_tune(request: HttpRequest, src: str, tgt: str) -> HttpResponse:
    """Start a run that fine-tunes a DAN encoder on the pair's reviews (all, or a campaign's) and gates the result on
    a held-out evaluation corpus."""
    try:
        base = Artefact.objects.filter(pk=int(request.POST.get("encoder") or 0), kind=ArtefactKind.ENCODER).first()
        campaign = request.POST.get("campaign") or None
        params = {
            "campaign": int(campaign) if campaign else None,
            "eval_corpus": int(request.POST.get("eval_corpus") or 0),
            "seed": int(request.POST.get("seed") or 0),
        }
        if base is None:
            raise ValueError("pick a DAN encoder to fine-tune")
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
