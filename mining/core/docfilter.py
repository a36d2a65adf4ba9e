"""A cheap pre-filter for candidate document pairs (Afli et al. 2017; see docs/METHODS-NOTES.md).

Translations keep roughly their original's length and carry over its numbers and many of its names. For a
(source document, target document) pair the filter compares:
- the sentence counts and the word counts: min / max of the two (1 = equal);
- the numbers (runs of digits not inside a word, so "1,000" and "1 000" agree) and the names (capitalised words
  that do not open a sentence, all-caps words, URLs, e-mail addresses): |A & B| / max(|A|, |B|) over the two
  documents' sets, NaN when the larger set has fewer than `min_entities` members (too little evidence to judge: the
  test is skipped).

A pair fails when one of them is below its threshold (`PrefilterThresholds`); the first failing rule names the pair's
reason. `learn_thresholds` sets them from gold document pairs so that at least `keep` of those pass;
`DEFAULT_THRESHOLDS` were chosen on the bench collections (see the constant). Text features are extracted once per
document (`document_stats`), then any set of pairs is scored from two sparse token-count matrices.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np
from scipy import sparse

N_BUCKETS = 1 << 22  # hashed token ids (crc32); collisions between a document pair's few names are negligible

_NUMBER = re.compile(r"(?<!\w)\d+(?!\w)")  # digit runs not glued to letters ("v2", "H2O" are names)
_URL = re.compile(r"(?:https?://|www\.)[^\s<>\"')\]]+|[\w.+-]+@[\w-]+\.[\w.-]+", re.IGNORECASE)
_WORD = re.compile(r"\w+(?:[-'’.]\w+)*")


@dataclass(frozen=True)
class DocStats:
    """Per-document features of one side.

    Attributes:
        n_sentences: (n_docs,) int64.
        n_words: (n_docs,) int64 word tokens.
        numbers: (n_docs, N_BUCKETS) CSR, 1 where the document holds that number (hashed).
        names: (n_docs, N_BUCKETS) CSR, 1 where the document holds that name or URL (hashed).
    """

    n_sentences: np.ndarray
    n_words: np.ndarray
    numbers: sparse.csr_matrix
    names: sparse.csr_matrix

    @property
    def n_docs(self) -> int:
        return len(self.n_sentences)


def _hash(token: str) -> int:
    return zlib.crc32(token.encode("utf-8", "surrogatepass")) % N_BUCKETS


def _names(sentence: str) -> set[str]:
    """URLs and e-mail addresses, all-caps words, and capitalised words other than the sentence's first word."""
    out = {m.group(0).rstrip(".,;:").lower() for m in _URL.finditer(sentence)}
    rest = _URL.sub(" ", sentence)
    for i, m in enumerate(_WORD.finditer(rest)):
        w = m.group(0)
        if not w[0].isupper() or w.isdigit():
            continue
        if i > 0 or (len(w) > 1 and w.isupper()):
            out.add(w)
    return out


def _binary_rows(sets: list[set[int]]) -> sparse.csr_matrix:
    indptr = np.zeros(len(sets) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(s) for s in sets])
    indices = np.fromiter((i for s in sets for i in sorted(s)), dtype=np.int64, count=int(indptr[-1]))
    data = np.ones(len(indices), dtype=np.float32)
    return sparse.csr_matrix((data, indices, indptr), shape=(len(sets), N_BUCKETS))


def document_stats(sentences: Sequence[str], offsets: np.ndarray) -> DocStats:
    """Features of each document (document i owns sentences[offsets[i]:offsets[i + 1]]).

    Args:
        sentences: the flat sentence texts of one side.
        offsets: (n_docs + 1,) int64, from 0 to len(sentences), non-decreasing.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    if offsets.ndim != 1 or len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(sentences):
        raise ValueError(f"offsets must run from 0 to {len(sentences)} sentences")
    n_docs = len(offsets) - 1
    n_words = np.zeros(n_docs, dtype=np.int64)
    numbers: list[set[int]] = []
    names: list[set[int]] = []
    for d in range(n_docs):
        nums: set[int] = set()
        nams: set[int] = set()
        words = 0
        for s in sentences[offsets[d] : offsets[d + 1]]:
            words += len(_WORD.findall(s))
            nums.update(_hash(x.lstrip("0") or "0") for x in _NUMBER.findall(s))
            nams.update(_hash(x) for x in _names(s))
        n_words[d] = words
        numbers.append(nums)
        names.append(nams)
    return DocStats(np.diff(offsets), n_words, _binary_rows(numbers), _binary_rows(names))


@dataclass(frozen=True)
class PairFeatures:
    """The pre-filter's features of m document pairs; each (m,) float64 (overlaps NaN where not judged)."""

    sentence_ratio: np.ndarray
    word_ratio: np.ndarray
    number_overlap: np.ndarray
    name_overlap: np.ndarray

    def __len__(self) -> int:
        return len(self.sentence_ratio)

    def take(self, rows: np.ndarray) -> PairFeatures:
        return PairFeatures(*(getattr(self, f.name)[rows] for f in fields(self)))

    def as_dicts(self) -> list[dict[str, float | None]]:
        """One {feature: value (4 decimals) or None} per pair, for a pair's evidence."""
        cols = [(f.name, getattr(self, f.name)) for f in fields(self)]
        return [
            {name: (None if np.isnan(col[i]) else round(float(col[i]), 4)) for name, col in cols}
            for i in range(len(self))
        ]


def _ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    hi = np.maximum(a, b)
    return np.divide(np.minimum(a, b), hi, out=np.ones_like(hi), where=hi > 0)


def _set_sizes(m: sparse.csr_matrix) -> np.ndarray:
    return np.diff(m.indptr).astype(np.float64)


def _overlap(a: sparse.csr_matrix, b: sparse.csr_matrix, s: np.ndarray, t: np.ndarray, min_entities: int) -> np.ndarray:
    """|A & B| / max(|A|, |B|) for pairs (s[i], t[i]); NaN where max(|A|, |B|) < min_entities."""
    common = np.asarray(a[s].multiply(b[t]).sum(axis=1), dtype=np.float64).ravel()
    hi = np.maximum(_set_sizes(a)[s], _set_sizes(b)[t])
    out = np.full(len(s), np.nan)
    ok = hi >= max(min_entities, 1)
    out[ok] = common[ok] / hi[ok]
    return out


def pair_features(
    src: DocStats, tgt: DocStats, src_idx: np.ndarray, tgt_idx: np.ndarray, *, min_entities: int = 3
) -> PairFeatures:
    """Features of the pairs (src_idx[i], tgt_idx[i]); (m,) int indices into each side's documents."""
    s = np.asarray(src_idx, dtype=np.int64)
    t = np.asarray(tgt_idx, dtype=np.int64)
    if s.shape != t.shape or s.ndim != 1:
        raise ValueError(f"src_idx and tgt_idx must be 1-d of one length, got {s.shape} and {t.shape}")
    return PairFeatures(
        _ratio(src.n_sentences[s], tgt.n_sentences[t]),
        _ratio(src.n_words[s], tgt.n_words[t]),
        _overlap(src.numbers, tgt.numbers, s, t, min_entities),
        _overlap(src.names, tgt.names, s, t, min_entities),
    )


# The rule each feature's threshold enforces, in the order they are checked (a pair's reason is the first that fails).
RULES = ("sentence_ratio", "word_ratio", "number_overlap", "name_overlap")


@dataclass(frozen=True)
class PrefilterThresholds:
    """A pair passes when every feature is at least its threshold (NaN overlaps pass: not judged).

    `source` says where the values come from ("default" or "learnt on N gold pairs")."""

    sentence_ratio: float = 0.0
    word_ratio: float = 0.0
    number_overlap: float = 0.0
    name_overlap: float = 0.0
    min_entities: int = 3
    source: str = "default"

    def __post_init__(self) -> None:
        for rule in RULES:
            value = getattr(self, rule)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"pre-filter threshold {rule} must be in [0, 1], got {value}")
        if self.min_entities < 1:
            raise ValueError(f"min_entities must be >= 1, got {self.min_entities}")

    def reasons(self, features: PairFeatures) -> np.ndarray:
        """(m,) object array: the first rule each pair fails, '' where it passes."""
        out = np.full(len(features), "", dtype=object)
        for rule in reversed(RULES):  # reversed: the first rule in RULES wins
            out[getattr(features, rule) < getattr(self, rule)] = rule  # NaN < x is False: not judged passes
        return out

    def passes(self, features: PairFeatures) -> np.ndarray:
        """(m,) bool: which pairs pass every rule."""
        return self.reasons(features) == ""

    def as_dict(self) -> dict[str, float | int | str]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# Defaults measured on the bench collections (2026-11-25; the GIMP manual's test half, 343 page pairs, and the man
# pages, 537 en-fr / 286 en-es, each on its own sentence splits and re-split by the app's splitter): >= 99.63 % of
# true pairs kept on every one, 29-40 % of all source x target pairs pruned. The sentence-count ratio is off by
# default: the count depends on the splitter, and re-splitting collapses some pages (a table becomes one sentence)
# down to a ratio of 0.018 against their translation, so a sentence-ratio default of 0.12 kept only 99.42 % of the
# re-split manual's pairs (0.08: 99.71 %) while pruning under 1 % more. A word ratio of 0.25 would prune 6 points
# more but leaves the man pages en-fr a margin of 0.016 (their second-lowest true pair is at 0.266); 0.2 / 0.35 / 0.1
# kept only 98.3-98.5 % of the man pages' pairs (their English originals are sometimes newer than the translations).
# Names are not enforced by default: translators rewrite capitalised UI labels ("Layer" -> "Calque"), and the man
# pages' true pairs share as little as 2 % of their names. Gold document pairs replace all of this
# (`learn_thresholds`).
DEFAULT_THRESHOLDS = PrefilterThresholds(sentence_ratio=0.0, word_ratio=0.2, number_overlap=0.05, name_overlap=0.0)


def learn_thresholds(
    features: PairFeatures,
    *,
    keep: float = 0.995,
    slack: float = 0.4,
    min_pairs: int = 50,
    default: PrefilterThresholds = DEFAULT_THRESHOLDS,
) -> PrefilterThresholds:
    """Thresholds from the features of gold (true) document pairs: each rule at the (1 - keep) / 4 quantile of its
    judged values times `slack` (so, by the union bound, >= keep of these pairs pass, with room for unseen ones).

    With fewer than `min_pairs` pairs the quantiles mean little: `default` is returned.

    `slack` measured (2026-11-25): learnt on a seeded half of a collection's true pairs and applied to the other half
    (three seeds; GIMP manual and man pages, en-fr and en-es, clean and re-split), 0.8 kept as few as 98.2 % of them,
    0.5 99.3 %, 0.4 at least 99.4 % (the re-split manual's two collapsed pages) and 99.6 % elsewhere.
    """
    if not 0.0 < keep <= 1.0 or not 0.0 < slack <= 1.0:
        raise ValueError(f"keep and slack must be in (0, 1], got {keep} and {slack}")
    if len(features) < min_pairs:
        return default
    q = (1.0 - keep) / len(RULES)
    values = {}
    for rule in RULES:
        col = getattr(features, rule)
        col = col[~np.isnan(col)]
        values[rule] = float(np.clip(np.quantile(col, q) * slack, 0.0, 1.0)) if len(col) >= min_pairs else 0.0
    return PrefilterThresholds(**values, min_entities=default.min_entities, source=f"learnt on {len(features)} pairs")


def _all_pairs_features(src: DocStats, tgt: DocStats, s_block: np.ndarray, min_entities: int) -> PairFeatures:
    """Features of every (s, t) with s in s_block and t any target document, row-major ((len(s_block) * n_tgt,))."""
    n_t = tgt.n_docs
    s = np.repeat(s_block, n_t)
    t = np.tile(np.arange(n_t, dtype=np.int64), len(s_block))

    def overlap(a: sparse.csr_matrix, b: sparse.csr_matrix) -> np.ndarray:
        common = np.asarray((a[s_block] @ b.T).todense(), dtype=np.float64).ravel()
        hi = np.maximum(_set_sizes(a)[s], _set_sizes(b)[t])
        out = np.full(len(s), np.nan)
        ok = hi >= max(min_entities, 1)
        out[ok] = common[ok] / hi[ok]
        return out

    return PairFeatures(
        _ratio(src.n_sentences[s], tgt.n_sentences[t]),
        _ratio(src.n_words[s], tgt.n_words[t]),
        overlap(src.numbers, tgt.numbers),
        overlap(src.names, tgt.names),
    )


def surviving_pairs(
    src: DocStats, tgt: DocStats, thresholds: PrefilterThresholds, *, block: int = 256
) -> tuple[np.ndarray, np.ndarray]:
    """Every (source, target) pair that passes, the filter used alone: ((p,), (p,)) int64 indices, by source then
    target. Computed `block` source documents at a time: memory is O(block * n_tgt)."""
    out_s, out_t = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for i0 in range(0, src.n_docs, block):
        s_block = np.arange(i0, min(i0 + block, src.n_docs), dtype=np.int64)
        ok = thresholds.passes(_all_pairs_features(src, tgt, s_block, thresholds.min_entities))
        rows = np.flatnonzero(ok)
        out_s.append(s_block[rows // max(tgt.n_docs, 1)])
        out_t.append(rows % max(tgt.n_docs, 1))
    return np.concatenate(out_s), np.concatenate(out_t).astype(np.int64)
