"""Every import format from real files, and every bad input: a clear error and nothing half-written."""

from __future__ import annotations

from pathlib import Path

import pytest

from mining.ingest.errors import ImportFailure
from mining.models import Corpus, Document, GoldDocumentPair, GoldSentencePair, ImportJob, JobStatus, Sentence
from mining.services.imports import import_execute, import_job_create

DATA = Path(__file__).resolve().parents[2] / "data" / "import"
pytestmark = pytest.mark.django_db


def run_import(name: str, fmt: str, *paths: str | Path, **options) -> ImportJob:
    job = import_job_create(corpus_name=name, fmt=fmt, paths=[str(p) for p in paths], options=options)
    return import_execute(job=job)


def counts() -> tuple[int, int, int, int]:
    return (
        Corpus.objects.count(),
        Document.objects.count(),
        Sentence.objects.count(),
        GoldSentencePair.objects.count(),
    )


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_tsv_with_header_records_gold_pairs_and_language_ids():
    job = run_import("tsv", "tsv", DATA / "admin-en-fr.tsv", src_lang="en", tgt_lang="fr")
    assert job.status == JobStatus.SUCCEEDED, job.error
    rows = [line.split("\t") for line in lines(DATA / "admin-en-fr.tsv")[1:]]
    assert job.stats["gold_sentence_pairs"] == len(rows) == 40
    pairs = {(p.src.text, p.tgt.text) for p in GoldSentencePair.objects.select_related("src", "tgt")}
    assert pairs == {(a, b) for a, b in rows}
    corpus = Corpus.objects.get(name="tsv")
    assert corpus.languages == ["en", "fr"] and corpus.stats["sentences"] == 80
    detected = Sentence.objects.filter(lang="fr").values_list("detected_lang", flat=True)
    assert all(detected) and sum(d == "fr" for d in detected) > 20
    assert GoldDocumentPair.objects.filter(corpus=corpus).count() == 1


def test_moses_pair_and_length_mismatch_names_both_counts():
    job = run_import("moses", "moses", DATA / "admin.en", DATA / "admin.fr", src_lang="en", tgt_lang="fr")
    assert job.status == JobStatus.SUCCEEDED and job.stats["gold_sentence_pairs"] == 40
    before = counts()
    job = run_import("moses-bad", "moses", DATA / "admin.en", DATA / "admin-short.fr", src_lang="en", tgt_lang="fr")
    assert job.status == JobStatus.FAILED
    assert "has 40 lines" in job.error and "has 37" in job.error
    assert counts() == before


def test_tmx_streams_units_and_matches_region_subtags():
    job = run_import("tmx", "tmx", DATA / "admin-en-de.tmx", src_lang="en", tgt_lang="de")
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.stats["gold_sentence_pairs"] == 25


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("malformed.tmx", "malformed TMX"),
        ("missing-lang.tmx", "<tu> #1 (tuid '0')"),
    ],
)
def test_bad_tmx_names_the_element_and_writes_nothing(name, expected):
    before = counts()
    job = run_import("tmx-bad", "tmx", DATA / name, src_lang="en", tgt_lang="de")
    assert job.status == JobStatus.FAILED and expected in job.error and name in job.error
    assert counts() == before


def test_po_catalogue_language_from_header():
    job = run_import("po", "po", DATA / "admin-fr.po")
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert Corpus.objects.get(name="po").languages == ["en", "fr"]
    assert job.stats["gold_sentence_pairs"] > 10


def test_jsonl_documents_split_and_presplit_with_empty_documents_counted():
    job = run_import("jsonl", "jsonl", DATA / "admin-docs.jsonl")
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.stats["skipped_empty_documents"] == 1
    presplit = Document.objects.get(external_id="presplit")
    assert list(presplit.sentences.order_by("position").values_list("text", flat=True)) == [
        "Log in again.",
        "Change password",
    ]
    doc = Document.objects.get(external_id="admin-help-0", lang="en")
    assert doc.n_sentences >= 2 and doc.url.endswith("/en/0") and doc.title == "Admin help 0"
    # Documents sharing an id across languages are known translations.
    assert GoldDocumentPair.objects.filter(corpus__name="jsonl").count() == 3 * 3


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("malformed.jsonl", "line 3: not valid JSON"),
        ("unknown-lang.jsonl", "unknown language code 'qq'"),
    ],
)
def test_bad_jsonl_names_the_line_and_writes_nothing(name, expected):
    before = counts()
    job = run_import("jsonl-bad", "jsonl", DATA / name)
    assert job.status == JobStatus.FAILED and expected in job.error
    assert counts() == before


def test_folder_of_documents_takes_language_from_folder():
    job = run_import("folder", "folder", DATA / "folder")
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert set(Document.objects.values_list("lang", flat=True)) == {"en", "fr"}
    assert GoldDocumentPair.objects.count() == 3


def test_not_utf8_names_file_and_line_and_existing_corpus_keeps_its_rows():
    assert run_import("keep", "tsv", DATA / "admin-en-fr.tsv", src_lang="en", tgt_lang="fr").status == "succeeded"
    before = counts()
    job = run_import("keep", "tsv", DATA / "latin1.tsv", src_lang="en", tgt_lang="fr", into=True)
    assert job.status == JobStatus.FAILED
    assert "latin1.tsv" in job.error and "line 1" in job.error and "not valid UTF-8" in job.error
    assert counts() == before


def test_unknown_language_and_size_limit_are_refused_before_reading(settings):
    with pytest.raises(ImportFailure, match="unknown language code 'zz'"):
        import_job_create(
            corpus_name="x",
            fmt="tsv",
            paths=[str(DATA / "admin-en-fr.tsv")],
            options={"src_lang": "en", "tgt_lang": "zz"},
        )
    settings.PCAPP_MAX_UPLOAD_BYTES = 100
    with pytest.raises(ImportFailure, match="over the limit of 100 bytes"):
        import_job_create(
            corpus_name="x",
            fmt="tsv",
            paths=[str(DATA / "admin-en-fr.tsv")],
            options={"src_lang": "en", "tgt_lang": "fr"},
        )
    assert ImportJob.objects.count() == 0


def test_text_is_stored_exactly_as_given():
    job = run_import("html", "tsv", DATA / "html.tsv", src_lang="en", tgt_lang="fr", header=False)
    assert job.status == JobStatus.SUCCEEDED, job.error
    raw = lines(DATA / "html.tsv")
    stored = list(Sentence.objects.order_by("id").values_list("text", flat=True))
    assert stored == [raw[0].split("\t")[0], raw[0].split("\t")[1], raw[1].split("\t")[0], raw[1].split("\t")[1]]


def test_same_corpus_name_twice_without_into_is_refused():
    assert run_import("dup", "tsv", DATA / "admin-en-fr.tsv", src_lang="en", tgt_lang="fr").status == "succeeded"
    job = run_import("dup", "tsv", DATA / "admin-en-fr.tsv", src_lang="en", tgt_lang="fr")
    assert job.status == JobStatus.FAILED and "exists" in job.error


def test_many_small_batches_write_every_sentence_with_its_language_id():
    """Language ids of batch k are computed while batch k+1 is read; every sentence still arrives with its own."""
    job = run_import("batched", "tsv", DATA / "admin-en-fr.tsv", src_lang="en", tgt_lang="fr", batch_size=7)
    assert job.status == JobStatus.SUCCEEDED, job.error
    rows = [line.split("\t") for line in lines(DATA / "admin-en-fr.tsv")[1:]]
    pairs = [
        (p.src.text, p.tgt.text, p.src.position, p.tgt.position)
        for p in GoldSentencePair.objects.select_related("src", "tgt").order_by("src__position")
    ]
    assert pairs == [(a, b, i, i) for i, (a, b) in enumerate(rows)]
    from mining.ingest.langid import detect

    for lang in ("en", "fr"):
        texts = list(Sentence.objects.filter(lang=lang).order_by("position").values_list("text", "detected_lang"))
        assert [d for _, d in texts] == detect([t for t, _ in texts])
    from mining.ingest.text import norm_hash

    stored = list(Sentence.objects.values_list("text", "norm_hash"))
    assert len(stored) == 80 and all(h == norm_hash(t) for t, h in stored)


def test_deleting_a_corpus_removes_its_rows_and_keeps_the_others():
    """Sentence.corpus and GoldSentencePair.corpus have no database constraint; Django still cascades on delete."""
    kept = run_import("kept", "tsv", DATA / "admin-en-fr.tsv", src_lang="en", tgt_lang="fr")
    gone = run_import("gone", "tsv", DATA / "admin-en-fr.tsv", src_lang="en", tgt_lang="fr")
    assert kept.status == gone.status == JobStatus.SUCCEEDED
    before = counts()
    Corpus.objects.filter(name="gone").delete()
    assert counts() == (before[0] - 1, before[1] - 2, before[2] - 80, before[3] - 40)
    assert not Sentence.objects.exclude(corpus__name="kept").exists()
    assert not GoldSentencePair.objects.exclude(corpus__name="kept").exists()
