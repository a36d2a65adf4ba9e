"""Sentence splitting (and cutting over-long sentences at clause boundaries), offline language identification and
the normalised-text hash used for dedup."""

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


# A paragraph with nothing but letters, digits, spaces and these marks, and at most one . ! or ? at its very end,
# has no sentence boundary inside in any language sentencex knows (its terminators are punctuation: . ! ? ; … । 。
# ؟ and the like), so it is one sentence as it is. Headings, captions and one-sentence paragraphs, half of a crawled
# page's paragraphs, skip the splitter (checked equal to sentencex's output on every sentence of the bench's crawl).
_NO_BOUNDARY = re.compile(r"[\w ,()'\"/&+\-]*[.!?]?")


def split_sentences(text: str, lang: str) -> list[str]:
    """Split a document's text into sentences with sentencex (Wikimedia's language-aware splitter); blank lines and
    line breaks inside paragraphs are kept as boundaries of paragraphs, and empty pieces dropped."""
    import sentencex

    out: list[str] = []
    base = base_language(lang)
    for paragraph in re.split(r"\n\s*\n", text):
        if not paragraph.strip():
            continue
        if _NO_BOUNDARY.fullmatch(paragraph):
            out.append(paragraph.strip())
            continue
        for sentence in sentencex.segment(base, paragraph):
            sentence = sentence.strip()
            if sentence:
                out.append(sentence)
    return out


# Where a clause ends: after , ; : or a spaced dash followed by white space (the space is dropped at a cut), and
# after the full-width punctuation of Chinese and Japanese, which needs no space.
_CLAUSE_END = re.compile(r"(?<=[,;:\u060c\u061b\u2013\u2014])\s+|(?<=[\u3001\u3002\uff0c\uff1a\uff1b\uff01\uff1f])")


def bound_sentence(text: str, lang: str, max_chars: int) -> list[str] | None:
    """`text` as pieces of at most `max_chars` characters, cut at sentence boundaries first, then at clause
    boundaries (as many clauses per piece as fit, in order); None when a single clause is longer than that. Pieces
    are stripped of the white space at the cuts, nothing else changes."""
    if len(text) <= max_chars:
        return [text]
    out: list[str] = []
    for sentence in split_sentences(text, lang) or [text.strip()]:
        if len(sentence) <= max_chars:
            out.append(sentence)
            continue
        pieces = _pack_clauses(sentence, max_chars)
        if pieces is None:
            return None
        out += pieces
    return out


def _pack_clauses(sentence: str, max_chars: int) -> list[str] | None:
    """Greedy: each piece takes clauses until the next one would not fit."""
    cuts = [(m.start(), m.end()) for m in _CLAUSE_END.finditer(sentence)] + [(len(sentence), len(sentence))]
    pieces: list[str] = []
    start = 0  # where the current piece begins
    end = None  # where it ends if it stops at the last clause that fit
    resume = 0  # where the text after that cut begins
    for cut_start, cut_end in cuts:
        if cut_start - start > max_chars:
            if end is None:
                return None  # one clause alone is over the limit
            pieces.append(sentence[start:end])
            start, end = resume, None
            if cut_start - start > max_chars:
                return None
        end, resume = cut_start, cut_end
    pieces.append(sentence[start:end])
    return [p for p in (piece.strip() for piece in pieces) if p]


def detect_languages(texts: Sequence[str]) -> list[str]:
    """ISO 639-1 code per text from py3langid's model, which ships inside the package (no download); batched."""
    from .langid import detect

    return detect(texts)
