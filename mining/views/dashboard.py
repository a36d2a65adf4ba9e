"""The dashboard: corpora, runs, campaigns, what needs attention."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_GET

from ..models import Corpus, MiningRun


@require_GET
@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    """Landing page after login."""
    context = {
        "corpora": Corpus.objects.order_by("name")[:50],
        "runs": MiningRun.objects.select_related("src_corpus", "tgt_corpus").order_by("-created_at")[:20],
    }
    return render(request, "mining/dashboard.html", context)


urlpatterns = [path("", dashboard, name="dashboard")]
