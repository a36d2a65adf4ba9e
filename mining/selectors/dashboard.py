"""The dashboard: corpora, recent runs, and what needs attention."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from pcapp.roles import is_reviewer, is_staff

from ..models import Corpus, ImportJob, JobStatus, MiningRun
from .runs import run_list


def dashboard_data(*, user: Any) -> dict[str, Any]:
    """Corpora, recent runs, and what needs attention (recently failed and active runs and imports).

    Users with no role (neither staff nor reviewer) see nothing but a note.
    """
    if not is_reviewer(user):
        return {"no_role": True}
    recent_failures = MiningRun.objects.filter(
        status=JobStatus.FAILED, finished_at__gte=timezone.now() - timezone.timedelta(days=7)
    )
    return {
        "corpora": list(Corpus.objects.order_by("name")[:50]),
        "runs": list(run_list(limit=20)),
        "attention_runs": list(recent_failures.order_by("-finished_at")[:10]),
        "active_runs": list(
            MiningRun.objects.filter(status__in=[JobStatus.PENDING, JobStatus.RUNNING]).order_by("created_at")[:10]
        ),
        "failed_imports": list(
            ImportJob.objects.filter(
                status=JobStatus.FAILED, finished_at__gte=timezone.now() - timezone.timedelta(days=7)
            ).order_by("-finished_at")[:5]
        )
        if is_staff(user)
        else [],
        "active_imports": list(
            ImportJob.objects.filter(status__in=[JobStatus.PENDING, JobStatus.RUNNING]).order_by("created_at")[:5]
        )
        if is_staff(user)
        else [],
    }
