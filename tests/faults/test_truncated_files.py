"""Issue 17, every importer: a file that ends inside a quoted string (PO), an element (TMX) or a record (JSONL, TSV,
Moses) is an error naming the file and line, and nothing of the import is stored (also not into an existing
corpus)."""

from __future__ import annotations

import json

import pytest

from mining.models import JobStatus, Sentence

from .conftest import DATA, counts, run_import

pytestmark = pytest.mark.django_db

PO_HEAD = 'msgid ""\nmsgstr ""\n"Language: fr\\n"\n\nmsgid "Hello"\nmsgstr "Bonjour"\n\n'


def _failed_without_rows(job, before, *expected: str) -> None:
    assert job.status == JobStatus.FAILED, job.stats
    for text in expected:
        assert text in job.error, job.error
    assert counts() == before


def test_po_ending_inside_msgstr_is_an_error_not_a_clipped_string(tmp_path):
    """The issue's reproduction: `msgstr "Bonjour le monde` at the end of the file stored "Bonjour le mond"."""
    po = tmp_path / "fr.po"
    po.write_text(PO_HEAD + 'msgid "Hello world"\nmsgstr "Bonjour le monde', encoding="utf-8")
    before = counts()
    _failed_without_rows(run_import("po", "po", po), before, "fr.po'", "line 9", "ends inside")
    assert not Sentence.objects.filter(text__startswith="Bonjour le mond").exists()


@pytest.mark.parametrize(
    ("tail", "line"),
    [
        ('msgid "Hello world', 8),  # inside the msgid string
        ('msgid "Hello world"\nmsgstr ""\n"Bonjour', 10),  # inside a continuation string
        ('msgid "Hello world"\n', 8),  # the entry has no msgstr
        ('msgid "Hello world"\nmsgstr "Bonjour le monde" trailing\n', 9),  # not a string line
        ('msgid "a \\"quoted\\" word"\nmsgstr "un mot \\"cité\\"\n', 9),  # the last quote is escaped
    ],
)
def test_po_truncated_anywhere_in_an_entry_is_an_error(tmp_path, tail, line):
    po = tmp_path / "fr.po"
    po.write_text(PO_HEAD + tail, encoding="utf-8")
    before = counts()
    _failed_without_rows(run_import("po", "po", po), before, "fr.po'", f"line {line}")


def test_po_with_escaped_quotes_and_obsolete_entries_still_imports(tmp_path):
    po = tmp_path / "fr.po"
    po.write_text(
        PO_HEAD + 'msgid "a \\"quoted\\" word"\nmsgstr "un mot \\"cité\\""\n\n#~ msgid "Old"\n#~ msgstr "Vieux"\n',
        encoding="utf-8",
    )
    job = run_import("po", "po", po)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert set(Sentence.objects.filter(lang="fr").values_list("text", flat=True)) == {"Bonjour", 'un mot "cité"'}


def test_tmx_ending_inside_an_element_is_an_error(tmp_path):
    text = (DATA / "admin-en-de.tmx").read_text(encoding="utf-8")
    cut = text.index("</seg>", len(text) // 2) + 3  # inside a closing tag half way through
    tmx = tmp_path / "cut.tmx"
    tmx.write_text(text[:cut], encoding="utf-8")
    before = counts()
    job = run_import("tmx", "tmx", tmx, src_lang="en", tgt_lang="de")
    _failed_without_rows(job, before, "cut.tmx'", f"line {text[:cut].count(chr(10)) + 1}")


def test_jsonl_ending_inside_a_record_is_an_error(tmp_path):
    lines = (DATA / "admin-docs.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    path = tmp_path / "cut.jsonl"
    path.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2], encoding="utf-8")
    before = counts()
    job = run_import("jsonl", "jsonl", path)
    _failed_without_rows(job, before, "cut.jsonl'", f"line {len(lines)}", "ends inside")


def test_tsv_ending_inside_a_line_is_an_error(tmp_path):
    text = (DATA / "admin-en-fr.tsv").read_text(encoding="utf-8")
    path = tmp_path / "cut.tsv"
    path.write_text(text[: text.rindex("\t") + 4], encoding="utf-8")  # the last target cut after 3 characters
    before = counts()
    job = run_import("tsv", "tsv", path, src_lang="en", tgt_lang="fr")
    _failed_without_rows(job, before, "cut.tsv'", f"line {text.count(chr(10))}", "ends inside")


def test_moses_file_ending_inside_a_line_is_an_error(tmp_path):
    text = (DATA / "admin.fr").read_text(encoding="utf-8")
    (tmp_path / "cut.fr").write_text(text[:-5], encoding="utf-8")
    before = counts()
    job = run_import("moses", "moses", DATA / "admin.en", tmp_path / "cut.fr", src_lang="en", tgt_lang="fr")
    _failed_without_rows(job, before, "cut.fr'", "line 40", "ends inside")


def test_a_cut_file_added_to_an_existing_corpus_leaves_it_as_it_was(tmp_path):
    assert run_import("keep", "jsonl", DATA / "admin-docs.jsonl").status == JobStatus.SUCCEEDED
    before = counts()
    path = tmp_path / "more.jsonl"
    good = json.dumps({"id": "new", "lang": "en", "text": "A new document. It has two sentences."})
    path.write_text(good + "\n" + good.replace('"new"', '"newer"')[:30], encoding="utf-8")
    job = run_import("keep", "jsonl", path, into=True)
    _failed_without_rows(job, before, "more.jsonl'", "line 2")
