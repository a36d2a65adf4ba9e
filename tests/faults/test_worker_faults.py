"""A sentence run as shard tasks on real `celery worker` processes: several workers give the single-process
candidates, a worker killed with -9 in the middle of the search leaves nothing stranded or duplicated, a run whose
only worker died shows as stalled and resumes its done shards on retry, a broker that is down gives a clear 503.

The sides are synthetic (20k x 20k in the equivalence test): planted pairs with noise, encoded by a table encoder
registered in this process. The in-process reference run fills the embedding cache, which the workers (that cannot
see the test's encoder) reuse.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from rest_framework.test import APIClient

from mining.models import JobStatus, MiningRun, RunShard
from mining.models import SentencePairCandidate as Cand
from tests.conftest import wait_for
from tests.factories.mining import inline_sentence_run, run_state, sentence_run, synthetic_corpus

pytestmark = pytest.mark.worker


def _candidates(run: MiningRun) -> list[tuple[int, int, int, str]]:
    return list(Cand.objects.filter(run=run).order_by("rank").values_list("rank", "src_id", "tgt_id", "filter_reason"))


def _scores(run: MiningRun) -> np.ndarray:
    return np.array(list(Cand.objects.filter(run=run).order_by("rank").values_list("score", "cosine")))


def _assert_same(run: MiningRun, ref: MiningRun, *, same_order: bool = True) -> None:
    """The same pairs with the same filter verdicts and scores (to 1e-6), no duplicate rows; with `same_order`
    also the same ranks (ties between pairs whose scores differ by float rounding may swap otherwise)."""
    got, want = _candidates(run), _candidates(ref)
    assert len(got) == len(want) > 0
    assert len({(g[1], g[2]) for g in got}) == len(got)  # no duplicate rows
    if same_order:
        assert [g[1:] for g in got] == [w[1:] for w in want]
        assert np.abs(_scores(run) - _scores(ref)).max() <= 1e-6
    else:
        scored = {(r[1], r[2]): (r[3], s) for r, s in zip(got, _scores(run)[:, 0], strict=True)}
        wanted = {(r[1], r[2]): (r[3], s) for r, s in zip(want, _scores(ref)[:, 0], strict=True)}
        assert scored.keys() == wanted.keys()
        assert all(scored[p][0] == wanted[p][0] and abs(scored[p][1] - wanted[p][1]) <= 1e-6 for p in scored)


def _wait_finished(run: MiningRun, timeout: float = 90) -> MiningRun:
    assert wait_for(lambda: MiningRun.objects.get(pk=run.pk).is_finished, timeout=timeout), run_state(run)
    run.refresh_from_db()
    return run


def test_workers_give_the_single_process_candidates_and_survive_a_kill(
    celery_workers, settings, register_encoder, staff_user
):
    settings.PCAPP_SHARD_ROWS = 7000  # 3 query shards and 3 index shards a side
    corpus, encoder = synthetic_corpus(20000, register_encoder)
    settings.PCAPP_SHARD_ROWS = 10**6
    one_index = inline_sentence_run(corpus, encoder)  # the target in one index (and the cache at that layout)
    settings.PCAPP_SHARD_ROWS = 7000
    ref = inline_sentence_run(corpus, encoder)  # three index shards, in this process; refills the cache for the workers
    assert ref.stats["shards"]["search"] == 6 and one_index.stats["shards"]["search"] == 2
    _assert_same(ref, one_index, same_order=False)  # exact search over index shards equals one index

    workers = celery_workers.start(3)
    api = APIClient()
    api.force_authenticate(staff_user)
    run = sentence_run(corpus, encoder, enqueue=True)
    seen: list[float] = []
    while not MiningRun.objects.get(pk=run.pk).is_finished:
        body = api.get(f"/api/runs/{run.pk}/").json()
        seen.append(float(body["progress"]))
        time.sleep(0.1)
        assert len(seen) < 1500, run_state(run)
    run.refresh_from_db()
    assert run.status == JobStatus.SUCCEEDED, run.error
    seen.append(run.progress)
    assert seen == sorted(seen) and seen[0] < 0.5 and seen[-1] == 1.0  # monotonic, from early on to 100 %
    assert len(set(seen)) >= 4
    _assert_same(run, ref)
    owners = set(RunShard.objects.filter(run=run, stage="search").values_list("lease_owner", flat=True))
    assert len(owners) >= 2  # the search was shared

    # kill -9 the worker holding a search shard: the others take it over when its lease expires
    run2 = sentence_run(corpus, encoder, enqueue=True)
    by_owner = {celery_workers.owner(p): p for p in workers}
    victim = None

    def holder() -> bool:
        nonlocal victim
        row = (
            RunShard.objects.filter(run=run2, stage="search", finished_at__isnull=True)
            .exclude(lease_owner="")
            .values_list("lease_owner", flat=True)
            .first()
        )
        victim = by_owner.get(row) if row else None
        return victim is not None

    assert wait_for(holder, timeout=90, interval=0.02), run_state(run2)
    celery_workers.kill(victim)
    run2 = _wait_finished(run2)
    assert run2.status == JobStatus.SUCCEEDED, run2.error
    _assert_same(run2, ref)
    assert RunShard.objects.filter(run=run2, finished_at__isnull=True).count() == 0


def test_a_run_whose_only_worker_died_stalls_and_retry_resumes_its_done_shards(
    celery_workers, settings, register_encoder, staff_user
):
    settings.PCAPP_SHARD_ROWS = 700
    corpus, encoder = synthetic_corpus(2000, register_encoder, seed=1, name="lonely")
    ref = inline_sentence_run(corpus, encoder)
    (worker,) = celery_workers.start(1)
    run = sentence_run(corpus, encoder, enqueue=True)
    assert wait_for(
        lambda: RunShard.objects.filter(run=run, stage="search", finished_at__isnull=False).exists(),
        timeout=90,
        interval=0.02,
    ), run_state(run)
    celery_workers.kill(worker)
    done_before = dict(RunShard.objects.filter(run=run, finished_at__isnull=False).values_list("id", "finished_at"))
    # nobody renews the lease: within the lease time (4 s) the run shows as stalled and may be retried
    assert wait_for(lambda: MiningRun.objects.get(pk=run.pk).is_stalled, timeout=20), run_state(run)
    run.refresh_from_db()
    assert run.can_retry and run.status == JobStatus.RUNNING

    api = APIClient()
    api.force_authenticate(staff_user)
    answer = api.post(f"/api/runs/{run.pk}/retry/")
    assert answer.status_code == 200, answer.content
    celery_workers.start(1)
    run = _wait_finished(run)
    assert run.status == JobStatus.SUCCEEDED, run.error
    _assert_same(run, ref)
    # the shards done before the kill were not done again
    after = dict(RunShard.objects.filter(pk__in=done_before).values_list("id", "finished_at"))
    assert after == done_before and len(done_before) >= 8


def test_broker_down_at_creation_answers_503_and_leaves_nothing_pending(
    transactional_db, settings, staff_user, register_encoder, broker_down
):
    corpus, encoder = synthetic_corpus(50, register_encoder, name="nobroker")
    api = APIClient()
    api.force_authenticate(staff_user)
    answer = api.post(
        "/api/runs/",
        {"kind": "sentence", "src_corpus": corpus.pk, "src_lang": "en", "tgt_lang": "fr", "encoder": encoder.pk},
        format="json",
    )
    assert answer.status_code == 503, answer.content
    assert "task broker (redis://127.0.0.1:1/0) could not be reached" in answer.json()["detail"]
    run = MiningRun.objects.get()
    assert run.status == JobStatus.FAILED and "Retry it once the broker is back" in run.error
    assert not MiningRun.objects.filter(status=JobStatus.PENDING).exists()


def test_cancelling_a_run_on_a_worker_shows_at_once_and_its_shards_stop(
    celery_workers, settings, register_encoder, staff_user
):
    settings.PCAPP_SHARD_ROWS = 500
    corpus, encoder = synthetic_corpus(2000, register_encoder, seed=2, name="cancelled")
    inline_sentence_run(corpus, encoder)  # fills the embedding cache the worker reads
    celery_workers.start(1)
    run = sentence_run(corpus, encoder, enqueue=True)
    assert wait_for(
        lambda: RunShard.objects.filter(run=run, stage="search", finished_at__isnull=False).exists(),
        timeout=90,
        interval=0.02,
    ), run_state(run)

    api = APIClient()
    api.force_authenticate(staff_user)
    answer = api.post(f"/api/runs/{run.pk}/cancel/")
    assert answer.status_code == 200 and answer.json()["status"] == JobStatus.CANCELLED
    run.refresh_from_db()
    cancelled_at, written = run.finished_at, Cand.objects.filter(run=run).count()
    api.force_login(staff_user)
    page = api.get(f"/runs/{run.pk}/progress/", HTTP_HX_REQUEST="true").content.decode()
    assert 'data-status="cancelled"' in page and "every 1s" not in page

    # the shard in hand (or one taken just as the cancel came) stops at its next check and lets go of its lease
    assert wait_for(
        lambda: not RunShard.objects.filter(run=run, finished_at__isnull=True, lease_owner__gt="").exists(),
        timeout=30,
    ), list(RunShard.objects.filter(run=run, finished_at__isnull=True).values("stage", "shard_no", "lease_owner"))
    run.refresh_from_db()
    assert (run.status, run.finished_at) == (JobStatus.CANCELLED, cancelled_at)
    assert not RunShard.objects.filter(run=run, stage="write", finished_at__gt=cancelled_at).exists()
    assert Cand.objects.filter(run=run).count() == written
