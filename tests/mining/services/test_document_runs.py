"""Document runs end to end on a small imported JSONL corpus: train HiDE / Document BoW, match with every method,
align."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management.base import CommandError

from mining.core.docfilter import RULES
from mining.core.docmethod import DocMethod
from mining.core.margin import Margin
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
from mining.services.document_runs import document_run_params
from mining.services.imports import import_execute, import_job_create
from mining.services.runs import run_create
from pcapp.jobs import execute_job
from tests.factories.mining import docs_corpus, execute_run

DATA = Path(__file__).resolve().parents[2] / "data" / "import"


@pytest.fixture
def corpus():
    """The imported en-fr documentation corpus (tests/data/import/admin-docs.jsonl)."""
    return docs_corpus()


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["sentence_avg", "sentence_vote", "count", "rerank"])
def test_document_methods_match_the_translated_documents(corpus, method):
    run = execute_run(
        kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr", params={"method": method, "k": 2}
    )
    pairs = list(DocumentPairCandidate.objects.filter(run=run).select_related("src", "tgt").order_by("rank"))
    kept = [(p.src.external_id, p.tgt.external_id) for p in pairs if not p.filter_reason]
    assert sorted(kept) == [("admin-help-0",) * 2, ("admin-help-1",) * 2, ("admin-help-2",) * 2]
    # the English-only page "presplit" (2 short sentences): the vote methods pick each source's best target, and the
    # pre-filter marks that pair (5 words against a page of dozens); one-to-one selection leaves it out
    rejected = [(p.src.external_id, p.filter_reason) for p in pairs if p.filter_reason]
    assert rejected == ([("presplit", "word_ratio")] if method in ("sentence_vote", "count") else [])
    assert [p.rank for p in pairs] == list(range(1, len(pairs) + 1))
    assert all(p.evidence["method"] == method and set(p.evidence["prefilter"]) == set(RULES) for p in pairs)
    # 3 gold pairs: a seeded half (2) may tune the run, the third measures it
    assert run.stats["gold"] == {
        "note": run.stats["gold"]["note"],
        "pairs": 1,
        "p_at_1": 1.0,
        "p_at_3": 1.0,
        "precision": 1.0,
    }
    assert run.stats["method"] == method


@pytest.mark.django_db
def test_rerank_is_the_default_and_its_evidence_names_each_stage(corpus):
    run = execute_run(kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr", params={})
    assert run.stats["method"] == "rerank" and run.stats["retrieval"] == "sentence_avg"  # no HiDE model yet
    # 4 English pages x 3 French ones (top_n 5 > 3: every pair); "presplit", 5 words, fails the word ratio everywhere
    assert run.stats["candidates_retrieved"] == 12 and run.stats["candidates_pruned"] == 3
    assert run.stats["prefilter"]["source"] == "default"  # 2 gold pairs to learn from: too few for thresholds
    assert run.stats["rerank_weight_source"].startswith("learnt on 2 gold pairs")
    for pair in DocumentPairCandidate.objects.filter(run=run):
        ev = pair.evidence
        assert set(ev) >= {"retrieval", "vote", "combined", "prefilter", "fwd_mean", "bwd_mean"}
        assert ev["retrieval"]["by"] == "sentence_avg" and ev["combined"]["rank"] == 1
        assert pair.cosine == pytest.approx(ev["retrieval"]["cosine"], abs=1e-5)
        assert pair.strategy == "max_score" and pair.filter_reason == ""


def test_document_run_params_fill_defaults_and_name_bad_values():
    p = document_run_params({"method": "count", "top_n": 5})
    assert p.method is DocMethod.COUNT and p.top_n == 5 and p.k == 4 and p.margin is Margin.RATIO
    assert document_run_params({}).method is DocMethod.RERANK and document_run_params({}).rerank_weight is None
    # keys the shared run form stored on document runs before they had their own parameters are ignored
    assert document_run_params({"knn": "exact", "filters": True, "nprobe": 16}).method is DocMethod.RERANK
    for bad, message in (
        ({"method": "magic"}, "method: 'magic' is not one of: sentence_avg, hide, bow, sentence_vote, count, rerank"),
        ({"top_n": 0}, "top_n: must be at least 1 (got 0)"),
        ({"k": 2.5}, "k: '2.5' is not a whole number"),
        ({"margin": "foo"}, "margin: 'foo' is not one of: absolute, distance, ratio"),
        ({"rerank_weight": 2}, "rerank_weight: must be at most 1 (got 2)"),
        ({"w1": "x"}, "w1: 'x' is not a number"),
        ({"prefilter": "maybe"}, "prefilter: 'maybe' is not true or false"),
        ({"typo": 1}, "typo: is not a parameter of document runs"),
    ):
        with pytest.raises(ValueError) as caught:
            document_run_params(bad)
        assert str(caught.value) == message


@pytest.mark.django_db
def test_hide_training_then_matching_and_alignment(corpus):
    execute_run(
        kind=RunKind.TRAIN_DOC_MODEL,
        src_corpus=corpus,
        src_lang="en",
        tgt_lang="fr",
        params={"epochs": 2, "batch_size": 2, "hidden": [32, 32, 48, 48]},
    )
    artefact = Artefact.objects.get(kind=ArtefactKind.DOC_MODEL, name="hide")
    docs = execute_run(
        kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr", params={"method": "hide", "k": 2}
    )
    pairs = list(DocumentPairCandidate.objects.filter(run=docs))
    assert len(pairs) == 3 and all(p.evidence["method"] == "hide" for p in pairs)
    # the model was trained on this corpus's gold pairs: labelled, and no gold pair is left to measure the run
    assert docs.stats["doc_model"] == {
        "id": artefact.pk,
        "name": "hide",
        "version": 1,
        "trained_on": "docs",
        "trained_on_this_corpus": True,
    }
    assert docs.stats["gold"]["pairs"] == 0 and "trained on this corpus" in docs.stats["gold"]["note"]
    assert docs.stats["doc_model_warning"].startswith("hide v1 was trained on this corpus's gold document pairs")
    rerank = execute_run(kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr", params={"k": 2})
    assert rerank.stats["retrieval"] == "hide" and rerank.stats["doc_model"]["id"] == artefact.pk
    align = execute_run(kind=RunKind.ALIGN, parent=docs, src_corpus=corpus, src_lang="en", tgt_lang="fr")
    cands = list(SentencePairCandidate.objects.filter(run=align).select_related("doc_pair"))
    assert len(cands) == align.stats["candidates"] >= 3 and {c.doc_pair.run_id for c in cands} == {docs.pk}
    assert {c.doc_pair_id for c in cands} == {p.pk for p in pairs} and all("bead" in c.evidence for c in cands)


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
    train = execute_run(
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
    train = execute_run(kind=RunKind.TRAIN_DOC_MODEL, src_corpus=corpus, src_lang="en", tgt_lang="fr", params=TINY_BOW)
    artefact = Artefact.objects.get(kind=ArtefactKind.DOC_MODEL, name="bow")
    assert artefact.params["n_buckets"] == 4096 and not artefact.params["bigrams"]
    assert train.stats["train_pairs"] == artefact.metrics["train_pairs"] >= 2
    assert train.encoder is None  # Document BoW reads words, not sentence embeddings
    assert not Artefact.objects.filter(kind=ArtefactKind.DOC_MODEL, name="hide").exists()
    docs = execute_run(
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
    # an unknown model is refused before the run exists (its class checks it), and fails clearly if stored anyway
    with pytest.raises(ValueError, match="model: 'lda' is not one of: hide, bow"):
        run_create(
            kind=RunKind.TRAIN_DOC_MODEL, src_corpus=corpus, src_lang="en", tgt_lang="fr", params={"model": "lda"}
        )
    run = MiningRun.objects.create(
        kind=RunKind.TRAIN_DOC_MODEL, src_corpus=corpus, src_lang="en", tgt_lang="fr", params={"model": "lda"}
    )
    execute_job(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.FAILED and "model: 'lda' is not one of: hide, bow" in run.error


@pytest.mark.django_db
def test_unknown_method_fails_clearly(corpus):
    with pytest.raises(ValueError, match="method: 'magic' is not one of"):
        run_create(kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr", params={"method": "magic"})
    run = MiningRun.objects.create(
        kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr", params={"method": "magic"}
    )
    execute_job(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.FAILED and "method: 'magic' is not one of" in run.error


@pytest.mark.django_db
def test_match_and_align_commands(corpus):
    from django.core.management import call_command

    out = StringIO()
    call_command("match_documents", "docs", "--src", "en", "--tgt", "fr", "--method", "sentence_vote", stdout=out)
    run = DocumentPairCandidate.objects.latest("id").run
    assert "Gold document pairs (1 held-out gold pairs (2 others may tune the run)): P@1 100.0, P@3 100.0" in (
        out.getvalue()
    )
    call_command("align_documents", str(run.pk))
    aligned = SentencePairCandidate.objects.filter(run__parent=run)
    assert aligned.count() >= 3 and {c.doc_pair.run_id for c in aligned} == {run.pk}


@pytest.mark.django_db
def test_match_documents_bow_trains_document_bow_first(corpus):
    from django.core.management import call_command

    tiny = [f"{k}={json.dumps(v)}" for k, v in TINY_BOW.items() if k != "model"]
    out = StringIO()
    with pytest.raises(CommandError, match="--train needs --train-corpus OTHER"):
        call_command("match_documents", "docs", "--src", "en", "--tgt", "fr", "--method", "bow", "--train")
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
        "--train-on-matched-corpus",
        *[arg for p in tiny for arg in ("--train-param", p)],
        stdout=out,
    )
    train, docs = MiningRun.objects.order_by("id")
    assert train.kind == RunKind.TRAIN_DOC_MODEL and train.params["model"] == "bow"
    assert train.params["n_buckets"] == 4096 and train.params["hidden"] == [32, 32, 48, 48]
    assert docs.params["method"] == "bow" and DocumentPairCandidate.objects.filter(run=docs).count() == 3
    assert Artefact.objects.get(kind=ArtefactKind.DOC_MODEL).name == "bow"
    assert "Gold document pairs: none to measure with" in out.getvalue()
    assert "[document model trained on this corpus]" in out.getvalue()
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
            "--train-on-matched-corpus",
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
    assert form.run_kwargs()["params"].method.value == "bow"
