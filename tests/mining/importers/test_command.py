"""The import_corpus command: inline imports of each format, --into an existing corpus, errors as CommandError."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from mining.models import Corpus, Document, GoldSentencePair, ImportJob, JobStatus, Sentence

DATA = Path(__file__).resolve().parents[2] / "data" / "import"
pytestmark = pytest.mark.django_db


def command(*args: str) -> str:
    out = StringIO()
    call_command("import_corpus", *args, stdout=out)
    return out.getvalue()


@pytest.mark.parametrize(
    "args, sentences",
    [
        (["tsv", str(DATA / "admin-en-fr.tsv"), "--src", "en", "--tgt", "fr"], 80),
        (["moses", str(DATA / "admin.en"), str(DATA / "admin.fr"), "--src", "en", "--tgt", "fr"], 80),
        (["tmx", str(DATA / "admin-en-de.tmx"), "--src", "en", "--tgt", "de"], 50),
    ],
)
def test_aligned_formats_from_the_command_line(args, sentences):
    out = command("cli", *args)
    corpus = Corpus.objects.get(name="cli")
    assert Sentence.objects.filter(corpus=corpus).count() == sentences
    assert GoldSentencePair.objects.filter(corpus=corpus).count() == sentences // 2
    assert f"{sentences} sentences" in out
    assert ImportJob.objects.get().status == JobStatus.SUCCEEDED


def test_document_formats_from_the_command_line():
    command("docs", "jsonl", str(DATA / "admin-docs.jsonl"))
    command("po", "po", str(DATA / "admin-fr.po"))
    command("folder", "folder", str(DATA / "folder"))
    assert {c.name for c in Corpus.objects.all()} == {"docs", "po", "folder"}
    assert all(Sentence.objects.filter(corpus__name=n).exists() for n in ("docs", "po", "folder"))


def test_into_adds_documents_and_a_failed_into_leaves_the_corpus_as_it_was():
    command("grow", "tsv", str(DATA / "admin-en-fr.tsv"), "--src", "en", "--tgt", "fr")
    with pytest.raises(CommandError, match="exists"):
        command("grow", "tmx", str(DATA / "admin-en-de.tmx"), "--src", "en", "--tgt", "de")
    command("grow", "tmx", str(DATA / "admin-en-de.tmx"), "--src", "en", "--tgt", "de", "--into")
    corpus = Corpus.objects.get(name="grow")
    assert corpus.languages == ["de", "en", "fr"]
    before = list(Sentence.objects.filter(corpus=corpus).order_by("id").values_list("id", "text"))
    n_docs = Document.objects.filter(corpus=corpus).count()
    assert len(before) == 130
    with pytest.raises(CommandError, match=r"admin-short\.fr.*has 37"):
        command(
            "grow",
            "moses",
            str(DATA / "admin.en"),
            str(DATA / "admin-short.fr"),
            "--src",
            "en",
            "--tgt",
            "it",
            "--into",
        )
    assert list(Sentence.objects.filter(corpus=corpus).order_by("id").values_list("id", "text")) == before
    assert Document.objects.filter(corpus=corpus).count() == n_docs
    corpus.refresh_from_db()
    assert corpus.languages == ["de", "en", "fr"]


def test_bad_input_is_a_command_error_naming_file_and_line():
    with pytest.raises(CommandError, match=r"latin1\.tsv', line \d+: bytes"):
        command("bad", "tsv", str(DATA / "latin1.tsv"), "--src", "en", "--tgt", "fr")
    with pytest.raises(CommandError, match="unknown language code 'xx'"):
        command("bad", "tsv", str(DATA / "admin-en-fr.tsv"), "--src", "en", "--tgt", "xx")
    assert not Corpus.objects.filter(name="bad").exists()
