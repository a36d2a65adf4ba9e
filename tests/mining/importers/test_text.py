"""Language id, sentence splitting and the normalised hash (no database)."""

from __future__ import annotations

from pathlib import Path

import py3langid
import pytest

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
