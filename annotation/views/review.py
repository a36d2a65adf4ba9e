"""Reviewing: the campaign list, the one-item-at-a-time review page driven by the keyboard (htmx), undo, history."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from mining.models import MiningRun
from pcapp.dbretry import retry_on_conflict
from pcapp.permissions import reviewer_required, staff_required

from ..forms import CampaignForm, LabelForm
from ..models import Campaign, Reason
from ..selectors import campaign_for, campaigns_for, history, review_state
from ..services import (
    ReviewError,
    campaign_create,
    check_estimate_campaign,
    claim_cutoff,
    claim_locked,
    label_and_next,
    label_undo,
)


def _campaign(request: HttpRequest, pk: int) -> Campaign:
    try:
        return campaign_for(request.user, pk)
    except Campaign.DoesNotExist as exc:
        raise Http404("no such campaign among yours") from exc


@require_GET
@reviewer_required
def campaign_list(request: HttpRequest) -> HttpResponse:
    """The campaigns the user may review, with progress."""
    return render(request, "annotation/campaign_list.html", {"campaigns": campaigns_for(request.user)})


@require_http_methods(["GET", "POST"])
@staff_required
def campaign_new(request: HttpRequest) -> HttpResponse:
    """Create a campaign from runs (staff)."""
    # ?runs=ID (from a run's results page) preselects the runs, with the creator as reviewer.
    initial = {"runs": request.GET.getlist("runs"), "reviewers": [request.user.pk]} if "runs" in request.GET else {}
    form = CampaignForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            campaign = campaign_create(
                spec=form.spec,
                runs=list(form.cleaned_data["runs"]),
                reviewers=list(form.cleaned_data["reviewers"]),
                user=request.user,
            )
        except ReviewError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Campaign '{campaign}' created with {campaign.items.count()} items.")
            return redirect("campaign-results", pk=campaign.pk)
    return render(request, "annotation/campaign_new.html", {"form": form}, status=400 if form.errors else 200)


@require_POST
@staff_required
def check_estimate(request: HttpRequest, run_pk: int) -> HttpResponse:
    """The run page's one click: a campaign of 50 pairs stratified over the run's kept set, with the user as its
    reviewer; then its review page (its results page gives the kept set's precision from the labels)."""
    run = MiningRun.objects.filter(pk=run_pk).first()
    if run is None:
        raise Http404("no such run")
    try:
        campaign = check_estimate_campaign(run=run, user=request.user)
    except ReviewError as exc:
        messages.error(request, str(exc))
        return redirect("run-detail", pk=run_pk)
    messages.success(
        request,
        f"Campaign '{campaign.name}' created: {campaign.items.count()} pairs drawn over the kept set. Label them; "
        "its results page then gives the kept set's precision from your labels.",
    )
    return redirect("campaign-review", pk=campaign.pk)


def _card_context(request: HttpRequest, campaign: Campaign, error: str = "", claim: bool = True) -> dict:
    """The item card's context: the reviewer's current item and progress (selectors.review_state, one query), the
    current item claimed first (services.claim_locked) when there is none and `claim`."""
    state = review_state(campaign, request.user)
    reason = "current"
    if claim and (state.card is None or state.claimed_at <= claim_cutoff()):
        _, reason = retry_on_conflict(lambda: claim_locked(campaign=campaign, reviewer=request.user))
        state = review_state(campaign, request.user)
    elif state.card is None:
        reason = "done"
    return {
        "campaign": campaign,
        "card": state.card,
        "reason": reason,
        "error": error,
        "reasons": Reason.choices,
        "remaining": state.n_left,
        "n_done": state.n_done,
    }


@require_GET
@reviewer_required
def review(request: HttpRequest, pk: int) -> HttpResponse:
    """The review page: the reviewer's current item (claimed from the queue when needed)."""
    campaign = _campaign(request, pk)
    template = "annotation/review.html#item-card" if request.htmx else "annotation/review.html"
    return render(request, template, _card_context(request, campaign))


@require_POST
@reviewer_required
def label(request: HttpRequest, pk: int) -> HttpResponse:
    """Judge the current item; answers with the next item's card (409 with the current card when refused)."""
    campaign = _campaign(request, pk)
    form = LabelForm(request.POST)
    if not form.is_valid():
        error = f"Invalid submission: {form.errors.as_text()}"
        return render(
            request, "annotation/review.html#item-card", _card_context(request, campaign, error=error), status=400
        )
    d = form.cleaned_data
    try:  # the label and the next claim commit together (one commit per judgement)
        _, nxt = label_and_next(
            campaign=campaign,
            reviewer=request.user,
            item_id=d["item"],
            verdict=d["verdict"],
            reasons=d["reasons"],
            comment=d["comment"],
            seconds=d["seconds"] or 0.0,
            claim=bool(request.htmx),
        )
    except ReviewError as exc:
        return render(
            request,
            "annotation/review.html#item-card",
            _card_context(request, campaign, error=str(exc)),
            status=exc.status,
        )
    if not request.htmx:
        return redirect("campaign-review", pk=pk)
    context = _card_context(request, campaign, claim=False)  # the next item was claimed with the judgement
    context["reason"] = "claimed" if nxt else "done"
    return render(request, "annotation/review.html#item-card", context)


@require_POST
@reviewer_required
def undo(request: HttpRequest, pk: int) -> HttpResponse:
    """Take back the last judgement; its item becomes current again."""
    campaign = _campaign(request, pk)
    item = retry_on_conflict(lambda: label_undo(campaign=campaign, reviewer=request.user))
    if not request.htmx:
        return redirect("campaign-review", pk=pk)
    context = _card_context(request, campaign, claim=item is None)  # else the undone item is current again
    return render(request, "annotation/review.html#item-card", context)


@require_GET
@reviewer_required
def history_item(request: HttpRequest, pk: int, n: int) -> HttpResponse:
    """The reviewer's n-th judgement in this campaign (j/k move through them), read-only."""
    campaign = _campaign(request, pk)
    labels = history(campaign, request.user)
    if not 0 <= n < len(labels):
        raise Http404("no such judgement")
    return render(
        request,
        "annotation/review.html#history-card",
        {
            "campaign": campaign,
            "past": labels[n],
            "past_reasons": [Reason(r).label if r in Reason.values else r for r in labels[n].reasons or []],
            "n": n,
            "n_done": len(labels),
        },
    )
