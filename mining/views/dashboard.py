"""The dashboard: corpora, runs, campaigns, what needs attention."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_GET

from ..selectors import dashboard_data


@require_GET
@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    """Landing page after login: a fixed number of queries whatever the data size."""
    return render(request, "mining/dashboard.html", dashboard_data(user=request.user))


urlpatterns = [path("", dashboard, name="dashboard")]
