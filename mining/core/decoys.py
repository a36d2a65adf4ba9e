"""Decoy target sentences for target-decoy precision estimates (``precision.py``).

A decoy is a sentence in the target language that cannot be a translation of any source sentence. Mined against the
source side like the real target side, decoys show what wrong pairs score on this corpus, with its near-duplicates,
boilerplate and domain, instead of an assumed curve. Two sources of decoys:

* ``sample_decoys``: sentences of a disjoint collection of the same language (another corpus, other documents of the
  same kind). Best when the collection is of the same kind as the target side; a collection of another domain gives
  decoys that score lower than the real false pairs (the estimate is then optimistic).
* ``shuffled_decoys``: the fallback that needs no extra data: each target sentence with its words in a seeded random
  order (a proteomics decoy database reverses its sequences likewise). A shuffled sentence keeps its words, length,
  numbers and names, so near-duplicates stay near-duplicates of each other and the decoys keep the target side's
  domain, but as a sentence it translates nothing. Sentences of one word are rotated by characters instead.
* ``mutated_decoys``: another fallback without extra data: each target sentence with a share of its words replaced by
  words of other target sentences and its digits changed ("Cannot open file 3" -> "Cannot close file 7"): the
  near-variant a false pair on a repetitive collection is made of.

``near_duplicates`` marks decoys that are near-copies of a real target sentence (cosine of their embeddings at or
above a cut): such a decoy is a near-translation of whatever that target translates and would take its source's pair
from the real translation, a wrong pair the run alone would not make.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

MIN_SHUFFLE_WORDS = 2
_DIGIT = re.compile(r"[0-9]")


def _key(text: str) -> str:
    return " ".join(text.casefold().split())


def shuffled_decoys(texts: Sequence[str], *, seed: int = 0) -> list[str]:
    """One decoy per target sentence: its words in a seeded random order that differs from the original wherever the
    sentence has two different words or more (a sentence of one word: its characters rotated by half).

    Args:
        texts: the target side's sentences.
        seed: the shuffle's seed (the same seed gives the same decoys).

    Returns:
        As many decoys as `texts`, in their order.
    """
    rng = np.random.default_rng(seed)
    out: list[str] = []
    for text in texts:
        words = text.split()
        if len(set(words)) < MIN_SHUFFLE_WORDS:
            half = max(1, len(text) // 2)
            out.append(text[half:] + text[:half])
            continue
        order = rng.permutation(len(words))
        if np.array_equal(order, np.arange(len(words))):
            order = np.roll(order, 1)
        out.append(" ".join(words[i] for i in order))
    return out


def sample_decoys(pool: Sequence[str], *, n: int, exclude: Sequence[str] = (), seed: int = 0) -> list[str]:
    """Up to `n` distinct sentences of a disjoint collection, none equal (case and spacing aside) to a sentence of
    `exclude` (the target side: a sentence both sides hold is no decoy).

    Args:
        pool: the decoy collection's sentences in the target language.
        n: how many to draw (the target side's size, so that a source's best decoy competes with as many sentences
            as its best real target).
        exclude: sentences that must not become decoys.
        seed: the draw's seed.

    Returns:
        min(n, distinct usable sentences) decoys, in a seeded random order.

    Raises:
        ValueError: n < 1.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    banned = {_key(t) for t in exclude}
    seen: set[str] = set()
    usable: list[str] = []
    for text in pool:
        key = _key(text)
        if key and key not in banned and key not in seen:
            seen.add(key)
            usable.append(text)
    order = np.random.default_rng(seed).permutation(len(usable))[:n]
    return [usable[i] for i in order]


def mutated_decoys(texts: Sequence[str], *, rate: float, seed: int = 0) -> list[str]:
    """One decoy per target sentence: round(rate * words) of its words (at least one) replaced by distinct words drawn
    uniformly from the whole side's vocabulary (never by the word itself), and every digit changed to another digit.

    Args:
        texts: the target side's sentences.
        rate: the share of each sentence's words replaced, in (0, 1].
        seed: the draw's seed (the same seed gives the same decoys).

    Returns:
        As many decoys as `texts`, in their order; an empty sentence stays empty.

    Raises:
        ValueError: rate outside (0, 1].
    """
    if not 0.0 < rate <= 1.0:
        raise ValueError(f"rate must be in (0, 1], got {rate}")
    rng = np.random.default_rng(seed)
    vocab = sorted({w for t in texts for w in t.split()})
    out: list[str] = []
    for text in texts:
        words = text.split()
        if not words:
            out.append(text)
            continue
        n = min(len(words), max(1, round(rate * len(words))))
        for i in rng.choice(len(words), size=n, replace=False):
            if len(vocab) > 1:
                new = vocab[int(rng.integers(len(vocab)))]
                while new == words[i]:
                    new = vocab[int(rng.integers(len(vocab)))]
                words[i] = new
        changed = " ".join(words)
        digits = rng.integers(1, 10, size=len(changed))  # a shift of 1-9 never gives the same digit back
        out.append(_DIGIT.sub(lambda m, d=digits: str((int(m.group()) + int(d[m.start()])) % 10), changed))
    return out


def nearest_similarity(
    rows: np.ndarray, others: np.ndarray, *, self_index: np.ndarray | None = None, batch: int = 4096
) -> np.ndarray:
    """Each row's highest cosine to `others`.

    Args:
        rows: (n, d) float, rows L2-normalised.
        others: (m, d) float, rows L2-normalised.
        self_index: (n,) int, where `rows` are rows of `others`: row i's own row in `others`, which does not count.
        batch: rows per block (memory: batch * m floats).

    Returns:
        (n,) float32; -inf where there is nothing to compare with.

    Raises:
        ValueError: shapes that do not match.
    """
    a = np.asarray(rows, dtype=np.float32)
    o = np.asarray(others, dtype=np.float32)
    if a.ndim != 2 or o.ndim != 2 or (len(o) and a.shape[1] != o.shape[1]):
        raise ValueError(f"embeddings must be 2-d with one width, got {a.shape} and {o.shape}")
    own = None if self_index is None else np.asarray(self_index, dtype=np.int64)
    if own is not None and own.shape != (len(a),):
        raise ValueError(f"self_index must have one entry per row, got {own.shape} for {len(a)} rows")
    out = np.full(len(a), -np.inf, dtype=np.float32)
    if not len(o):
        return out
    for start in range(0, len(a), batch):
        block = a[start : start + batch] @ o.T
        if own is not None:
            block[np.arange(block.shape[0]), own[start : start + batch]] = -np.inf
        out[start : start + batch] = block.max(axis=1)
    return out


def near_duplicates(decoys: np.ndarray, targets: np.ndarray, *, cut: float, batch: int = 4096) -> np.ndarray:
    """Which decoys have a real target sentence at cosine >= `cut`.

    Args:
        decoys: (n_decoys, d) float, rows L2-normalised.
        targets: (n_targets, d) float, rows L2-normalised.
        cut: the cosine at or above which a decoy is a near-copy.
        batch: decoy rows per block (memory: batch * n_targets floats).

    Returns:
        (n_decoys,) bool.

    Raises:
        ValueError: shapes that do not match.
    """
    return nearest_similarity(decoys, targets, batch=batch) >= cut


def kind_weights(
    decoy_nearest: np.ndarray, target_nearest: np.ndarray, *, bins: int = 10, cap: float = 10.0
) -> np.ndarray:
    """Weights that give the decoys the target side's own spread of nearest-neighbour similarity.

    A target side full of near-duplicates has many sentences with a close neighbour among the targets; a cleaned one
    has few. Decoys of the same kind should sit as close to the targets as the targets sit to each other: each decoy
    is weighted by (share of targets) / (share of decoys) in its bin of the targets' nearest-similarity quantiles.

    Args:
        decoy_nearest: (n_decoys,) each decoy's highest cosine to a target (``nearest_similarity``).
        target_nearest: (n_targets,) each target's highest cosine to another target.
        bins: quantile bins of `target_nearest`.
        cap: the largest weight (a bin the decoys barely reach must not rest on one decoy).

    Returns:
        (n_decoys,) float64 weights summing to n_decoys.
    """
    d = np.asarray(decoy_nearest, dtype=np.float64)
    t = np.asarray(target_nearest, dtype=np.float64)
    t = t[np.isfinite(t)]
    if not len(d) or not len(t):
        return np.ones(len(d))
    edges = np.quantile(t, np.linspace(0.0, 1.0, bins + 1)[1:-1])
    bd, bt = np.searchsorted(edges, d, side="right"), np.searchsorted(edges, t, side="right")
    p_d = np.bincount(bd, minlength=bins) / len(d)
    p_t = np.bincount(bt, minlength=bins) / len(t)
    w = np.minimum(p_t[bd] / p_d[bd], cap)
    return w * (len(d) / w.sum()) if w.sum() > 0 else np.ones(len(d))


def fill_decoys(candidates: Sequence[str], banned: np.ndarray, n: int) -> list[int]:
    """The first `n` candidates (in their seeded order) that are not banned: the decoys left once near-copies go.

    Args:
        candidates: the decoy candidates, in draw order (``sample_decoys`` with a larger n).
        banned: (len(candidates),) bool, True where a candidate may not be a decoy (``near_duplicates``).
        n: how many decoys are wanted.

    Returns:
        Indices into `candidates`, at most `n`, in order.
    """
    b = np.asarray(banned, dtype=bool)
    if b.shape != (len(candidates),):
        raise ValueError(f"banned must have one flag per candidate, got {b.shape} for {len(candidates)}")
    return [int(i) for i in np.flatnonzero(~b)[:n]]
