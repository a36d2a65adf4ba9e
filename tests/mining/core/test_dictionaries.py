"""dictd parsing and lookup (tiny hand-written dictionaries, no installed package needed)."""

import gzip
from pathlib import Path

import pytest

from mining.core.dictionaries import find_dictionary, load_dictionary, parse_dictd, translation_words

_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _b64(n: int) -> str:
    out = ""
    while True:
        out = _B64[n % 64] + out
        n //= 64
        if n == 0:
            return out


def _dictd(entries: dict[str, str]) -> tuple[str, bytes]:
    data, index = b"", []
    for word, body in entries.items():
        raw = body.encode()
        index.append(f"{word}\t{_b64(len(data))}\t{_b64(len(raw))}")
        data += raw
    return "\n".join(["00databaseinfo\tA\tB", *index]) + "\n", data


ENTRIES = {
    "file": "file /fail/\n1. dossier\n2. fichier, rang\n   Note: not this\n",
    "house": "house /haus/ <n>\nmaison [bâtiment]\n see: {home}\n",
    "take off": "take off\ndécoller\n",
}


def test_translation_words_skips_indented_lines_and_annotations():
    assert translation_words(ENTRIES["file"]) == {"dossier", "fichier", "rang"}
    assert translation_words(ENTRIES["house"]) == {"maison"}


def test_parse_dictd_single_words_and_vocabulary():
    index, data = _dictd(ENTRIES)
    full = parse_dictd(index, data)
    assert full == {"file": frozenset({"dossier", "fichier", "rang"}), "house": frozenset({"maison"})}
    assert parse_dictd(index, data, vocabulary=["House"]) == {"house": frozenset({"maison"})}


def test_load_dictionary_from_files_and_absent(tmp_path: Path):
    index, data = _dictd(ENTRIES)
    (tmp_path / "freedict-eng-fra.index").write_text(index)
    (tmp_path / "freedict-eng-fra.dict.dz").write_bytes(gzip.compress(data))
    assert find_dictionary("en", "fr", [tmp_path]) is not None
    loaded = load_dictionary("en", "fr", dirs=[tmp_path])
    assert loaded is not None and loaded["file"] == frozenset({"dossier", "fichier", "rang"})
    assert load_dictionary("fr", "en", dirs=[tmp_path]) is None
    assert load_dictionary("en", "xx", dirs=[tmp_path]) is None


@pytest.mark.skipif(find_dictionary("en", "fr") is None, reason="dict-freedict-eng-fra is not installed")
def test_installed_freedict_en_fr():
    loaded = load_dictionary("en", "fr", vocabulary=["file", "house"])
    assert loaded is not None and set(loaded) == {"file", "house"}
    assert "fichier" in loaded["file"] and "maison" in loaded["house"]
