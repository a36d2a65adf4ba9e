"""Evidence on a candidate pair's texts that false pairs fail on: what a translation copies (numbers, URLs, paths,
e-mails, code, placeholders, names), what a dictionary translates, and how long a translation runs.

Every feature is a float per pair, 0 where the pair gives no evidence either way, higher = more suspicious for the
``*_mismatch`` / ``*_missing`` / ``length_dev`` / ``punct_mismatch`` features and higher = more reassuring for
``identical`` and ``dict_*``:

- ``numbers_mismatch``: multiset difference of the two sides' numbers over their union (``1,5`` = ``1.5``,
  ``1 000`` = ``1,000``); ``numbers_any``: either side has a number.
- ``verbatim_mismatch``: the same for URLs, e-mails, paths, file names, command-line options and code identifiers
  (snake_case, camelCase, CAPS_WITH_DIGITS), which a translation copies; ``verbatim_any``.
- ``placeholders_mismatch``: the same for printf / format placeholders (``%s``, ``%1$d``, ``{0}``, ``{name}``,
  ``$VAR``); ``placeholders_any``.
- ``names_missing``: share of the source's capitalised words (not the first word) absent from the target's words.
- ``identical``: distinct words of 3+ letters both sides share, over the smaller side's.
- ``dict_src`` / ``dict_tgt``: share of a side's words (4+ letters) with a dictionary entry whose translations
  occur on the other side (words compared by their first 5 letters); 0 when no word has an entry. Present only when
  the dictionary is given.
- ``length_dev``: |log(target chars / source chars) - the median of that over the pairs given|.
- ``punct_mismatch``: the sides end in different question / exclamation / colon marks.

Texts are parsed once each (Python string work, cached per distinct text); features are assembled into arrays.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from mining.core.dictionaries import WordMap

BASE_FEATURES: tuple[str, ...] = (
    "numbers_any",
    "numbers_mismatch",
    "verbatim_any",
    "verbatim_mismatch",
    "placeholders_any",
    "placeholders_mismatch",
    "names_missing",
    "identical",
    "length_dev",
    "punct_mismatch",
)
DICT_FEATURES: tuple[str, ...] = ("dict_src", "dict_tgt")
STEM = 5  # letters two words are compared on for dictionary matches (inflections: fichier / fichiers)

_PLACEHOLDER_RE = re.compile(
    r"%\(\w+\)[-+ #0]*\d*(?:\.\d+)?[a-zA-Z]|%\d+\$[-+ #0]*\d*(?:\.\d+)?[a-zA-Z]|%[-+ #0]*\d*(?:\.\d+)?(?:l{1,2}|h)?"
    r"[sdifuxXcpgeEo]|\{\d*\}|\{[A-Za-z_]\w*\}|\$\{\w+\}|\$[A-Z_][A-Z0-9_]*"
)
_VERBATIM_RE = re.compile(
    r"(?:https?|ftp)://[^\s<>\"'»«]+"
    r"|www\.[^\s<>\"'»«]+"
    r"|[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
    r"|(?<![\w/])(?:~|\.{1,2})?/[\w.+~-]+(?:/[\w.+~-]*)*"
    r"|\b[\w-]+\.(?:conf|cfg|ini|txt|html?|xml|css|js|json|py|sh|pl|c|h|deb|gz|bz2|xz|tar|zip|png|jpe?g|gif|svg"
    r"|xcf|tiff?|pdf|list|log|d|so)\b"
    r"|(?<![\w-])--?[A-Za-z][\w-]*"
    r"|\b[a-z][a-z0-9]*_[a-z0-9_]+\b"
    r"|\b[a-z]+[A-Z][A-Za-z0-9]*\b"
    r"|\b[A-Z][A-Z]*[0-9_][A-Z0-9_]*\b"
)
_NUMBER_RE = re.compile(r"\d+(?:[.,\u00a0\u202f]\d+|\s\d{3}(?!\d))*")
_WORD_RE = re.compile(r"[^\W\d_]+")
_TRAILING = ".,;:!?)]}'\""


@dataclass(frozen=True)
class TextInfo:
    """What one text holds (the per-text half of the work)."""

    numbers: Counter
    verbatim: Counter
    placeholders: Counter
    words: frozenset[str]  # lower-cased words
    stems: frozenset[str]  # their first STEM letters
    names: frozenset[str]  # lower-cased capitalised words after the first word
    n_chars: int
    end: str  # "?", "!", ":" or ""


@lru_cache(maxsize=200_000)
def text_info(text: str) -> TextInfo:
    """Parse one text (placeholders first, then verbatim tokens, then numbers in what is left)."""
    placeholders = Counter(_PLACEHOLDER_RE.findall(text))
    rest = _PLACEHOLDER_RE.sub(" ", text)
    verbatim = Counter(v.rstrip(_TRAILING) for v in _VERBATIM_RE.findall(rest))
    rest = _VERBATIM_RE.sub(" ", rest)
    numbers = Counter(re.sub(r"\D", "", n) for n in _NUMBER_RE.findall(rest))
    raw_words = _WORD_RE.findall(rest)
    words = frozenset(w.lower() for w in raw_words)
    names = frozenset(w.lower() for w in raw_words[1:] if w[0].isupper() and len(w) >= 2)
    stripped = text.rstrip()
    end = stripped[-1] if stripped and stripped[-1] in "?!:" else ""
    return TextInfo(
        numbers=numbers,
        verbatim=verbatim,
        placeholders=placeholders,
        words=words,
        stems=frozenset(w[:STEM] for w in words),
        names=names,
        n_chars=len(stripped),
        end=end,
    )


def _mismatch(a: Counter, b: Counter) -> float:
    """Multiset symmetric difference over the union's size; 0 when both are empty."""
    union = sum((a | b).values())
    if union == 0:
        return 0.0
    return (sum((a - b).values()) + sum((b - a).values())) / union


def _coverage(words: frozenset[str], other_stems: frozenset[str], dictionary: WordMap, cache: dict) -> float:
    """Share of `words` (4+ letters) with a dictionary entry whose translations' stems meet `other_stems`."""
    known = hit = 0
    for w in words:
        if len(w) < 4:
            continue
        stems = cache.get(w)
        if stems is None:
            stems = frozenset(t[:STEM] for t in dictionary.get(w, ()))
            cache[w] = stems
        if stems:
            known += 1
            hit += not stems.isdisjoint(other_stems)
    return hit / known if known else 0.0


@dataclass(frozen=True)
class Evidence:
    """Features of n pairs.

    Attributes:
        names: the f feature names, in column order.
        values: (n, f) float64.
        used: the evidence kinds that went in ("text", and "dictionary" when both word maps were given).
        length_center: the log length ratio ``length_dev`` is measured from (the pairs' median unless given).
    """

    names: tuple[str, ...]
    values: np.ndarray
    used: tuple[str, ...]
    length_center: float = 0.0

    def column(self, name: str) -> np.ndarray:
        """(n,) the values of one feature."""
        return self.values[:, self.names.index(name)]


def pair_evidence(
    src_texts: Sequence[str],
    tgt_texts: Sequence[str],
    *,
    src_to_tgt: WordMap | None = None,
    tgt_to_src: WordMap | None = None,
    length_center: float | None = None,
) -> Evidence:
    """The evidence features of pairs (src_texts[i], tgt_texts[i]).

    Args:
        src_texts, tgt_texts: n texts a side.
        src_to_tgt, tgt_to_src: word maps (``dictionaries.load_dictionary``); the dictionary features are computed
            only when both are given.
        length_center: the log(target chars / source chars) ``length_dev`` is measured from; None: the median over
            these pairs (give a run's own centre to score other pairs on its scale).

    Returns:
        ``Evidence`` with BASE_FEATURES (+ DICT_FEATURES) columns.
    """
    n = len(src_texts)
    if len(tgt_texts) != n:
        raise ValueError(f"{n} source texts but {len(tgt_texts)} target texts")
    use_dict = src_to_tgt is not None and tgt_to_src is not None
    names = BASE_FEATURES + (DICT_FEATURES if use_dict else ())
    values = np.zeros((n, len(names)), dtype=np.float64)
    log_ratio = np.zeros(n, dtype=np.float64)
    cache_s: dict = {}
    cache_t: dict = {}
    for i, (s_text, t_text) in enumerate(zip(src_texts, tgt_texts, strict=True)):
        s, t = text_info(s_text), text_info(t_text)
        row = values[i]
        row[0] = bool(s.numbers or t.numbers)
        row[1] = _mismatch(s.numbers, t.numbers)
        row[2] = bool(s.verbatim or t.verbatim)
        row[3] = _mismatch(s.verbatim, t.verbatim)
        row[4] = bool(s.placeholders or t.placeholders)
        row[5] = _mismatch(s.placeholders, t.placeholders)
        row[6] = len(s.names - t.words) / len(s.names) if s.names else 0.0
        long_s = {w for w in s.words if len(w) >= 3}
        long_t = {w for w in t.words if len(w) >= 3}
        row[7] = len(long_s & long_t) / min(len(long_s), len(long_t)) if long_s and long_t else 0.0
        log_ratio[i] = math.log(max(t.n_chars, 1) / max(s.n_chars, 1))
        row[9] = s.end != t.end
        if use_dict:
            row[10] = _coverage(s.words, t.stems, src_to_tgt, cache_s)
            row[11] = _coverage(t.words, s.stems, tgt_to_src, cache_t)
    center = float(np.median(log_ratio)) if length_center is None and n else float(length_center or 0.0)
    values[:, 8] = np.abs(log_ratio - center)
    return Evidence(
        names=names, values=values, used=("text", "dictionary") if use_dict else ("text",), length_center=center
    )
