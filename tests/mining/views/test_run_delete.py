"""A run is deleted from its page (staff, with a ticked box) or the command line, with its candidates; a running
run is refused until it is cancelled."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from mining.models import JobStatus, MiningRun, SentencePairCandidate
from tests.factories.mining import make_run

pytestmark = pytest.mark.django_db


def test_the_run_page_deletes_a_finished_run_once_confirmed(staff_client) -> None:
    run = make_run(4, status=JobStatus.SUCCEEDED)
    page = staff_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert 'id="delete-run"' in page
    staff_client.post(reverse("run-delete", args=[run.pk]))  # no confirmation: nothing happens
    assert SentencePairCandidate.objects.filter(run=run).count() == 4
    response = staff_client.post(reverse("run-delete", args=[run.pk]), {"confirm": "yes"})
    assert response.status_code == 302 and response["Location"] == reverse("run-list")
    assert not MiningRun.objects.filter(pk=run.pk).exists()
    assert not SentencePairCandidate.objects.filter(run_id=run.pk).exists()


def test_a_running_run_is_not_deleted_and_reviewers_cannot_delete(staff_client, reviewer_client) -> None:
    running = make_run(2, status=JobStatus.RUNNING)
    staff_client.post(reverse("run-delete", args=[running.pk]), {"confirm": "yes"})
    assert MiningRun.objects.filter(pk=running.pk).exists()
    with pytest.raises(CommandError, match=f"run {running.pk} is running: cancel it before deleting it"):
        call_command("delete_run", str(running.pk))
    done = make_run(2, status=JobStatus.FAILED)
    assert reviewer_client.post(reverse("run-delete", args=[done.pk]), {"confirm": "yes"}).status_code == 403
    call_command("delete_run", str(done.pk))
    assert not MiningRun.objects.filter(pk=done.pk).exists()
