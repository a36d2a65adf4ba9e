"""Issue 17, bounded input: no sentence longer than PCAPP_MAX_SENTENCE_CHARS is stored. Longer text is split at
sentence or clause boundaries where it has them, else the import is refused naming the file and line; splits are
counted in the job's stats."""

from __future__ import annotations

import json
import re

import pytest

from mining.models import JobStatus, Sentence

from .conftest import counts, run_import

pytestmark = pytest.mark.django_db


def test_the_default_limit_is_2000_characters(settings):
    assert settings.PCAPP_MAX_SENTENCE_CHARS == 2000


def test_a_10_mib_tsv_line_is_refused_naming_file_and_line(tmp_path):
    """The issue's reproduction: one TSV line of 10,485,760 characters imported as one sentence."""
    path = tmp_path / "huge.tsv"
    path.write_text("Hello.\tBonjour.\n" + "a" * 10_485_760 + "\tb\n", encoding="utf-8")
    before = counts()
    job = run_import("huge", "tsv", path, src_lang="en", tgt_lang="fr")
    assert job.status == JobStatus.FAILED
    assert "huge.tsv'" in job.error and "line 2" in job.error and "PCAPP_MAX_SENTENCE_CHARS" in job.error
    assert counts() == before


@pytest.mark.parametrize("side", ["src", "tgt"])
def test_an_aligned_pair_over_the_limit_is_refused_with_its_line(tmp_path, settings, side):
    """A pair cannot be split without guessing which piece translates which: the import is refused."""
    settings.PCAPP_MAX_SENTENCE_CHARS = 100
    long = "This sentence, and its clause, is long. " * 4  # 160 characters, with boundaries
    pair = (long, "Court.") if side == "src" else ("Short.", long)
    path = tmp_path / "pairs.tsv"
    path.write_text("One.\tUn.\n" + "\t".join(pair) + "\nTwo.\tDeux.\n", encoding="utf-8")
    before = counts()
    job = run_import("long-pair", "tsv", path, src_lang="en", tgt_lang="fr")
    assert job.status == JobStatus.FAILED
    assert "pairs.tsv', line 2" in job.error
    assert "160 characters" in job.error
    assert counts() == before


def test_moses_tmx_and_po_refuse_a_long_segment_naming_where(tmp_path, settings):
    settings.PCAPP_MAX_SENTENCE_CHARS = 50
    long = "x" * 51
    (tmp_path / "a.en").write_text("One.\n" + long + "\n", encoding="utf-8")
    (tmp_path / "a.fr").write_text("Un.\nDeux.\n", encoding="utf-8")
    tmx = tmp_path / "m.tmx"
    tmx.write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<tmx version="1.4"><header/><body>\n'
        '<tu tuid="a"><tuv xml:lang="en"><seg>One.</seg></tuv><tuv xml:lang="de"><seg>Eins.</seg></tuv></tu>\n'
        f'<tu tuid="b"><tuv xml:lang="en"><seg>Two.</seg></tuv><tuv xml:lang="de"><seg>{long}</seg></tuv></tu>\n'
        "</body></tmx>\n",
        encoding="utf-8",
    )
    po = tmp_path / "fr.po"
    po.write_text(
        f'msgid ""\nmsgstr ""\n"Language: fr\\n"\n\nmsgid "One"\nmsgstr "Un"\n\nmsgid "{long}"\nmsgstr "Long"\n',
        encoding="utf-8",
    )
    before = counts()
    moses = run_import("m1", "moses", tmp_path / "a.en", tmp_path / "a.fr", src_lang="en", tgt_lang="fr")
    tmx_job = run_import("m2", "tmx", tmx, src_lang="en", tgt_lang="de")
    po_job = run_import("m3", "po", po)
    assert moses.status == tmx_job.status == po_job.status == JobStatus.FAILED
    assert "a.en', line 2" in moses.error and "51 characters" in moses.error
    assert "m.tmx'" in tmx_job.error and "<tu> #2 (tuid 'b')" in tmx_job.error
    assert "fr.po', line 8" in po_job.error
    assert counts() == before


def test_a_long_sentence_in_a_document_is_split_at_clause_boundaries(tmp_path, settings):
    settings.PCAPP_MAX_SENTENCE_CHARS = 120
    clauses = [f"Clause {i} of a very long sentence goes on and on" for i in range(12)]
    long = "; ".join(clauses) + "."  # one sentence of ~600 characters, no sentence boundary inside
    text = f"A short first sentence. {long} A short last sentence."
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"id": "d1", "lang": "en", "text": text}) + "\n", encoding="utf-8")
    job = run_import("split", "jsonl", path)
    assert job.status == JobStatus.SUCCEEDED, job.error
    stored = list(Sentence.objects.order_by("position").values_list("text", flat=True))
    assert max(len(s) for s in stored) <= 120
    assert stored[0] == "A short first sentence." and stored[-1] == "A short last sentence."
    # The pieces are the long sentence cut after clause punctuation, nothing lost or reordered.
    assert " ".join(stored[1:-1]) == long
    assert all(re.search(r"[;.]$", s) for s in stored[1:-1])
    assert job.stats["long_sentences_split"] == 1
    assert job.stats["sentences"] == len(stored) == 2 + len(stored[1:-1]) and len(stored) > 3
    assert job.stats["max_sentence_chars"] == 120


def test_a_presplit_sentence_over_the_limit_is_split_at_sentence_boundaries(tmp_path, settings):
    settings.PCAPP_MAX_SENTENCE_CHARS = 60
    joined = "This is the first sentence of two. And this is the second one, shorter."
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"id": "d", "lang": "en", "sentences": ["Hello.", joined]}) + "\n", encoding="utf-8")
    job = run_import("presplit", "jsonl", path)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert list(Sentence.objects.order_by("position").values_list("text", flat=True)) == [
        "Hello.",
        "This is the first sentence of two.",
        "And this is the second one, shorter.",
    ]
    assert job.stats["long_sentences_split"] == 1


def test_a_long_sentence_without_boundaries_is_refused_naming_file_and_line(tmp_path, settings):
    settings.PCAPP_MAX_SENTENCE_CHARS = 100
    path = tmp_path / "docs.jsonl"
    rows = [
        {"id": "ok", "lang": "en", "text": "Fine. Also fine."},
        {"id": "bad", "lang": "en", "text": "Fine. " + "word " * 40 + "end"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    before = counts()
    job = run_import("nosplit", "jsonl", path)
    assert job.status == JobStatus.FAILED
    assert "docs.jsonl', line 2" in job.error and "document 'bad'" in job.error
    assert "203 characters" in job.error and "PCAPP_MAX_SENTENCE_CHARS" in job.error
    assert counts() == before


def test_a_folder_document_names_its_file(tmp_path, settings):
    settings.PCAPP_MAX_SENTENCE_CHARS = 30
    (tmp_path / "docs" / "en").mkdir(parents=True)
    (tmp_path / "docs" / "en" / "a.txt").write_text("Short.\n" + "z" * 31 + "\n", encoding="utf-8")
    job = run_import("folder", "folder", tmp_path / "docs")
    assert job.status == JobStatus.FAILED
    assert "a.txt" in job.error and "31 characters" in job.error
