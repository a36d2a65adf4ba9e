"""Pre-filters for sentence pairs, each rejection with a named reason (Artetxe & Schwenk 2019, ParaCrawl).

Checks, in order (the first that fires is the pair's reason): identical sides, duplicate pair,
wrong language, too few tokens, too many tokens, length ratio, token overlap.
String handling is per text (Python), everything after tokenisation is vectorised.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Sequence

import numpy as np


class FilterReason(enum.Enum):
    """Why a pair was rejected."""

    IDENTICAL = "identical"
    DUPLICATE = "duplicate"
    WRONG_LANGUAGE = "wrong_language"
    TOO_SHORT = "too_short"
    TOO_LONG = "too_long"
    LENGTH_RATIO = "length_ratio"
    TOKEN_OVERLAP = "token_overlap"


# Words, but each CJK ideograph / kana / hangul syllable is a token of its own (no spaces there).
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN_RE = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+")
_SPACE_RE = re.compile(r"\s+")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (punctuation dropped, CJK split per character)."""
    return _TOKEN_RE.findall(text.lower())


def _normalise(text: str) -> str:
    return _SPACE_RE.sub(" ", text).strip()


def _overlap(a: list[str], b: list[str]) -> float:
    """Share of the smaller side's distinct non-numeric tokens that also occur on the other side.

    Numbers are left out: genuine translations copy them, which would flag short pairs.
    """
    sa = {t for t in a if not t.isdigit()}
    sb = {t for t in b if not t.isdigit()}
    if not sa or not sb:
        return 0.0
    return len(sa & sb) / min(len(sa), len(sb))


def apply_filters(
    src_texts: Sequence[str],
    tgt_texts: Sequence[str],
    *,
    src_lang: str,
    tgt_lang: str,
    src_detected: Sequence[str | None] | None = None,
    tgt_detected: Sequence[str | None] | None = None,
    min_tokens: int = 3,
    max_tokens: int = 80,
    max_overlap: float = 0.5,
    max_len_ratio: float = 2.0,
    tokenizer: Callable[[str], list[str]] = tokenize,
) -> np.ndarray:
    """The first rejection reason of each pair, or None when the pair passes.

    Args:
        src_texts: n source sentences.
        tgt_texts: n target sentences (pair i = (src_texts[i], tgt_texts[i])).
        src_lang: expected source language code.
        tgt_lang: expected target language code.
        src_detected: optional n detected source languages (None entries are not checked).
        tgt_detected: optional n detected target languages.
        min_tokens: a side with fewer tokens is TOO_SHORT.
        max_tokens: a side with more tokens is TOO_LONG.
        max_overlap: token overlap >= this is TOKEN_OVERLAP.
        max_len_ratio: token-count ratio (longer / shorter) above this is LENGTH_RATIO.
        tokenizer: text -> tokens.

    Returns:
        (n,) object array of ``FilterReason`` or None. Duplicates: every repeat after the first
        occurrence of the same (whitespace-normalised) pair.
    """
    n = len(src_texts)
    if len(tgt_texts) != n:
        raise ValueError(f"{n} source texts but {len(tgt_texts)} target texts")
    for name, det in (("src_detected", src_detected), ("tgt_detected", tgt_detected)):
        if det is not None and len(det) != n:
            raise ValueError(f"{name} has {len(det)} entries, expected {n}")
    reasons = np.full(n, None, dtype=object)
    if n == 0:
        return reasons

    src_norm = [_normalise(t) for t in src_texts]
    tgt_norm = [_normalise(t) for t in tgt_texts]
    src_tok = [tokenizer(t) for t in src_texts]
    tgt_tok = [tokenizer(t) for t in tgt_texts]
    n_src = np.fromiter((len(t) for t in src_tok), dtype=np.int64, count=n)
    n_tgt = np.fromiter((len(t) for t in tgt_tok), dtype=np.int64, count=n)

    identical = np.fromiter((a == b for a, b in zip(src_norm, tgt_norm, strict=True)), dtype=bool, count=n)
    pair_codes = np.unique(
        np.array([a + "\x00" + b for a, b in zip(src_norm, tgt_norm, strict=True)], dtype=object), return_inverse=True
    )[1]
    duplicate = np.ones(n, dtype=bool)
    duplicate[np.unique(pair_codes, return_index=True)[1]] = False
    wrong = np.zeros(n, dtype=bool)
    for detected, lang in ((src_detected, src_lang), (tgt_detected, tgt_lang)):
        if detected is not None:
            det = np.array(detected, dtype=object)
            wrong |= (det != None) & (det != lang)  # noqa: E711 (elementwise on an object array)
    shorter, longer = np.minimum(n_src, n_tgt), np.maximum(n_src, n_tgt)
    too_short = shorter < min_tokens
    too_long = longer > max_tokens
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio_bad = (shorter > 0) & (longer / np.maximum(shorter, 1) > max_len_ratio)
    overlap = np.fromiter((_overlap(a, b) for a, b in zip(src_tok, tgt_tok, strict=True)), dtype=np.float64, count=n)
    overlap_bad = overlap >= max_overlap

    # Assign in reverse priority so the first reason in the list wins.
    for reason, mask in reversed(
        (
            (FilterReason.IDENTICAL, identical),
            (FilterReason.DUPLICATE, duplicate),
            (FilterReason.WRONG_LANGUAGE, wrong),
            (FilterReason.TOO_SHORT, too_short),
            (FilterReason.TOO_LONG, too_long),
            (FilterReason.LENGTH_RATIO, ratio_bad),
            (FilterReason.TOKEN_OVERLAP, overlap_bad),
        )
    ):
        reasons[mask] = reason
    return reasons


def keep_mask(reasons: np.ndarray) -> np.ndarray:
    """(n,) bool: True where ``apply_filters`` found no reason to reject."""
    return np.array([r is None for r in reasons], dtype=bool)


def reason_counts(reasons: np.ndarray) -> dict[FilterReason, int]:
    """How many pairs each reason rejected (reasons with zero count are included)."""
    return {reason: int(sum(r is reason for r in reasons)) for reason in FilterReason}
