"""Document runs end to end on a small imported JSONL corpus: train HiDE / Document BoW, match with every method,
align."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management.base import CommandError

from mining.forms import RunStartForm
from mining.models import (
    Artefact,
    ArtefactKind,
    DocumentPairCandidate,
    JobStatus,
    MiningRun,
    RunKind,
    SentencePairCandidate,
)
from pcapp.jobs import execute_job
from mining.services.imports import import_execute, import_job_create
from mining.services.runs import run_create

DATA = Path(__file__).resolve().parents[2] / "data" / "import"


@pytest.fixture
def corpus():
    job = import_execute(job=import_job_create(corpus_name="docs", fmt="jsonl", paths=[str(DATA / "admin-docs.jsonl")]))
    assert job.status == JobStatus.SUCCEEDED, job.error
    return job.corpus


def _run(**kw):
    run = run_create(enqueue=False, **kw)
    execute_job(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.SUCCEEDED, run.error
    return run


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["sentence_avg", "sentence_vote", "count"])
def test_document_methods_match_the_translated_documents(corpus, method):
    run = _run(
        kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr", params={"method": method, "k": 2}
    )
    pairs = list(DocumentPairCandidate.objects.filter(run=run).select_related("src", "tgt"))
    assert pairs and all(p.evidence for p in pairs)
    correct = sum(p.src.external_id == p.tgt.external_id for p in pairs)
    assert correct >= 2


@pytest.mark.django_db
def test_hide_training_then_matching_and_alignment(corpus):
    _run(
        kind=RunKind.TRAIN_DOC_MODEL,
        src_corpus=corpus,
        src_lang="en",
        tgt_lang="fr",
        params={"epochs": 2, "batch_size": 2, "hidden": [32, 32, 48, 48]},
    )
    assert Artefact.objects.filter(kind=ArtefactKind.DOC_MODEL, name="hide").count() == 1
    docs = _run(
        kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr", params={"method": "hide", "k": 2}
    )
    assert DocumentPairCandidate.objects.filter(run=docs).exists()
    align = _run(kind=RunKind.ALIGN, parent=docs, src_corpus=corpus, src_lang="en", tgt_lang="fr")
    cands = SentencePairCandidate.objects.filter(run=align)
    assert cands.exists() and all(c.doc_pair_id for c in cands)
    assert all("bead" in c.evidence for c in cands)


@pytest.mark.django_db
def test_hide_training_holds_out_validation_pairs_and_records_the_kept_epoch(tmp_path):
    docs = [json.loads(line) for line in (DATA / "admin-docs.jsonl").read_text(encoding="utf-8").splitlines()]
    doubled = tmp_path / "doubled.jsonl"  # each en-fr pair twice, the copy with its text cut short: 6 pairs, 2 held out
    doubled.write_text(
        "".join(json.dumps(d) + "\n" for d in docs)
        + "".join(
            json.dumps({**d, "id": f"{d['id']}-2", "text": d["text"][: len(d["text"]) // 2 + 1]}) + "\n"
            for d in docs
            if d["lang"] in ("en", "fr") and d["id"].startswith("admin-help")
        ),
        encoding="utf-8",
    )
    job = import_execute(job=import_job_create(corpus_name="docs2", fmt="jsonl", paths=[str(doubled)]))
    assert job.status == JobStatus.SUCCEEDED, job.error
    train = _run(
        kind=RunKind.TRAIN_DOC_MODEL,
        src_corpus=job.corpus,
        src_lang="en",
        tgt_lang="fr",
        params={"epochs": 2, "batch_size": 2, "hidden": [32, 32, 48, 48], "validation": 0.34},
    )
    artefact = Artefact.objects.get(kind=ArtefactKind.DOC_MODEL, name="hide")
    assert "validation_pairs" in artefact.metrics, (artefact.metrics, artefact.params)
    n_val = artefact.metrics["validation_pairs"]
    assert n_val == 2 and artefact.params["validation_pairs"] == n_val
    assert len(artefact.metrics["validation_p_at_1"]) == len(artefact.metrics["validation_margin"]) == 3
    assert 0 <= artefact.metrics["best_epoch"] <= 2
    assert train.stats["train_pairs"] == artefact.metrics["train_pairs"] == 4


TINY_BOW = {
    "model": "bow",
    "epochs": 30,
    "batch_size": 2,
    "n_buckets": 4096,
    "emb_dim": 32,
    "hidden": [32, 32, 48, 48],
    "out_dim": 32,
    "lr": 3e-3,
    "emb_lr": 5e-2,
}


@pytest.mark.django_db
def test_bow_training_then_matching(corpus):
    train = _run(kind=RunKind.TRAIN_DOC_MODEL, src_corpus=corpus, src_lang="en", tgt_lang="fr", params=TINY_BOW)
    artefact = Artefact.objects.get(kind=ArtefactKind.DOC_MODEL, name="bow")
    assert artefact.params["n_buckets"] == 4096 and not artefact.params["bigrams"]
    assert train.stats["train_pairs"] == artefact.metrics["train_pairs"] >= 2
    assert train.encoder is None  # Document BoW reads words, not sentence embeddings
    assert not Artefact.objects.filter(kind=ArtefactKind.DOC_MODEL, name="hide").exists()
    docs = _run(
        kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr", params={"method": "bow", "k": 2}
    )
    pairs = list(DocumentPairCandidate.objects.filter(run=docs).select_related("src", "tgt"))
    assert pairs and all(p.evidence["method"] == "bow" and "fwd_mean" in p.evidence for p in pairs)
    assert sum(p.src.external_id == p.tgt.external_id for p in pairs) >= 2
    assert "embed" not in docs.timings


@pytest.mark.django_db
def test_bow_run_without_a_model_and_unknown_model_fail_clearly(corpus):
    run = run_create(
        kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr", params={"method": "bow"}, enqueue=False
    )
    execute_job(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.FAILED and "no trained Document BoW model for en-fr" in run.error
    run = run_create(
        kind=RunKind.TRAIN_DOC_MODEL,
        src_corpus=corpus,
        src_lang="en",
        tgt_lang="fr",
        params={"model": "lda"},
        enqueue=False,
    )
    execute_job(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.FAILED and "unknown document model 'lda'" in run.error


@pytest.mark.django_db
def test_unknown_method_fails_clearly(corpus):
    run = run_create(
        kind=RunKind.DOCUMENT,
        src_corpus=corpus,
        src_lang="en",
        tgt_lang="fr",
        params={"method": "magic"},
        enqueue=False,
    )
    execute_job(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.FAILED and "unknown document method 'magic'" in run.error


@pytest.mark.django_db
def test_match_and_align_commands(corpus):
    from django.core.management import call_command

    call_command("match_documents", "docs", "--src", "en", "--tgt", "fr", "--method", "sentence_vote")
    run = DocumentPairCandidate.objects.latest("id").run
    call_command("align_documents", str(run.pk))
    assert SentencePairCandidate.objects.filter(run__parent=run).exists()


@pytest.mark.django_db
def test_match_documents_bow_trains_document_bow_first(corpus):
    from django.core.management import call_command

    tiny = [f"{k}={json.dumps(v)}" for k, v in TINY_BOW.items() if k != "model"]
    out = StringIO()
    call_command(
        "match_documents",
        "docs",
        "--src",
        "en",
        "--tgt",
        "fr",
        "--method",
        "bow",
        "--train",
        *[arg for p in tiny for arg in ("--train-param", p)],
        stdout=out,
    )
    train, docs = MiningRun.objects.order_by("id")
    assert train.kind == RunKind.TRAIN_DOC_MODEL and train.params["model"] == "bow"
    assert train.params["n_buckets"] == 4096 and train.params["hidden"] == [32, 32, 48, 48]
    assert docs.params["method"] == "bow" and DocumentPairCandidate.objects.filter(run=docs).exists()
    assert Artefact.objects.get(kind=ArtefactKind.DOC_MODEL).name == "bow"
    with pytest.raises(CommandError, match="unknown bow training parameters: pooling"):
        call_command(
            "match_documents",
            "docs",
            "--src",
            "en",
            "--tgt",
            "fr",
            "--method",
            "bow",
            "--train",
            "--train-param",
            "pooling=dnn_pool",
        )
    with pytest.raises(CommandError, match="needs --train"):
        call_command("match_documents", "docs", "--src", "en", "--tgt", "fr", "--train-param", "epochs=1")


@pytest.mark.django_db
def test_run_form_offers_document_bow(corpus):
    form = RunStartForm(
        data={
            "kind": "document",
            "src_corpus": corpus.pk,
            "src_lang": "en",
            "tgt_lang": "fr",
            "method": "bow",
            "knn": "exact",
            "margin": "ratio",
            "k": "4",
            "strategy": "max_score",
        }
    )
    assert form.is_valid(), form.errors
    assert form.run_kwargs()["params"]["method"] == "bow"
