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

from mining.ingest.text import norm_hash
from mining.models import Artefact, ArtefactKind, Corpus, Document, JobStatus, MiningRun, RunKind, RunShard, Sentence
from mining.models import SentencePairCandidate as Cand
from mining.services.runs import run_create
from pcapp.jobs import execute_job
from tests.conftest import wait_for

pytestmark = pytest.mark.worker

DIM = 96
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()


class TableEncoder:
    """Looks each text's vector up in a table (rows L2-normalised)."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table

    def encode(self, texts: list[str], lang: str) -> np.ndarray:
        return np.stack([self.table[t] for t in texts]).astype(np.float32)


def _text(rng: np.random.Generator, i: int, lang: str) -> str:
    return f"{' '.join(rng.choice(WORDS, 5))} {lang} item {i}"


def _synthetic(n: int, register_encoder, *, seed: int = 0, name: str = "synthetic") -> tuple[Corpus, Artefact]:
    """n English and n French sentences; 70 % of them planted pairs (noisy copies), the rest unrelated."""
    rng = np.random.default_rng(seed)
    src = rng.standard_normal((n, DIM)).astype(np.float32)
    tgt = rng.standard_normal((n, DIM)).astype(np.float32)
    perm = rng.permutation(n)
    planted = perm[: int(0.7 * n)]
    tgt[planted] = src[np.arange(len(planted))] + 0.6 * rng.standard_normal((len(planted), DIM))
    src /= np.linalg.norm(src, axis=1, keepdims=True)
    tgt /= np.linalg.norm(tgt, axis=1, keepdims=True)
    corpus = Corpus.objects.create(name=name, languages=["en", "fr"])
    table: dict[str, np.ndarray] = {}
    rows = []
    for lang, emb in (("en", src), ("fr", tgt)):
        doc = Document.objects.create(corpus=corpus, lang=lang, external_id=f"doc-{lang}")
        for i in range(n):
            text = _text(rng, i, lang)
            table[text] = emb[i]
            rows.append(
                Sentence(
                    corpus=corpus,
                    document=doc,
                    lang=lang,
                    position=i,
                    text=text,
                    norm_hash=norm_hash(text),
                    detected_lang=lang,
                )
            )
    Sentence.objects.bulk_create(rows, batch_size=5000)
    encoder_name = f"table-{name}"
    register_encoder(encoder_name, lambda threads=1, **_: TableEncoder(table))
    artefact = Artefact.objects.create(kind=ArtefactKind.ENCODER, name=encoder_name, version=1, params={})
    return corpus, artefact


def _run(corpus: Corpus, encoder: Artefact, *, enqueue: bool, **params) -> MiningRun:
    return run_create(
        kind=RunKind.SENTENCE,
        src_corpus=corpus,
        src_lang="en",
        tgt_lang="fr",
        encoder=encoder,
        params={"k": 4, **params},
        enqueue=enqueue,
    )


def _inline(corpus: Corpus, encoder: Artefact, **params) -> MiningRun:
    run = _run(corpus, encoder, enqueue=False, **params)
    execute_job(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.SUCCEEDED, run.error
    return run


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
    assert wait_for(lambda: MiningRun.objects.get(pk=run.pk).is_finished, timeout=timeout), _state(run)
    run.refresh_from_db()
    return run


def _state(run: MiningRun) -> str:
    run.refresh_from_db()
    return f"run {run.pk} {run.status} stage={run.stage} error={run.error!r}"


def test_workers_give_the_single_process_candidates_and_survive_a_kill(
    celery_workers, settings, register_encoder, staff_user
):
    settings.PCAPP_SHARD_ROWS = 7000  # 3 query shards and 3 index shards a side
    corpus, encoder = _synthetic(20000, register_encoder)
    settings.PCAPP_SHARD_ROWS = 10**6
    one_index = _inline(corpus, encoder)  # the target in one index (and the cache at that layout)
    settings.PCAPP_SHARD_ROWS = 7000
    ref = _inline(corpus, encoder)  # three index shards, in this process; refills the cache for the workers
    assert ref.stats["shards"]["search"] == 6 and one_index.stats["shards"]["search"] == 2
    _assert_same(ref, one_index, same_order=False)  # exact search over index shards equals one index

    workers = celery_workers.start(3)
    api = APIClient()
    api.force_authenticate(staff_user)
    run = _run(corpus, encoder, enqueue=True)
    seen: list[float] = []
    while not MiningRun.objects.get(pk=run.pk).is_finished:
        body = api.get(f"/api/runs/{run.pk}/").json()
        seen.append(float(body["progress"]))
        time.sleep(0.1)
        assert len(seen) < 1500, _state(run)
    run.refresh_from_db()
    assert run.status == JobStatus.SUCCEEDED, run.error
    seen.append(run.progress)
    assert seen == sorted(seen) and seen[0] < 0.5 and seen[-1] == 1.0  # monotonic, from early on to 100 %
    assert len(set(seen)) >= 4
    _assert_same(run, ref)
    owners = set(RunShard.objects.filter(run=run, stage="search").values_list("lease_owner", flat=True))
    assert len(owners) >= 2  # the search was shared

    # kill -9 the worker holding a search shard: the others take it over when its lease expires
    run2 = _run(corpus, encoder, enqueue=True)
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

    assert wait_for(holder, timeout=90, interval=0.02), _state(run2)
    celery_workers.kill(victim)
    run2 = _wait_finished(run2)
    assert run2.status == JobStatus.SUCCEEDED, run2.error
    _assert_same(run2, ref)
    assert RunShard.objects.filter(run=run2, finished_at__isnull=True).count() == 0


def test_a_run_whose_only_worker_died_stalls_and_retry_resumes_its_done_shards(
    celery_workers, settings, register_encoder, staff_user
):
    settings.PCAPP_SHARD_ROWS = 700
    corpus, encoder = _synthetic(2000, register_encoder, seed=1, name="lonely")
    ref = _inline(corpus, encoder)
    (worker,) = celery_workers.start(1)
    run = _run(corpus, encoder, enqueue=True)
    assert wait_for(
        lambda: RunShard.objects.filter(run=run, stage="search", finished_at__isnull=False).exists(),
        timeout=90,
        interval=0.02,
    ), _state(run)
    celery_workers.kill(worker)
    done_before = dict(RunShard.objects.filter(run=run, finished_at__isnull=False).values_list("id", "finished_at"))
    # nobody renews the lease: within the lease time (4 s) the run shows as stalled and may be retried
    assert wait_for(lambda: MiningRun.objects.get(pk=run.pk).is_stalled, timeout=20), _state(run)
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
    corpus, encoder = _synthetic(50, register_encoder, name="nobroker")
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
    corpus, encoder = _synthetic(2000, register_encoder, seed=2, name="cancelled")
    _inline(corpus, encoder)  # fills the embedding cache the worker reads
    celery_workers.start(1)
    run = _run(corpus, encoder, enqueue=True)
    assert wait_for(
        lambda: RunShard.objects.filter(run=run, stage="search", finished_at__isnull=False).exists(),
        timeout=90,
        interval=0.02,
    ), _state(run)

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
