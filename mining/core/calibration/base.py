"""The calibrator interface shared by the head and the baselines, and the score it reads."""

from __future__ import annotations

import enum
from typing import Protocol, Self

import numpy as np


class ScoreFeature(enum.Enum):
    """Which stored pair score a calibrator reads as phi(x, y)."""

    MARGIN = "margin"
    COSINE = "cosine"


class Calibrator(Protocol):
    """Maps (source embedding, pair score) to a confidence in [0, 1].

    Baselines ignore ``u`` (it may be None); the head needs it.
    """

    def fit(
        self,
        u: np.ndarray | None,
        phi: np.ndarray,
        labels: np.ndarray,
        sample_weight: np.ndarray | None = None,
        seed: int = 0,
    ) -> Self:
        """Fit on (n, d) source embeddings, (n,) scores and (n,) 0/1 labels; returns self."""
        ...

    def predict(self, u: np.ndarray | None, phi: np.ndarray) -> np.ndarray:
        """(n,) float32 confidences."""
        ...


def as_scores(phi: np.ndarray, name: str = "phi") -> np.ndarray:
    """Check ``phi`` is a finite 1-d array and return it as float64 (a copy when converted)."""
    s = np.asarray(phi, dtype=np.float64)
    if s.ndim != 1:
        raise ValueError(f"{name} must be 1-d, got shape {s.shape}")
    if not np.all(np.isfinite(s)):
        raise ValueError(f"{name} must be finite")
    return s
