"""Pre-filters for sentence pairs, each rejection with a named reason (Artetxe & Schwenk 2019, ParaCrawl).

Checks, in order (the first that fires is the pair's reason): identical sides, duplicate pair,
wrong language, too few tokens, too many tokens, length ratio, token overlap.
String handling is per text (Python), everything after tokenisation is vectorised.

Wrong language fires only where the identifier can be trusted (``check_language``): a side whose detected language
differs from the expected one is rejected when the text is long enough to judge (``judgeable``: enough words that
are neither names nor numbers, and not a short list) and, when its probability is given, the identifier is sure
(``min_lang_prob``). Names, numbers and short lists are where a character n-gram identifier guesses, and a guess
must not throw away a true pair.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .enums import FilterReason

# Words, but each CJK ideograph / kana / hangul syllable is a token of its own (no spaces there).
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN_RE = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+")
_SPACE_RE = re.compile(r"\s+")
_WORD_RE = re.compile(rf"[{_CJK}]|[^\W\d_{_CJK}][^\W{_CJK}]*")
_LIST_SEP_RE = re.compile(r"[,;/|\u00b7\u3001]")

MIN_LANG_WORDS = 4  # content words (not names, not numbers) a text needs before its language is judged
MIN_LANG_PROB = 0.9  # the identifier's probability (py3langid's norm_probs) a rejection needs


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (punctuation dropped, CJK split per character)."""
    return _TOKEN_RE.findall(text.lower())


def judgeable(text: str, *, min_words: int = MIN_LANG_WORDS) -> bool:
    """Whether a text says enough for a character n-gram language identifier to be believed.

    Counts content words: words of two letters or more that start with a lower-case letter, plus the text's first
    word (sentence case); capitalised words inside the text (names, product names) and numbers do not count; CJK
    characters count one each. A list (items separated by commas, semicolons or slashes, 2.5 words an item or fewer,
    "red, green and blue") is never judged: it is names or nouns whatever its length.

    Args:
        text: one sentence.
        min_words: content words needed.
    """
    words = _WORD_RE.findall(text)
    content = sum(
        1
        for i, w in enumerate(words)
        if len(w) >= 2 and (i == 0 or not w[0].isupper()) or (len(w) == 1 and "\u3040" <= w <= "\ufaff")
    )
    if content < min_words:
        return False
    items = [it for it in _LIST_SEP_RE.split(text) if it.strip()]
    return not (len(items) >= 2 and len(words) / len(items) <= 2.5)


@dataclass(frozen=True)
class LanguageCheck:
    """What the language filter saw in each pair.

    Attributes:
        wrong: (n,) bool, rejected as wrong language.
        side: (n,) object, "src" or "tgt": the side whose detected language differs from the expected one (the
            source when both do), "" when neither does.
        detected: (n,) object, that side's detected language ("" when neither differs).
        probability: (n,) float64, the identifier's probability of it (NaN when not given or no side differs).
        judged: (n,) bool, that side was long enough to judge (False when no side differs).
    """

    wrong: np.ndarray
    side: np.ndarray
    detected: np.ndarray
    probability: np.ndarray
    judged: np.ndarray

    def evidence(self, i: int) -> dict | None:
        """JSON-ready language evidence of pair i, or None when both sides are in their expected language:
        ``{"side", "detected", "probability" (None if unknown), "judged", "rejected"}``."""
        if not self.side[i]:
            return None
        p = float(self.probability[i])
        return {
            "side": str(self.side[i]),
            "detected": str(self.detected[i]),
            "probability": None if np.isnan(p) else round(p, 4),
            "judged": bool(self.judged[i]),
            "rejected": bool(self.wrong[i]),
        }


def check_language(
    src_texts: Sequence[str],
    tgt_texts: Sequence[str],
    *,
    src_lang: str,
    tgt_lang: str,
    src_detected: Sequence[str | None] | None = None,
    tgt_detected: Sequence[str | None] | None = None,
    src_prob: Sequence[float] | np.ndarray | None = None,
    tgt_prob: Sequence[float] | np.ndarray | None = None,
    min_prob: float = MIN_LANG_PROB,
    min_words: int = MIN_LANG_WORDS,
) -> LanguageCheck:
    """The wrong-language verdict of each pair, with what the identifier said.

    A side is wrong when its detected language (None or "" = unknown, never wrong) differs from the expected one,
    the text is ``judgeable`` and, where probabilities are given, the detected language's probability is at least
    ``min_prob``. A pair is wrong when either side is.

    Args:
        src_texts, tgt_texts: n sentences a side.
        src_lang, tgt_lang: expected language codes.
        src_detected, tgt_detected: optional n detected codes a side.
        src_prob, tgt_prob: optional (n,) probabilities of those codes (``langid.detect_with_probability``).
        min_prob: probability a rejection needs, in [0, 1].
        min_words: content words a text needs to be judged (``judgeable``).
    """
    n = len(src_texts)
    if not 0.0 <= min_prob <= 1.0:
        raise ValueError(f"min_prob must be in [0, 1], got {min_prob}")
    wrong = np.zeros(n, dtype=bool)
    side = np.full(n, "", dtype=object)
    detected_out = np.full(n, "", dtype=object)
    probability = np.full(n, np.nan)
    judged = np.zeros(n, dtype=bool)
    # The target first, so the source's verdict overwrites it where both sides differ.
    sides = (("tgt", tgt_texts, tgt_lang, tgt_detected, tgt_prob), ("src", src_texts, src_lang, src_detected, src_prob))
    for name, texts, lang, detected, prob in sides:
        if detected is None:
            continue
        if len(detected) != n:
            raise ValueError(f"{name}_detected has {len(detected)} entries, expected {n}")
        p = np.full(n, np.nan) if prob is None else np.asarray(prob, dtype=np.float64)
        if p.shape != (n,):
            raise ValueError(f"{name}_prob has shape {p.shape}, expected ({n},)")
        differs = np.array([bool(d) and d != lang for d in detected], dtype=bool)
        for i in np.flatnonzero(differs):
            ok_len = judgeable(texts[i], min_words=min_words)
            sure = bool(np.isnan(p[i]) or p[i] >= min_prob)
            side[i], detected_out[i], probability[i], judged[i] = name, detected[i], p[i], ok_len
            wrong[i] |= ok_len and sure
    return LanguageCheck(wrong=wrong, side=side, detected=detected_out, probability=probability, judged=judged)


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
    src_lang_prob: Sequence[float] | np.ndarray | None = None,
    tgt_lang_prob: Sequence[float] | np.ndarray | None = None,
    min_lang_prob: float = MIN_LANG_PROB,
    min_lang_words: int = MIN_LANG_WORDS,
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
        src_lang_prob, tgt_lang_prob: optional n probabilities of the detected languages; see ``check_language``
            (which also gives the detected language and probability behind each rejection, for the evidence).
        min_lang_prob: probability a wrong-language rejection needs (when probabilities are given).
        min_lang_words: content words a side needs before its language is judged (``judgeable``).
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
    wrong = check_language(
        src_texts,
        tgt_texts,
        src_lang=src_lang,
        tgt_lang=tgt_lang,
        src_detected=src_detected,
        tgt_detected=tgt_detected,
        src_prob=src_lang_prob,
        tgt_prob=tgt_lang_prob,
        min_prob=min_lang_prob,
        min_words=min_lang_words,
    ).wrong
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
