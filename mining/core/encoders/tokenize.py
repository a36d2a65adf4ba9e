"""Fast tokenisation and stable feature hashing for the DAN encoder.

A sentence becomes its lower-cased word unigrams plus (by default) its word bigrams, each hashed into one of
``n_buckets`` rows of an embedding table; without bigrams the features ignore word order (a bag of words).
Optionally each word also contributes its character n-grams (fastText's subwords: the n-grams of ``<word>``), so
words that share a stem or the parts of a compound ("Uhrzeigersinn", "Uhrzeigersinns") share features.
Token hashes are 64-bit BLAKE2b digests (stable across processes and machines, unlike ``hash()``), memoised per
distinct token; bigram hashes are mixed from the two unigram hashes in numpy, so the per-token Python work is one
regex match and one dict lookup.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# Scripts written without spaces (Thai, kana, CJK ideographs) are split into single characters, whose
# unigrams and bigrams then play the role of words; everything else splits into \w+ runs and punctuation.
_NO_SPACE = "\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN_RE = re.compile(rf"[{_NO_SPACE}]|[^\W{_NO_SPACE}]+|[^\w\s]")

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def tokenize(text: str) -> list[str]:
    """Lower-cased unicode word tokens and punctuation marks of ``text``."""
    return _TOKEN_RE.findall(text.lower())


def _splitmix(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser over a uint64 array (wrapping arithmetic), returning a new array."""
    x = x ^ (x >> np.uint64(30))
    x *= _MIX1
    x ^= x >> np.uint64(27)
    x *= _MIX2
    x ^= x >> np.uint64(31)
    return x


class _HashCache(dict):
    """token -> stable 64-bit hash, computed on first use."""

    def __missing__(self, token: str) -> int:
        value = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")
        self[token] = value
        return value


@dataclass(frozen=True)
class HashedBatch:
    """Hashed features of n sentences in CSR layout (each sentence's unigrams, then its bigrams).

    Attributes:
        ids: (nnz,) int64 bucket ids in [0, n_buckets).
        offsets: (n + 1,) int64; sentence i owns ``ids[offsets[i]:offsets[i + 1]]``.
    """

    ids: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def counts(self) -> np.ndarray:
        """(n,) int64 number of features per sentence."""
        return np.diff(self.offsets)

    def take(self, rows: np.ndarray) -> HashedBatch:
        """The sub-batch of the given sentence indices, in that order (vectorised gather)."""
        rows = np.asarray(rows, dtype=np.int64)
        starts = self.offsets[rows]
        counts = self.offsets[rows + 1] - starts
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        src = np.repeat(starts - offsets[:-1], counts) + np.arange(offsets[-1], dtype=np.int64)
        return HashedBatch(self.ids[src], offsets)


class FeatureHasher:
    """Turns sentences into hashed unigram (+ bigram) bucket ids.

    Args:
        n_buckets: rows of the embedding table the ids index.
        max_cache: distinct tokens memoised before the cache is reset (bounds memory on huge corpora).
        bigrams: also hash word bigrams (False: unigrams only, so word order is ignored).
        char_ngrams: lengths of the character n-grams of ``<word>`` each word of two or more letters adds after
            the sentence's words and bigrams (empty: none).
    """

    def __init__(
        self, n_buckets: int, max_cache: int = 2_000_000, *, bigrams: bool = True, char_ngrams: Sequence[int] = ()
    ) -> None:
        if n_buckets < 2:
            raise ValueError(f"n_buckets must be >= 2, got {n_buckets}")
        if any(int(n) < 2 for n in char_ngrams):
            raise ValueError(f"character n-gram lengths must be >= 2, got {tuple(char_ngrams)}")
        self.n_buckets = n_buckets
        self.max_cache = max_cache
        self.bigrams = bigrams
        self.char_ngrams = tuple(sorted({int(n) for n in char_ngrams}))
        self._cache = _HashCache()
        self._subwords = _SubwordCache(self)

    def token_hashes(self, tokens: Sequence[str]) -> np.ndarray:
        """(len(tokens),) uint64 stable hashes."""
        if len(self._cache) > self.max_cache:
            self._cache.clear()
            self._subwords.clear()
        return np.fromiter(map(self._cache.__getitem__, tokens), dtype=np.uint64, count=len(tokens))

    def subword_ids(self, token: str) -> np.ndarray:
        """(m,) int64 bucket ids of the character n-grams of ``<token>`` (none for punctuation, digits-only tokens
        and tokens of one character)."""
        return self._subwords[token]

    def __call__(self, texts: Sequence[str]) -> HashedBatch:
        """Hash the features of ``texts`` (n strings) into a ``HashedBatch``."""
        token_lists = [tokenize(t) for t in texts]
        lengths = np.fromiter(map(len, token_lists), dtype=np.int64, count=len(token_lists))
        tokens = list(itertools.chain.from_iterable(token_lists))
        words = self._word_features(lengths, tokens)
        if not self.char_ngrams:
            return words
        subs = [self._subwords[t] for t in tokens]
        per_token = np.fromiter(map(len, subs), dtype=np.int64, count=len(subs))
        sent_of_token = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        sub_offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(
            np.bincount(sent_of_token, weights=per_token, minlength=len(lengths)).astype(np.int64), out=sub_offsets[1:]
        )
        sub_ids = np.concatenate(subs) if subs else np.zeros(0, dtype=np.int64)
        return _concat_rows(words, HashedBatch(sub_ids, sub_offsets))

    def _word_features(self, lengths: np.ndarray, tokens: list[str]) -> HashedBatch:
        """Each sentence's unigram ids, then its bigram ids (`lengths`: tokens per sentence; `tokens`: all of them
        in order)."""
        hashes = self.token_hashes(tokens)
        buckets = np.uint64(self.n_buckets)
        if not self.bigrams:
            offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            return HashedBatch((hashes % buckets).astype(np.int64), offsets)
        n, total = len(lengths), int(lengths.sum())
        tok_start = np.zeros(n, dtype=np.int64)
        np.cumsum(lengths[:-1], out=tok_start[1:])
        # A bigram starts at every token but the last of its sentence.
        starts_bigram = np.ones(total, dtype=bool)
        starts_bigram[(tok_start + lengths - 1)[lengths > 0]] = False
        first = np.flatnonzero(starts_bigram)
        bigram_hashes = _splitmix(hashes[first] * _GOLDEN + _splitmix(hashes[first + 1]))
        n_bigrams = np.maximum(lengths - 1, 0)
        counts = lengths + n_bigrams
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        ids = np.empty(offsets[-1], dtype=np.int64)
        # Unigram j of sentence s goes to offsets[s] + j; bigram j to offsets[s] + lengths[s] + j.
        sent_of_token = np.repeat(np.arange(n, dtype=np.int64), lengths)
        tok_pos = np.arange(total, dtype=np.int64) - tok_start[sent_of_token]
        ids[offsets[:-1][sent_of_token] + tok_pos] = (hashes % buckets).astype(np.int64)
        sent_of_bigram = sent_of_token[first]
        bi_pos = tok_pos[first]
        ids[offsets[:-1][sent_of_bigram] + lengths[sent_of_bigram] + bi_pos] = (bigram_hashes % buckets).astype(
            np.int64
        )
        return HashedBatch(ids, offsets)


class _SubwordCache(dict):
    """token -> (m,) int64 bucket ids of its character n-grams, computed on first use."""

    _SALT = "\x00"  # prefixed to every n-gram, so the n-gram "cat" of "<cats>" does not share the word "cat"'s row

    def __init__(self, hasher: FeatureHasher) -> None:
        super().__init__()
        self._hasher = hasher

    def __missing__(self, token: str) -> np.ndarray:
        value = np.zeros(0, dtype=np.int64)
        if len(token) > 1 and token.isalnum() and not token.isdigit():
            marked = f"<{token}>"
            grams = [
                self._SALT + marked[i : i + n] for n in self._hasher.char_ngrams for i in range(len(marked) - n + 1)
            ]
            hashes = np.fromiter(map(self._hasher._cache.__getitem__, grams), dtype=np.uint64, count=len(grams))
            value = (hashes % np.uint64(self._hasher.n_buckets)).astype(np.int64)
        self[token] = value
        return value


def _concat_rows(a: HashedBatch, b: HashedBatch) -> HashedBatch:
    """Row i of the result is row i of `a` followed by row i of `b` (both batches of n rows)."""
    counts_a, counts_b = a.counts, b.counts
    offsets = np.zeros(len(a) + 1, dtype=np.int64)
    np.cumsum(counts_a + counts_b, out=offsets[1:])
    ids = np.empty(offsets[-1], dtype=np.int64)
    row_a = np.repeat(np.arange(len(a), dtype=np.int64), counts_a)
    row_b = np.repeat(np.arange(len(b), dtype=np.int64), counts_b)
    ids[offsets[:-1][row_a] + np.arange(len(a.ids), dtype=np.int64) - a.offsets[:-1][row_a]] = a.ids
    ids[offsets[:-1][row_b] + counts_a[row_b] + np.arange(len(b.ids), dtype=np.int64) - b.offsets[:-1][row_b]] = b.ids
    return HashedBatch(ids, offsets)
