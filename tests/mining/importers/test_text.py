"""Language id, sentence splitting and the normalised hash (no database)."""

from __future__ import annotations

from pathlib import Path

import py3langid
import pytest
import sentencex

from mining.ingest.errors import ImportFailure
from mining.ingest.langid import detect
from mining.ingest.languages import check_language
from mining.ingest.text import norm_hash, split_sentences

DATA = Path(__file__).resolve().parents[2] / "data" / "import"


def real_sentences() -> list[str]:
    """Both sides of the real en-fr sample, plus mixed-case, upper-case and long lines."""
    texts = []
    for line in (DATA / "admin-en-fr.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        texts.extend(line.split("\t"))
    texts += [
        "DIE KATZE SITZT AUF DER MATTE UND SCHLÄFT.",
        "Il était une fois " * 60,
        "Привет, как дела?",
        "これは日本語の文です。",
        "¿Dónde está la biblioteca?",
    ]
    return texts


def test_batched_language_id_equals_py3langid():
    texts = real_sentences()
    expected = [py3langid.classify(t[:512])[0] for t in texts]
    got = detect(texts)
    # Where no n-gram of the model occurs ("No"), py3langid falls back to its first class, 'af'; we say ''.
    assert [g or "af" for g in got] == expected
    assert got.count("") == 1 and texts[got.index("")] == "No"
    assert sum(code == "fr" for code in got[1:80:2]) > 20


def test_texts_without_features_get_no_language():
    assert detect(["", "   ", "...", "No"]) == ["", "", "", ""]


def test_norm_hash_ignores_case_width_and_spacing_only():
    assert norm_hash("Hello   World\t") == norm_hash("hello world")
    assert norm_hash("ＡＢＣ") == norm_hash("abc")  # NFKC: full-width letters
    assert norm_hash("hello world") != norm_hash("hello, world")
    assert -(2**63) <= norm_hash("x") < 2**63


def test_split_sentences_is_language_aware_and_keeps_text():
    text = "Dr. Smith arrived at 5 p.m. today. He left early!\n\nA new paragraph"
    assert split_sentences(text, "en") == ["Dr. Smith arrived at 5 p.m. today.", "He left early!", "A new paragraph"]


@pytest.mark.parametrize("code", ["en", "pt-BR", "zh_Hant", "sr-Latn", "fil", "es-419"])
def test_known_language_codes(code):
    assert check_language(code) == code


@pytest.mark.parametrize("code", ["xx", "english", "", "e"])
def test_unknown_language_codes_are_named(code):
    with pytest.raises(ImportFailure, match=f"unknown language code '{code}'"):
        check_language(code)


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("Short enough.", 20, ["Short enough."]),
        ("One sentence here. And another one.", 20, ["One sentence here.", "And another one."]),
        ("first, second; third: fourth", 15, ["first, second;", "third: fourth"]),
        ("a, b, c, d", 4, ["a,", "b,", "c, d"]),
        ("alpha — beta — gamma", 12, ["alpha —", "beta — gamma"]),
        ("中文句子，第二部分，第三部分。", 6, ["中文句子，", "第二部分，", "第三部分。"]),
        ("no boundary anywhere in this one", 10, None),
        ("fits, then a clause that is far too long", 12, None),
    ],
)
def test_bound_sentence_cuts_at_sentence_then_clause_boundaries(text, limit, expected):
    from mining.ingest.text import bound_sentence

    pieces = bound_sentence(text, "en" if text.isascii() else "zh", limit)
    assert pieces == expected
    if pieces:
        assert all(len(p) <= limit for p in pieces)


def test_every_catalogue_django_ships_passes_the_po_syntax_check():
    """The PO check refuses cut-off strings and entries; no real catalogue may trip it (about 1,000 files)."""
    import django

    from mining.ingest.readers import check_po_syntax

    catalogues = sorted(Path(django.__file__).parent.rglob("*.po"))
    assert len(catalogues) > 500
    for path in catalogues:
        check_po_syntax(str(path))


def test_paragraphs_without_an_inner_boundary_skip_the_splitter_with_its_result():
    paragraphs = ["Options", "The Colors Menu", "Reduce the number of colours.", "Is it (really) done?"]
    paragraphs += ["Menü »Farben«", "Das ist 1. Klasse.", "Hello world. Bye now!", "e.g. this", "Figure 2.3 Foo"]
    for paragraph in paragraphs:
        expected = [s.strip() for s in sentencex.segment("de", paragraph) if s.strip()]
        assert split_sentences(paragraph, "de") == expected
    assert split_sentences("Hello world. Bye now!\n\nOptions", "en") == ["Hello world.", "Bye now!", "Options"]
