"""Document runs within sites on a crawl imported from a WARC built in the test: pages of each site matched with
pages of the same site, in shard tasks, in one process and on real workers; URL markers in the evidence."""

from __future__ import annotations

from pathlib import Path

import pytest

from mining.models import DocumentPairCandidate, JobStatus, MiningRun, RunKind, RunShard
from mining.services.imports import import_execute, import_job_create
from mining.services.runs import run_create
from pcapp.jobs import execute_job
from tests.conftest import wait_for
from tests.mining.importers.crawl_warc import Warc, admin_pages, page


def crawl_corpus(tmp_path: Path):
    """Two sites: docs.site-a.org marks languages in the path, www.site-b.net names pages at random."""
    w = Warc(tmp_path / "crawl.warc.gz")
    gold = {}
    for n, (en, fr) in enumerate(admin_pages()):
        if n < 4:
            src, tgt = f"https://docs.site-a.org/en/page{n}.html", f"https://docs.site-a.org/fr/page{n}.html"
        else:
            src, tgt = f"https://www.site-b.net/p/{n * 7919 % 1000}", f"https://www.site-b.net/p/{n * 104729 % 1000}"
        w.response(src, page(f"Page {n}", en))
        w.response(tgt, page(f"Page {n}", fr, nav="Accueil | Aide"))
        gold[src] = tgt
    job = import_execute(job=import_job_create(corpus_name="crawl", fmt="warc", paths=[str(w.close())]))
    assert job.status == JobStatus.SUCCEEDED, job.error
    return job.corpus, gold


def _pairs(run: MiningRun) -> dict[str, str]:
    rows = DocumentPairCandidate.objects.filter(run=run, filter_reason="").select_related("src", "tgt")
    return {p.src.url: p.tgt.url for p in rows}


@pytest.mark.django_db(transaction=True)
def test_a_crawl_is_matched_within_its_sites_by_default(tmp_path, settings):
    settings.PCAPP_SITE_SHARD_DOCS = 8  # one shard per site
    corpus, gold = crawl_corpus(tmp_path)
    run = run_create(kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr", enqueue=False)
    execute_job(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.SUCCEEDED, run.error
    assert _pairs(run) == gold
    assert (run.stats["site_scope"], run.stats["sites"], run.stats["site_shards"]) == ("site", 2, 2)
    assert run.stats["url_pairs"] == 4  # site A's four /en/ - /fr/ pairs
    shards = sorted(RunShard.objects.filter(run=run).values_list("stage", "shard_no"))
    assert shards == [("match", 0), ("match", 1), ("plan", 0), ("write", 0)]
    evidence = {p.src.url: p.evidence for p in DocumentPairCandidate.objects.filter(run=run).select_related("src")}
    assert evidence["https://docs.site-a.org/en/page0.html"]["url"] == {"signal": 1.0, "weight": 0.2}
    assert evidence["https://docs.site-a.org/en/page0.html"]["site"] == "site-a.org"
    assert evidence["https://www.site-b.net/p/676"]["url"]["signal"] == 0.0


@pytest.mark.django_db(transaction=True)
def test_site_scope_all_compares_every_page(tmp_path):
    corpus, gold = crawl_corpus(tmp_path)
    run = run_create(
        kind=RunKind.DOCUMENT,
        src_corpus=corpus,
        src_lang="en",
        tgt_lang="fr",
        params={"site_scope": "all", "url_weight": 0},
        enqueue=False,
    )
    execute_job(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.SUCCEEDED, run.error
    assert _pairs(run) == gold
    assert "site_scope" not in run.stats and not RunShard.objects.filter(run=run).exists()
    # each page's top 5 among all eight targets (and back): more than the four of its own site
    assert run.stats["candidates_retrieved"] >= 8 * 5


@pytest.mark.worker
def test_a_site_restricted_run_spreads_over_real_workers(celery_workers, tmp_path, settings):
    settings.PCAPP_SITE_SHARD_DOCS = 8
    corpus, gold = crawl_corpus(tmp_path)
    workers = celery_workers.start(2, PCAPP_SITE_SHARD_DOCS="8")
    run = run_create(kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr")
    assert wait_for(lambda: MiningRun.objects.get(pk=run.pk).is_finished, timeout=300), "the run did not finish"
    run.refresh_from_db()
    assert run.status == JobStatus.SUCCEEDED, run.error
    assert _pairs(run) == gold and run.stats["distributed"] is True
    done = RunShard.objects.filter(run=run, finished_at__isnull=False)
    assert sorted(done.values_list("stage", "shard_no")) == [("match", 0), ("match", 1), ("plan", 0), ("write", 0)]
    owners = set(done.values_list("lease_owner", flat=True))
    assert owners <= {celery_workers.owner(w) for w in workers}


@pytest.mark.django_db(transaction=True)
def test_a_sentence_run_mines_one_sites_pages_and_exports_carry_urls(tmp_path):
    import io
    import json

    import pyarrow.parquet as pq

    from mining.models import SentencePairCandidate
    from mining.services.export import ExportFormat, KeepMode, KeepRule, export_stream

    corpus, _ = crawl_corpus(tmp_path)
    run = run_create(
        kind=RunKind.SENTENCE,
        src_corpus=corpus,
        src_lang="en",
        tgt_lang="fr",
        params={"site": "site-a.org"},
        enqueue=False,
    )
    execute_job(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.SUCCEEDED, run.error
    pairs = SentencePairCandidate.objects.filter(run=run).select_related("src__document", "tgt__document")
    assert pairs.count() > 0
    assert {p.src.document.site for p in pairs} == {p.tgt.document.site for p in pairs} == {"site-a.org"}
    rule = KeepRule(mode=KeepMode.THRESHOLD, threshold=-1e9, include_filtered=True)
    records = [
        json.loads(line) for line in "".join(export_stream(run=run, rule=rule, fmt=ExportFormat.JSONL)).splitlines()
    ]
    assert all(r["src_url"].startswith("https://docs.site-a.org/en/") for r in records)
    assert all(r["tgt_url"].startswith("https://docs.site-a.org/fr/") for r in records)
    tmx = "".join(export_stream(run=run, rule=rule, fmt=ExportFormat.TMX))
    assert tmx.count('<prop type="x-src-url">https://docs.site-a.org/en/') == len(records)
    table = pq.read_table(io.BytesIO(b"".join(export_stream(run=run, rule=rule, fmt=ExportFormat.PARQUET))))
    assert table.num_rows == len(records)
    assert table.column("tgt_url").to_pylist() == [r["tgt_url"] for r in records]
    assert table.column("translation").to_pylist()[0] == {"en": records[0]["src"], "fr": records[0]["tgt"]}
