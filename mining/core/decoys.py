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
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MIN_SHUFFLE_WORDS = 2


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
