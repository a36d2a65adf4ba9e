"""With 1,000,000 candidates in the database the list views issue the same number of queries as with a handful (rows
are generated inside Postgres: 1000 x 1000 sentence pairs). Their times are measured by bench/results_latency.py,
not asserted here."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from mining.models import SentencePairCandidate
from tests.factories.mining import DocumentFactory, MiningRunFactory, SentenceFactory, make_run

pytestmark = pytest.mark.django_db

SIDE = 1000  # SIDE**2 candidates


@pytest.fixture
def million_run():
    run = MiningRunFactory(params={"threshold": 1.05})
    docs = {lang: DocumentFactory(corpus=run.src_corpus, lang=lang) for lang in ("en", "fr")}
    for lang in ("en", "fr"):
        SentenceFactory.create_batch(SIDE, document=docs[lang])
    table = SentencePairCandidate._meta.db_table
    with connection.cursor() as cur:
        cur.execute(
            f"""INSERT INTO {table} (run_id, src_id, tgt_id, cosine, score, rank, strategy, filter_reason, evidence)
                SELECT %s, s.id, t.id, 0.5, 2.0 - (row_number() OVER ()) * 1e-6, row_number() OVER (), 'max_score',
                       CASE WHEN (s.id + t.id) %% 7 = 0 THEN 'too_short' ELSE '' END, '{{}}'::jsonb
                FROM (SELECT id FROM mining_sentence WHERE document_id = %s) s
                CROSS JOIN (SELECT id FROM mining_sentence WHERE document_id = %s) t""",
            [run.pk, docs["en"].pk, docs["fr"].pk],
        )
        cur.execute(f"ANALYZE {table}")
    return run


def _queries(client, url, params=None) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, params or {})
    assert response.status_code == 200
    return len(ctx)


@pytest.mark.slow
def test_query_counts_flat_with_a_million_candidates(staff_client, million_run):
    small = make_run(3)
    assert SentencePairCandidate.objects.filter(run=million_run).count() == SIDE * SIDE
    for params in ({}, {"min_score": "1.5", "filter_reason": "none"}, {"label": "unlabelled"}, {"after": "500000"}):
        n_small = _queries(staff_client, reverse("run-results", args=[small.pk]), params)
        n_big = _queries(staff_client, reverse("run-results", args=[million_run.pk]), params)
        assert n_small == n_big, params
    n_small = _queries(staff_client, f"/api/runs/{small.pk}/candidates/")
    n_big = _queries(staff_client, f"/api/runs/{million_run.pk}/candidates/")
    assert n_small == n_big
    n_small = _queries(staff_client, reverse("dashboard"))
    assert n_small <= 10  # fixed: corpora, runs, failures, active runs and imports, campaigns, session and user
