"""A compressed (IVF-PQ) sentence run on real `celery worker` processes: its search shards go to the worker that
holds their index group (`--holds`: the queue `<search>.g<g>`), the run equals the exact run within the stated
recall, and when the holder is killed with -9 its searches move to the other worker (lease, then the shared queue).
"""

from __future__ import annotations

import pytest

from mining.models import JobStatus, MiningRun, RunShard
from pcapp.queues import group_queue
from tests.conftest import wait_for
from tests.factories.mining import inline_sentence_run as _inline
from tests.factories.mining import run_state as _state
from tests.factories.mining import sentence_run as _run
from tests.factories.mining import synthetic_corpus as _synthetic
from tests.faults.test_worker_faults import _assert_same, _wait_finished
from tests.mining.services.test_pq_runs import PQ_MISS, compare_with_exact

pytestmark = pytest.mark.worker

PQ_ENV = {"PCAPP_PQ_GROUPS": "2", "PCAPP_PQ_BYTES": "16"}


def _group_owners(run: MiningRun, g: int) -> set[str]:
    rows = RunShard.objects.filter(run=run, stage="search").values_list("result", "lease_owner")
    return {owner for result, owner in rows if result.get("group") == g}


def test_search_goes_to_the_holder_and_moves_when_it_dies(celery_workers, settings, register_encoder):
    settings.PCAPP_SHARD_ROWS = 1500
    settings.PCAPP_PQ_GROUPS, settings.PCAPP_PQ_BYTES = 2, 16
    corpus, encoder = _synthetic(4000, register_encoder, name="pq-workers")
    exact = _inline(corpus, encoder)
    ref = _inline(corpus, encoder, knn="ivf", index="pq")  # in this process; fills the embedding cache
    (plain,) = celery_workers.start(1, **PQ_ENV)
    search = celery_workers.env["PCAPP_QUEUE_SEARCH"]
    celery_workers.queues.append(group_queue(0, {"PCAPP_QUEUE_SEARCH": search}))
    (holder,) = celery_workers.start(1, **PQ_ENV)  # holds group 0 of each side
    celery_workers.queues.pop()

    run = _wait_finished(_run(corpus, encoder, enqueue=True, knn="ivf", index="pq"), timeout=180)
    assert run.status == JobStatus.SUCCEEDED, run.error
    assert run.stats["knn"]["method"] == "ivf-pq"
    assert _group_owners(run, 0) == {celery_workers.owner(holder)}  # every group-0 search ran on its holder
    _assert_same(run, ref)  # the same candidates as in one process
    assert compare_with_exact(run, exact) >= 1 - PQ_MISS

    # kill -9 the holder while it searches group 0: its searches move to the other worker
    run2 = _run(corpus, encoder, enqueue=True, knn="ivf", index="pq")
    owner = celery_workers.owner(holder)
    assert wait_for(
        lambda: RunShard.objects.filter(run=run2, stage="search", finished_at__isnull=True, lease_owner=owner).exists(),
        timeout=120,
        interval=0.02,
    ), _state(run2)
    celery_workers.kill(holder)
    run2 = _wait_finished(run2, timeout=180)
    assert run2.status == JobStatus.SUCCEEDED, run2.error
    _assert_same(run2, ref)
    assert celery_workers.owner(plain) in _group_owners(run2, 0)  # group 0's searches were done elsewhere
    assert RunShard.objects.filter(run=run2, finished_at__isnull=True).count() == 0
