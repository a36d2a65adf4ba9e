"""Deleting a corpus in ordered batches (mining.services.corpora.corpus_delete): everything built on the corpus goes,
nothing of another corpus does, a deletion stopped half-way leaves the corpus marked and finishes when asked again,
and nothing may start on a corpus being deleted. (How long it takes at scale: bench/run_delete.py --corpus.)"""

from __future__ import annotations

import pytest
from django.db import connection

from annotation.models import Campaign, CampaignItem, Label
from mining.models import (
    Corpus,
    Document,
    DocumentPairCandidate,
    GoldDocumentPair,
    GoldSentencePair,
    JobStatus,
    MiningRun,
    RunKind,
    RunShard,
    Sentence,
    SentencePairCandidate,
)
from mining.services import corpora
from mining.services.corpora import corpus_delete
from mining.services.runs import check_run_start
from tests.factories.annotation import LabelFactory
from tests.factories.mining import make_run

pytestmark = pytest.mark.django_db


def _built(n: int) -> tuple[MiningRun, Corpus]:
    """A succeeded run of n candidates on its own corpus, with gold pairs, a document run, shard rows, a label and a
    campaign item that names two of the corpus's sentences (the rows that point at a corpus from other tables)."""
    run = make_run(n, status=JobStatus.SUCCEEDED)
    corpus = run.src_corpus
    MiningRun.objects.filter(pk=run.pk).update(tgt_corpus=corpus)
    for sentence in Sentence.objects.filter(document__corpus=run.tgt_corpus):  # one corpus holds both sides
        Sentence.objects.filter(pk=sentence.pk).update(corpus=corpus)
    Document.objects.filter(pk__in=Sentence.objects.filter(corpus=corpus).values("document")).update(corpus=corpus)
    pairs = list(SentencePairCandidate.objects.filter(run=run).order_by("rank"))
    GoldSentencePair.objects.bulk_create(GoldSentencePair(corpus=corpus, src=c.src, tgt=c.tgt) for c in pairs)
    docs = list(Document.objects.filter(corpus=corpus).order_by("pk")[:2])
    GoldDocumentPair.objects.create(corpus=corpus, src=docs[0], tgt=docs[1])
    doc_run = MiningRun.objects.create(
        kind=RunKind.DOCUMENT, src_corpus=corpus, tgt_corpus=corpus, status=JobStatus.SUCCEEDED
    )
    DocumentPairCandidate.objects.create(run=doc_run, src=docs[0], tgt=docs[1], cosine=0.5, score=1.0, rank=1)
    RunShard.objects.create(run=run, stage="plan", shard_no=0)
    LabelFactory(sentence_pair=pairs[0])
    campaign = Campaign.objects.create(name=f"c{run.pk}")
    CampaignItem.objects.create(campaign=campaign, run=run, position=0, src=pairs[1].src, tgt=pairs[1].tgt)
    return run, Corpus.objects.get(pk=corpus.pk)


def _rows(corpus_id: int) -> dict[str, int]:
    return {
        "sentences": Sentence.objects.filter(corpus_id=corpus_id).count(),
        "documents": Document.objects.filter(corpus_id=corpus_id).count(),
        "gold": GoldSentencePair.objects.filter(corpus_id=corpus_id).count(),
        "runs": MiningRun.objects.filter(src_corpus_id=corpus_id).count(),
    }


def test_corpus_delete_in_batches_removes_its_rows_only_and_what_points_at_them() -> None:
    run, corpus = _built(7)
    other, other_corpus = _built(3)
    kept = _rows(other_corpus.pk)
    kept_cands = SentencePairCandidate.objects.filter(run=other).count()

    removed = corpus_delete(corpus=corpus, batch=2)  # every table takes several batches

    assert removed.runs == 2 and removed.sentence_candidates == 7 and removed.document_candidates == 1
    assert not Corpus.objects.filter(pk=corpus.pk).exists()
    assert _rows(corpus.pk) == {"sentences": 0, "documents": 0, "gold": 0, "runs": 0}
    assert not SentencePairCandidate.objects.filter(run_id=run.pk).exists()
    assert not DocumentPairCandidate.objects.filter(run__src_corpus_id=corpus.pk).exists()
    assert not RunShard.objects.filter(run_id=run.pk).exists()
    assert not GoldDocumentPair.objects.filter(corpus_id=corpus.pk).exists()
    assert not CampaignItem.objects.filter(run_id=run.pk).exists()
    assert not Label.objects.filter(sentence_pair__run_id=run.pk).exists()
    # the other corpus is whole
    assert _rows(other_corpus.pk) == kept and SentencePairCandidate.objects.filter(run=other).count() == kept_cands
    assert Label.objects.filter(sentence_pair__run=other).count() == 1
    assert CampaignItem.objects.filter(run=other).count() == 1
    with connection.cursor() as cur:  # the deferred checks hold
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")


def test_a_deletion_stopped_half_way_leaves_the_corpus_marked_and_finishes_when_asked_again(monkeypatch) -> None:
    run, corpus = _built(5)

    def crash(*args, **kwargs):
        raise ConnectionError("the database went away")

    real = corpora._referrers_delete
    monkeypatch.setattr(corpora, "_referrers_delete", crash)  # after the runs went, before the sentences
    with pytest.raises(ConnectionError):
        corpus_delete(corpus=corpus, batch=2)
    corpus.refresh_from_db()
    assert corpus.deleting and not MiningRun.objects.filter(pk=run.pk).exists()
    assert Sentence.objects.filter(corpus=corpus).count() == 10
    errors = check_run_start(
        kind=RunKind.SENTENCE, src_corpus=corpus, tgt_corpus=corpus, src_lang="en", tgt_lang="fr", parent=None
    )
    assert errors["src_corpus"] == f"Corpus {corpus.name} is being deleted."

    monkeypatch.setattr(corpora, "_referrers_delete", real)
    corpus_delete(corpus=corpus, batch=2)
    assert not Corpus.objects.filter(pk=corpus.pk).exists() and _rows(corpus.pk)["sentences"] == 0


def test_the_candidate_foreign_keys_to_sentences_and_documents_have_indexes() -> None:
    """Without them each deleted sentence scanned every run's candidates (the 19-minute corpus delete)."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT tablename, indexdef FROM pg_indexes WHERE tablename IN (%s, %s)",
            [SentencePairCandidate._meta.db_table, DocumentPairCandidate._meta.db_table],
        )
        defs = cur.fetchall()
    for table in (SentencePairCandidate._meta.db_table, DocumentPairCandidate._meta.db_table):
        for column in ("src_id", "tgt_id"):
            assert any(t == table and d.endswith(f"({column})") for t, d in defs), (table, column)
