"""The site's home page: it composes the apps' summaries (mining's corpora, runs and jobs; annotation's campaigns),
so it sits in pcapp, beside the apps, rather than in one of them."""

import sys

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django.views.defaults import page_not_found, server_error

from annotation.selectors import campaign_summaries
from mining.selectors import dashboard_data

from .middleware import database_unavailable


@require_GET
@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    """Landing page after login: a fixed number of queries whatever the data size."""
    data = dashboard_data(user=request.user)
    if not data.get("no_role"):
        campaigns = campaign_summaries(user=request.user)
        data.update(campaigns=campaigns, waiting_total=sum(c.get("waiting_for_user", 0) for c in campaigns))
    return render(request, "dashboard.html", data)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """404: JSON under /api/ (what the schema documents), Django's page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return page_not_found(request, exception)


def server_failed(request: HttpRequest) -> HttpResponse:
    """500, or 503 when the error is the database being away (raised outside a view, e.g. in a middleware)."""
    return database_unavailable(request, sys.exc_info()[1]) or server_error(request)
