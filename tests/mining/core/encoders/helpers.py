"""Tiny encoders and a toy bitext for the encoder tests."""

from __future__ import annotations

import numpy as np

from mining.core.encoders.base import SentenceEncoder


class TableEncoder(SentenceEncoder):
    """Looks each text up in a fixed {text: vector} table (any norm); an unknown text is an error."""

    def __init__(self, name: str, table: dict[str, np.ndarray], languages: frozenset[str] | None) -> None:
        self.name = name
        self.table = table
        self.dim = len(next(iter(table.values())))
        self.languages = languages
        self.calls = 0

    def _encode(self, texts, lang, *, batch_size, progress):
        self.calls += 1
        for stop in range(batch_size, len(texts) + batch_size, batch_size):
            if progress is not None:
                progress(min(stop, len(texts)), len(texts))
        return np.stack([self.table[t] for t in texts]).astype(np.float64)


def toy_bitext(n: int, seed: int, vocab: int = 60) -> tuple[list[str], list[str]]:
    """A toy language pair: target word t{7w mod V} translates source word s{w}; word order reversed."""
    rng = np.random.default_rng(seed)
    src, tgt = [], []
    for _ in range(n):
        words = rng.integers(0, vocab, size=rng.integers(3, 8))
        src.append(" ".join(f"s{w}" for w in words))
        tgt.append(" ".join(f"t{(w * 7) % vocab}" for w in words[::-1]))
    return src, tgt


def p_at_1(u: np.ndarray, v: np.ndarray) -> float:
    """Share of rows i whose best-scoring column is i."""
    return float(((u @ v.T).argmax(axis=1) == np.arange(len(u))).mean())
