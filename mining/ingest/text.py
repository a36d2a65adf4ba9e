"""Sentence splitting, offline language identification and the normalised-text hash used for dedup."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence

from .languages import base_language


def norm_hash(text: str) -> int:
    """Signed 64-bit hash of the text after NFKC, case folding and whitespace collapsing (for dedup only; the stored
    text is never normalised)."""
    # str.split() splits on exactly the characters `\s` matches (str.isspace), several times faster than re.sub.
    norm = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    return int.from_bytes(hashlib.blake2b(norm.encode("utf-8"), digest_size=8).digest(), "little", signed=True)


def split_sentences(text: str, lang: str) -> list[str]:
    """Split a document's text into sentences with sentencex (Wikimedia's language-aware splitter); blank lines and
    line breaks inside paragraphs are kept as boundaries of paragraphs, and empty pieces dropped."""
    import sentencex

    out: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        if not paragraph.strip():
            continue
        for sentence in sentencex.segment(base_language(lang), paragraph):
            sentence = sentence.strip()
            if sentence:
                out.append(sentence)
    return out


def detect_languages(texts: Sequence[str]) -> list[str]:
    """ISO 639-1 code per text from py3langid's model, which ships inside the package (no download); batched."""
    from .langid import detect

    return detect(texts)
