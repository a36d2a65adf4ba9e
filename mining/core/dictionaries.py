"""Bilingual word dictionaries from dictd files (Debian's FreeDict packages: ``dict-freedict-eng-fra`` and the like).

A dictd dictionary is two files: ``<name>.index`` (one line per headword: ``word<TAB>offset<TAB>length``, offset and
length in dictd's base-64 digits) and ``<name>.dict.dz`` (the entries' text, gzip-compatible; a plain ``.dict`` is
read too). FreeDict entries look like::

    file /fail/
    1. dossier
    2. fichier, rang
       Note: ...            <- indented lines (notes, synonyms, "see:", examples) are not translations

``load_dictionary`` turns one into a ``{word: frozenset(translation words)}`` map (lower-cased, single-word headwords,
every word of every translation), optionally only for the headwords of a vocabulary (the words of the texts at hand:
the German dictionaries hold half a million headwords). ``find_dictionary`` looks for the pair's files under the usual
folders; a missing dictionary is ``None``, never an error: callers drop the evidence that needs it.
"""

from __future__ import annotations

import gzip
import logging
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

logger = logging.getLogger(__name__)

DICTD_DIRS: tuple[Path, ...] = (Path("/usr/share/dictd"),)
# ISO 639-1 -> the ISO 639-3 code FreeDict names its packages with.
FREEDICT_CODES = {
    "en": "eng",
    "fr": "fra",
    "de": "deu",
    "es": "spa",
    "it": "ita",
    "nl": "nld",
    "pt": "por",
    "sv": "swe",
    "pl": "pol",
    "cs": "ces",
    "da": "dan",
    "fi": "fin",
    "hu": "hun",
    "ru": "rus",
    "tr": "tur",
    "ja": "jpn",
}
WordMap = dict[str, frozenset[str]]

_B64 = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}
_WORD_RE = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")
_ANNOT_RE = re.compile(r"<[^>]*>|\[[^\]]*\]|\([^)]*\)|\{[^}]*\}|/[^/]*/")
_NUMBERED_RE = re.compile(r"^\d+\.\s*")


def _b64(s: str) -> int:
    n = 0
    for c in s:
        n = n * 64 + _B64[c]
    return n


def translation_words(body: str) -> set[str]:
    """The words of an entry's translations: the lines after the headword line that are not indented (notes,
    synonyms, cross-references and examples are), annotations (``<pl>``, ``[cook.]``, ``(...)``, ``/ipa/``) removed,
    lower-cased."""
    words: set[str] = set()
    for line in body.split("\n")[1:]:
        if not line or line[0].isspace():
            continue
        text = _ANNOT_RE.sub(" ", _NUMBERED_RE.sub("", line))
        words.update(w.lower() for w in _WORD_RE.findall(text))
    return words


def parse_dictd(index_text: str, data: bytes, vocabulary: Iterable[str] | None = None) -> WordMap:
    """A word -> translation words map from a dictd index's text and its data's (decompressed) bytes.

    Args:
        index_text: the ``.index`` file's text.
        data: the ``.dict`` bytes (``.dict.dz`` decompressed).
        vocabulary: keep only these headwords (lower-cased); None keeps every single-word headword.
    """
    keep = None if vocabulary is None else {w.lower() for w in vocabulary}
    out: dict[str, set[str]] = {}
    for line in index_text.split("\n"):
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        word = parts[0].strip().lower()
        if not word or " " in word or word.startswith("00database"):
            continue
        if keep is not None and word not in keep:
            continue
        start, length = _b64(parts[1]), _b64(parts[2])
        body = data[start : start + length].decode("utf-8", errors="replace")
        found = translation_words(body)
        if found:
            out.setdefault(word, set()).update(found)
    return {w: frozenset(t) for w, t in out.items()}


def find_dictionary(src_lang: str, tgt_lang: str, dirs: Sequence[Path] = DICTD_DIRS) -> tuple[Path, Path] | None:
    """(index, data) paths of the FreeDict dictionary from src_lang to tgt_lang (ISO 639-1), or None."""
    a, b = FREEDICT_CODES.get(src_lang), FREEDICT_CODES.get(tgt_lang)
    if a is None or b is None:
        return None
    for folder in dirs:
        index = Path(folder) / f"freedict-{a}-{b}.index"
        for data in (index.with_suffix(".dict.dz"), index.with_suffix(".dict")):
            if index.is_file() and data.is_file():
                return index, data
    return None


def load_dictionary(
    src_lang: str, tgt_lang: str, *, vocabulary: Iterable[str] | None = None, dirs: Sequence[Path] = DICTD_DIRS
) -> WordMap | None:
    """The src_lang -> tgt_lang word map from the installed dictd files, or None when they are not installed.

    Args:
        src_lang, tgt_lang: ISO 639-1 codes.
        vocabulary: keep only these headwords (saves memory with the large German dictionaries).
        dirs: folders to look in.
    """
    found = find_dictionary(src_lang, tgt_lang, dirs)
    if found is None:
        logger.info("no dictd dictionary %s-%s in %s", src_lang, tgt_lang, ", ".join(map(str, dirs)))
        return None
    index, data_path = found
    raw = data_path.read_bytes()
    data = gzip.decompress(raw) if data_path.suffix == ".dz" else raw
    return parse_dictd(index.read_text(encoding="utf-8", errors="replace"), data, vocabulary)
