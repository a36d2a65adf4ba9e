"""Exact search in a sharded run makes each similarity tile once: the forward search shards leave the target shards'
lists, the backward shards merge them (or search by themselves when a part is missing); the candidates are those of a
run with one shard a side."""

from __future__ import annotations

import numpy as np
import pytest

from mining.models import RunKind, RunShard
from mining.services.runs import run_create
from mining.services.shards import stages
from mining.services.shards.plan import load_npz, run_dir
from pcapp.jobs import execute_job
from tests.factories.mining import candidate_pairs, pairs_corpus


def _run(corpus):
    run = run_create(kind=RunKind.SENTENCE, src_corpus=corpus, src_lang="en", tgt_lang="fr", enqueue=False)
    execute_job(run=run)
    run.refresh_from_db()
    return run


def _search_results(run) -> dict[int, dict]:
    return dict(RunShard.objects.filter(run=run, stage="search").values_list("shard_no", "result"))


@pytest.mark.django_db
def test_backward_shards_merge_the_forward_shards_tiles_and_equal_one_shard(settings):
    corpus = pairs_corpus("shared-pass")
    settings.PCAPP_SHARD_ROWS = 10**6
    whole = _run(corpus)
    settings.PCAPP_SHARD_ROWS = 5  # 3 shards a side
    sharded = _run(corpus)
    assert sharded.stats["knn"]["method"] == "exact"
    results = _search_results(sharded)
    assert [results[n].get("shared_pass", False) for n in range(6)] == [False] * 3 + [True] * 3
    assert all(results[n]["index_shards"] == 3 for n in range(3))
    # The same pairs in the same order. The scores agree to 1e-5, not exactly: the two runs embed in different
    # batches (5 sentences or all), and an fp32 encoder's matrix products round differently with the batch's shape
    # (seen on a CPU without bf16 units: up to 6e-6 in a similarity).
    got, want = candidate_pairs(sharded), candidate_pairs(whole)
    assert [p[:2] for p in got] == [p[:2] for p in want]
    np.testing.assert_allclose([p[2] for p in got], [p[2] for p in want], rtol=1e-5)
    one = load_npz(run_dir(whole.pk) / "search" / "bwd-00000.npz")
    merged = [load_npz(run_dir(sharded.pk) / "search" / f"bwd-{j:05d}.npz") for j in range(3)]
    np.testing.assert_array_equal(np.concatenate([m["ids"] for m in merged]), one["ids"])
    np.testing.assert_allclose(np.concatenate([m["sims"] for m in merged]), one["sims"], atol=1e-5)


@pytest.mark.django_db
def test_a_backward_shard_missing_a_part_searches_by_itself(settings, monkeypatch):
    settings.PCAPP_SHARD_ROWS = 5
    corpus = pairs_corpus("shared-missing")
    reference = _run(corpus)
    search = stages.STAGE_FN["search"]

    def lose_a_part(ctx, shard_no, shard_id):
        out = search(ctx, shard_no, shard_id)
        if shard_no == 2:  # the last forward shard: drop what it left for target shard 1
            stages._bwd_part(ctx, 1, 2).unlink()
        return out

    monkeypatch.setitem(stages.STAGE_FN, "search", lose_a_part)
    run = _run(corpus)
    results = _search_results(run)
    assert [results[n].get("shared_pass", False) for n in range(3, 6)] == [True, False, True]
    assert results[4]["index_shards"] == 3
    assert candidate_pairs(run) == candidate_pairs(reference)
