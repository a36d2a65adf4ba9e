"""manage.py evaluate_documents on a small imported JSONL corpus (documents shared by id across en/fr/de)."""

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from mining.core.doc_evaluation import RERANK_AVG, RERANK_HIDE, SENTENCE_AVG, SENTENCE_VOTE
from mining.models import JobStatus
from mining.services.doc_evaluation import corpus_pairs
from mining.services.imports import import_execute, import_job_create

DATA = Path(__file__).resolve().parents[1] / "data" / "import"


def _import(name: str):
    job = import_execute(job=import_job_create(corpus_name=name, fmt="jsonl", paths=[str(DATA / "admin-docs.jsonl")]))
    assert job.status == JobStatus.SUCCEEDED, job.error
    return job.corpus


@pytest.mark.django_db
def test_corpus_pairs_hold_every_target_document():
    pairs = corpus_pairs(_import("docs"), "en", "fr")
    assert pairs.src.n_docs == len(pairs.gold) >= 3
    assert pairs.tgt.n_docs >= pairs.src.n_docs
    # the gold target of source doc i is the same text as paired_tgt's doc i
    for i, g in enumerate(pairs.gold):
        assert pairs.tgt.documents()[g] == pairs.paired_tgt.documents()[i]


@pytest.mark.django_db
def test_table_with_models_trained_on_another_corpus():
    _import("docs")
    _import("docs-train")
    out = StringIO()
    call_command(
        "evaluate_documents",
        "docs",
        "--src",
        "en",
        "--tgt",
        "fr",
        "--train-corpus",
        "docs-train",
        "--epochs",
        "2",
        "--no-bow",
        stdout=out,
    )
    table = out.getvalue()
    assert "clean" in table and "noisy (resplit)" in table
    rows = {}
    for line in table.splitlines():
        name, sep, rest = line.partition(" | ")
        if sep and name.strip() and not name.startswith("method"):
            rows[name.strip()] = [float(x) for x in rest.replace("|", " ").split()]
    expected = {SENTENCE_AVG, "HiDE DNN->pooling", "HiDE pooling->DNN", SENTENCE_VOTE, "count baseline"}
    assert expected | {RERANK_HIDE, RERANK_AVG} <= set(rows)
    # columns per condition: P@1 P@3 P@10 of the raw ranking, then P@1 and precision of the run's selection; the
    # 3 translated pages are found by every sentence-level method, clean and re-split
    for name in (SENTENCE_AVG, SENTENCE_VOTE, RERANK_AVG, RERANK_HIDE):
        assert rows[name] == [100.0] * 10, (name, table)


@pytest.mark.django_db
def test_refuses_training_on_the_evaluated_corpus_and_unknown_corpora():
    _import("docs")
    with pytest.raises(CommandError, match="must differ"):
        call_command("evaluate_documents", "docs", "--src", "en", "--tgt", "fr", "--train-corpus", "docs")
    with pytest.raises(CommandError, match="no corpus"):
        call_command("evaluate_documents", "nope", "--src", "en", "--tgt", "fr")
    with pytest.raises(CommandError, match="no gold en-it"):
        call_command("evaluate_documents", "docs", "--src", "en", "--tgt", "it")
