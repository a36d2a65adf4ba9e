"""Document runs end to end on a small imported JSONL corpus: train HiDE, match with every method, align."""

from pathlib import Path

import pytest

from mining.models import Artefact, ArtefactKind, DocumentPairCandidate, JobStatus, RunKind, SentencePairCandidate
from mining.services.execute import execute_run_service
from mining.services.imports import import_execute, import_job_create
from mining.services.runs import run_create

DATA = Path(__file__).resolve().parents[2] / "data" / "import"


@pytest.fixture
def corpus():
    job = import_execute(job=import_job_create(corpus_name="docs", fmt="jsonl",
                                               paths=[str(DATA / "admin-docs.jsonl")]))
    assert job.status == JobStatus.SUCCEEDED, job.error
    return job.corpus


def _run(**kw):
    run = run_create(enqueue=False, **kw)
    execute_run_service(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.SUCCEEDED, run.error
    return run


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["sentence_avg", "sentence_vote", "count"])
def test_document_methods_match_the_translated_documents(corpus, method):
    run = _run(kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr",
               params={"method": method, "k": 2})
    pairs = list(DocumentPairCandidate.objects.filter(run=run).select_related("src", "tgt"))
    assert pairs and all(p.evidence for p in pairs)
    correct = sum(p.src.external_id == p.tgt.external_id for p in pairs)
    assert correct >= 2


@pytest.mark.django_db
def test_hide_training_then_matching_and_alignment(corpus):
    _run(kind=RunKind.TRAIN_DOC_MODEL, src_corpus=corpus, src_lang="en", tgt_lang="fr",
         params={"epochs": 2, "batch_size": 2, "hidden": [32, 32, 48, 48]})
    assert Artefact.objects.filter(kind=ArtefactKind.DOC_MODEL, name="hide").count() == 1
    docs = _run(kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr", params={"method": "hide",
                                                                                               "k": 2})
    assert DocumentPairCandidate.objects.filter(run=docs).exists()
    align = _run(kind=RunKind.ALIGN, parent=docs, src_corpus=corpus, src_lang="en", tgt_lang="fr")
    cands = SentencePairCandidate.objects.filter(run=align)
    assert cands.exists() and all(c.doc_pair_id for c in cands)
    assert all("bead" in c.evidence for c in cands)


@pytest.mark.django_db
def test_unknown_method_fails_clearly(corpus):
    run = run_create(kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr",
                     params={"method": "magic"}, enqueue=False)
    execute_run_service(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.FAILED and "unknown document method 'magic'" in run.error


@pytest.mark.django_db
def test_match_and_align_commands(corpus):
    from django.core.management import call_command

    call_command("match_documents", "docs", "--src", "en", "--tgt", "fr", "--method", "sentence_vote")
    run = DocumentPairCandidate.objects.latest("id").run
    call_command("align_documents", str(run.pk))
    assert SentencePairCandidate.objects.filter(run__parent=run).exists()
