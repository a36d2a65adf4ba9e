"""One state machine for every job (mining.services.jobs.TRANSITIONS): each status change is one conditional UPDATE,
so cancel, retry, finish and delete in any order leave one consistent state.

The table test checks every (status, action) pair against the documented life cycle. The race test hammers cancel,
retry and delete through the API in a seeded random order at three runs executed by a real Celery worker, then
settles: every run left must finish (retried until it succeeds) with the candidates of an uninterrupted run, none
may stay running with all its shards done, every delete answers 200 in the end (never 409 for ever), and no
run-N folder outlives its row.
"""

from __future__ import annotations

import random
import time
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone
from rest_framework.test import APIClient

from mining.models import JobStatus, MiningRun, RunKind, RunShard
from mining.models import SentencePairCandidate as Cand
from mining.services.jobs import TRANSITIONS, job_may, job_transition
from mining.services.shards import current_stage, run_dir
from mining.services.shards.rows import run_rows
from tests.conftest import wait_for
from tests.factories.mining import inline_sentence_run, run_state, sentence_run, synthetic_corpus

P, R, S, F, C = JobStatus.PENDING, JobStatus.RUNNING, JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED
# action -> the statuses it may leave ("stalled": running with an expired lease; "unsent": pending, never sent)
ALLOWED = {
    "start": {P, "stalled", "unsent"},
    "finish": {R, "stalled"},
    "fail": {P, R, "stalled", "unsent"},
    "cancel": {P, R, "stalled", "unsent"},
    "reap": {"stalled"},
    "retry": {F, C, "stalled", "unsent"},
    "delete": {P, S, F, C, "stalled", "unsent"},
}


def _job(state: str) -> MiningRun:
    now = timezone.now()
    fields: dict = {"status": state}
    if state == "stalled":
        fields = {"status": R, "lease_expires_at": now - timedelta(seconds=1)}
    elif state == R:
        fields["lease_expires_at"] = now + timedelta(minutes=5)
    elif state == "unsent":
        fields = {"status": P, "queued_at": now - timedelta(hours=1)}
    elif state == P:
        fields["queued_at"] = now
    return MiningRun.objects.create(kind=RunKind.SENTENCE, **fields)


@pytest.mark.django_db
def test_every_status_change_follows_the_transition_table() -> None:
    states = [P, R, S, F, C, "stalled", "unsent"]
    for action, transition in TRANSITIONS.items():
        for state in states:
            job = _job(state)
            if transition.target is None:
                got = job_may(job, action)
            else:
                got = job_transition(MiningRun, job.pk, action)
                job.refresh_from_db()
                assert job.status == (transition.target if got else _job_status(state)), (action, state)
            assert got == (state in ALLOWED[action]), (action, state)


def _job_status(state: str) -> str:
    return {"stalled": R, "unsent": P}.get(state, state)


def _live_folders() -> set[int]:
    root = django_settings.PCAPP_DATA_DIR / "runs"
    return {int(p.name[4:]) for p in root.glob("run-*")} if root.is_dir() else set()


def test_cancel_retry_and_delete_in_any_order_leave_one_consistent_state(
    celery_workers, settings, register_encoder, staff_user
):
    settings.PCAPP_SHARD_ROWS = 400
    settings.PCAPP_CANDIDATE_CHUNK_ROWS = 300
    corpus, encoder = synthetic_corpus(1200, register_encoder, seed=5, name="races")
    ref = inline_sentence_run(corpus, encoder)  # fills the embedding cache the worker reads
    want = set(Cand.objects.filter(run=ref).values_list("src_id", "tgt_id"))
    celery_workers.start(2)
    api = APIClient()
    api.force_authenticate(staff_user)
    runs = [sentence_run(corpus, encoder, enqueue=True).pk for _ in range(3)]
    rng = random.Random(30)
    answers: dict[str, set[int]] = {"cancel": set(), "retry": set(), "delete": set()}
    deleted: set[int] = set()
    deadline = time.monotonic() + 25
    while time.monotonic() < deadline:
        pk = rng.choice(runs)
        action = rng.choices(["cancel", "retry", "delete"], weights=[5, 5, 1])[0]
        if action == "delete":
            answer = api.delete(f"/api/runs/{pk}/")
            if answer.status_code == 200:
                deleted.add(pk)
                runs.remove(pk)
                if not runs:
                    break
        else:
            answer = api.post(f"/api/runs/{pk}/{action}/")
        answers[action].add(answer.status_code)
        time.sleep(rng.uniform(0, 0.4))
    assert answers["cancel"] <= {200, 409} and answers["retry"] <= {200, 409}, answers
    assert answers["delete"] <= {200, 409, 404}, answers

    def settled(pk: int) -> bool:
        run = MiningRun.objects.get(pk=pk)
        if run.status in (F, C):
            assert api.post(f"/api/runs/{pk}/retry/").status_code == 200
            return False
        if run.status == R and current_stage(run_rows(pk)) is None:
            return False  # every shard done: the keeper must finish it (checked below by the timeout)
        return run.status == S

    for pk in runs:
        assert wait_for(lambda pk=pk: settled(pk), timeout=180, interval=0.5), run_state(MiningRun.objects.get(pk=pk))
        got = set(Cand.objects.filter(run_id=pk).values_list("src_id", "tgt_id"))
        assert got == want and Cand.objects.filter(run_id=pk).count() == len(want)
        assert not RunShard.objects.filter(run_id=pk, finished_at__isnull=True).exists()
    # nothing is left running with every shard done, and every delete now succeeds
    for pk in list(runs):
        answer = api.delete(f"/api/runs/{pk}/")
        assert answer.status_code == 200, answer.content
        deleted.add(pk)
    assert not MiningRun.objects.filter(pk__in=deleted).exists()
    # no folder outlives its run (a shard that wrote after the deletion removes what it wrote)
    assert wait_for(lambda: not (_live_folders() & deleted), timeout=60), sorted(_live_folders() & deleted)
    assert not any(run_dir(pk).exists() for pk in deleted)
