"""The sentence-mining run end to end on a small real bilingual corpus, with the default pretrained encoder."""

from __future__ import annotations

import pytest

from mining.models import Corpus, JobStatus, MiningRun, RunKind, SentencePairCandidate
from mining.services.embeddings import embeddings_dir
from mining.services.runs import run_create, run_retry
from pcapp.jobs import execute_job
from tests.factories.mining import PAIRS, candidate_pairs, pairs_corpus


@pytest.mark.django_db
def test_sentence_run_finds_the_translations_and_stores_evidence():
    corpus = pairs_corpus()
    run = run_create(
        kind=RunKind.SENTENCE,
        src_corpus=corpus,
        src_lang="en",
        tgt_lang="fr",
        params={"k": 3, "filters": True},
        enqueue=False,
    )

    result = execute_job(run=run)

    run.refresh_from_db()
    assert run.status == JobStatus.SUCCEEDED, run.error
    assert result["candidates"] == len(PAIRS)
    assert set(run.timings) >= {"plan", "embed", "search", "score", "filter", "write", "finish"}
    assert run.progress == 1.0 and run.stats["shards"]["embed"] == 2
    cands = list(SentencePairCandidate.objects.filter(run=run).select_related("src", "tgt").order_by("rank"))
    assert [c.rank for c in cands] == list(range(1, len(PAIRS) + 1))
    assert all(cands[i].score >= cands[i + 1].score for i in range(len(cands) - 1))
    gold = dict(PAIRS)
    correct = sum(gold[c.src.text] == c.tgt.text for c in cands)
    assert correct >= len(PAIRS) - 1
    ev = cands[0].evidence
    assert {"cosine", "fwd_mean", "bwd_mean", "margin", "src_neighbours", "tgt_neighbours"} <= set(ev)
    assert len(ev["src_neighbours"]) == 3
    # no threshold asked for: the run says why it cannot estimate a default from so few pairs
    default = run.stats["default_threshold"]
    assert default["threshold"] is None and default["k"] == 3 and default["margin"] == "ratio"
    assert "passed the pre-filters" in default["reason"]
    from mining.core.hw import knn_path

    compute, device = knn_path()
    assert run.stats["knn"] == {"method": "exact", "compute": compute.value, "device": device.value}


@pytest.mark.django_db
def test_rerun_reuses_embedding_shards(monkeypatch):
    corpus = pairs_corpus("mini-rerun")
    run = run_create(kind=RunKind.SENTENCE, src_corpus=corpus, src_lang="en", tgt_lang="fr", enqueue=False)
    execute_job(run=run)
    run.refresh_from_db()
    shard = embeddings_dir(corpus, run.encoder, "en") / "shard-00000.npz"
    assert shard.exists()
    mtime = shard.stat().st_mtime_ns

    # A failed run re-run resumes: the embeddings on disk are reused, candidates are rewritten, not duplicated.
    from mining.models import MiningRun

    MiningRun.objects.filter(pk=run.pk).update(status=JobStatus.FAILED)
    run.refresh_from_db()
    run_retry(run=run)
    execute_job(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.SUCCEEDED
    assert shard.stat().st_mtime_ns == mtime
    assert SentencePairCandidate.objects.filter(run=run).count() == len(PAIRS)


@pytest.mark.django_db
def test_run_without_sentences_fails_with_a_clear_error():
    corpus = Corpus.objects.create(name="empty", languages=[])
    # refused at the start (check_run_start, in run_create for every entry point) ...
    with pytest.raises(
        ValueError, match="src_lang: Corpus empty has no 'en' text.; tgt_lang: Corpus empty has no 'fr'"
    ):
        run_create(kind=RunKind.SENTENCE, src_corpus=corpus, src_lang="en", tgt_lang="fr", enqueue=False)
    # ... and a run stored anyway fails clearly
    run = MiningRun.objects.create(
        kind=RunKind.SENTENCE, src_corpus=corpus, tgt_corpus=corpus, src_lang="en", tgt_lang="fr"
    )
    execute_job(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.FAILED
    assert "nothing to mine" in run.error


@pytest.mark.django_db
def test_a_run_that_failed_mid_search_resumes_its_done_shards_and_equals_an_uninterrupted_one(settings, monkeypatch):
    from mining.models import RunShard
    from mining.services.shards import stages

    settings.PCAPP_SHARD_ROWS = 5  # 3 shards a side
    corpus = pairs_corpus("mini-resume")
    whole = run_create(kind=RunKind.SENTENCE, src_corpus=corpus, src_lang="en", tgt_lang="fr", enqueue=False)
    execute_job(run=whole)

    search = stages.STAGE_FN["search"]

    def dies_on_shard_4(ctx, shard_no, shard_id):
        if shard_no == 4:
            raise RuntimeError("worker lost")
        return search(ctx, shard_no, shard_id)

    monkeypatch.setitem(stages.STAGE_FN, "search", dies_on_shard_4)
    run = run_create(kind=RunKind.SENTENCE, src_corpus=corpus, src_lang="en", tgt_lang="fr", enqueue=False)
    execute_job(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.FAILED and "worker lost" in run.error
    done = dict(RunShard.objects.filter(run=run, finished_at__isnull=False).values_list("id", "finished_at"))
    assert {s for (s,) in RunShard.objects.filter(pk__in=done).values_list("stage")} == {"plan", "embed", "search"}
    assert 0 < run.progress < 1

    monkeypatch.setitem(stages.STAGE_FN, "search", search)
    run_retry(run=run)
    execute_job(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.SUCCEEDED and run.progress == 1.0
    assert dict(RunShard.objects.filter(pk__in=done).values_list("id", "finished_at")) == done  # not done again
    assert candidate_pairs(run) == candidate_pairs(whole)


@pytest.mark.django_db
def test_ivf_run_over_index_shards_trains_one_quantizer(settings):
    settings.PCAPP_SHARD_ROWS = 5
    corpus = pairs_corpus("mini-ivf")
    run = run_create(
        kind=RunKind.SENTENCE,
        src_corpus=corpus,
        src_lang="en",
        tgt_lang="fr",
        params={"knn": "ivf", "nprobe": 4},
        enqueue=False,
    )
    execute_job(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.SUCCEEDED, run.error
    assert {k: run.stats["shards"][k] for k in ("embed", "train", "index", "search")} == {
        "embed": 6,
        "train": 1,
        "index": 6,
        "search": 6,
    }
    assert run.stats["candidates"] == len(PAIRS)
    assert run.stats["knn"] == {"method": "ivf", "compute": "fp32", "device": "cpu"}  # IVF lists are fp32 scans


@pytest.mark.django_db
def test_run_delete_frees_rows_and_files(staff_client):
    from mining.models import MiningRun, RunShard
    from mining.services.runs import run_delete
    from mining.services.shards import run_dir

    corpus = pairs_corpus("mini-delete")
    run = run_create(kind=RunKind.SENTENCE, src_corpus=corpus, src_lang="en", tgt_lang="fr", enqueue=False)
    execute_job(run=run)
    assert run_dir(run.pk).exists()
    running = MiningRun.objects.create(kind=RunKind.SENTENCE, status=JobStatus.RUNNING)
    answer = staff_client.delete(f"/api/runs/{running.pk}/")
    assert answer.status_code == 409 and "cancel it before deleting it" in answer.json()["detail"]

    counts = run_delete(run=run)
    assert counts["candidates"] == len(PAIRS) and counts["miningrun"] == 1 and counts["runshard"] >= 9
    assert not MiningRun.objects.filter(pk=run.pk).exists()
    assert not SentencePairCandidate.objects.filter(run_id=run.pk).exists()
    assert not RunShard.objects.filter(run_id=run.pk).exists()
    assert not run_dir(run.pk).exists()
