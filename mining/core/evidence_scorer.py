"""A pair scorer trained without gold: logistic regression on [margin score, cosine, evidence features], with a run's
own confident pairs (self-training's, ``selftrain_pairs.confident_pairs``) as positives and pairs that are false by
construction as negatives (``NegativeKind``).

Negatives:
- ``SHUFFLED``: each confident source with the target of another confident pair (a seeded derangement);
- ``NEIGHBOUR``: each confident source with its next-best target in the kNN list (hard: it scores like the false pairs
  a run keeps, the same passage with another number or name);
- ``DECOY``: a source's best match in a disjoint collection of target-language sentences (the caller mines them).

The margin and cosine of a negative are the same functions of the same neighbourhood means as a candidate's
(``pair_margin``), so the model sees them on the scale it scores candidates on.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from mining.core.enums import Margin
from mining.core.margin import margin_score


class NegativeKind(enum.Enum):
    SHUFFLED = "shuffled"
    NEIGHBOUR = "neighbour"
    DECOY = "decoy"


def pair_margin(
    src: np.ndarray,
    tgt: np.ndarray,
    src_idx: np.ndarray,
    tgt_idx: np.ndarray,
    fwd_mean: np.ndarray,
    bwd_mean: np.ndarray,
    margin: Margin,
) -> tuple[np.ndarray, np.ndarray]:
    """(cosine, margin score) of arbitrary pairs.

    Args:
        src: (n_src, d) float32 unit rows; tgt: (n_tgt, d) likewise.
        src_idx, tgt_idx: (m,) int64 pair rows.
        fwd_mean: (n_src,) each source's mean kNN similarity; bwd_mean: (n_tgt,) each target's.
        margin: the run's margin.

    Returns:
        Two (m,) float32 arrays.
    """
    cos = np.einsum("ij,ij->i", src[src_idx], tgt[tgt_idx]).astype(np.float32)
    return cos, margin_score(cos, fwd_mean[src_idx], bwd_mean[tgt_idx], margin)


def shuffled_negatives(src_idx: np.ndarray, tgt_idx: np.ndarray, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Each source of (src_idx, tgt_idx) with another pair's target (a seeded cyclic shift of a permutation, so no
    pair keeps its own target). Fewer than two pairs: empty."""
    m = len(src_idx)
    if m < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    perm = np.random.default_rng(seed).permutation(m)
    return np.asarray(src_idx)[perm], np.asarray(tgt_idx)[np.roll(perm, 1)]


def neighbour_negatives(src_idx: np.ndarray, tgt_idx: np.ndarray, fwd_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each source with the first target in its kNN list (fwd_ids, (n_src, k) int64, -1 = none) that is not its
    pair's target; sources with none are dropped."""
    ids = fwd_ids[np.asarray(src_idx)]
    other = (ids >= 0) & (ids != np.asarray(tgt_idx)[:, None])
    has = other.any(axis=1)
    first = other.argmax(axis=1)
    return np.asarray(src_idx)[has], ids[np.flatnonzero(has), first[has]]


@dataclass(frozen=True)
class LogisticModel:
    """A fitted logistic regression on standardised features.

    Attributes:
        mean, scale: (f,) the training features' mean and standard deviation (1 where constant).
        coef: (f,) weights on the standardised features; intercept: the bias.
        names: the f feature names.
    """

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    names: tuple[str, ...]

    def logit(self, x: np.ndarray) -> np.ndarray:
        """(n,) float64 log-odds of (n, f) features."""
        return ((np.asarray(x, dtype=np.float64) - self.mean) / self.scale) @ self.coef + self.intercept

    def probability(self, x: np.ndarray) -> np.ndarray:
        """(n,) float64 probabilities of (n, f) features."""
        return 1.0 / (1.0 + np.exp(-self.logit(x)))


def fit_logistic(
    x: np.ndarray, y: np.ndarray, *, l2: float = 1.0, names: tuple[str, ...] = (), iterations: int = 50
) -> LogisticModel:
    """L2-regularised logistic regression by Newton's method (IRLS), classes weighted to equal total weight.

    Args:
        x: (n, f) float features; y: (n,) bool labels (both classes present).
        l2: penalty on the standardised weights (not the intercept), as a sum over the n examples' mean loss * n.
        names: feature names to carry.
        iterations: Newton steps at most (stops when the step is below 1e-8).
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=bool)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"x must be (n, f) and y (n,), got {x.shape} and {y.shape}")
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError("both classes are needed")
    if l2 < 0:
        raise ValueError(f"l2 must be >= 0, got {l2}")
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    w_obs = np.where(y, len(y) / (2 * n_pos), len(y) / (2 * n_neg))
    t = y.astype(np.float64)
    beta = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2)
    penalty[-1] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ beta, -30, 30)))
        grad = z.T @ (w_obs * (p - t)) + penalty * beta
        hess = (z * (w_obs * p * (1 - p))[:, None]).T @ z + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return LogisticModel(mean=mean, scale=scale, coef=beta[:-1], intercept=float(beta[-1]), names=tuple(names))


def expected_f1_count(probability: np.ndarray) -> int:
    """How many of the pairs, best first, to keep to maximise the F1 their own probabilities expect
    (expected true kept = cumulative sum, expected true overall = the sum). Input: (n,) sorted descending."""
    p = np.asarray(probability, dtype=np.float64)
    if p.size == 0:
        return 0
    tp = np.cumsum(p)
    f1 = 2 * tp / (np.arange(1, p.size + 1) + p.sum())
    return int(np.argmax(f1)) + 1


NEIGHBOURHOOD_FEATURES: tuple[str, ...] = ("ratio_k4", "distance_k16", "gap_src", "gap_tgt")


def neighbourhood_features(
    cos: np.ndarray,
    src_idx: np.ndarray,
    tgt_idx: np.ndarray,
    fwd_sims: np.ndarray,
    fwd_ids: np.ndarray,
    bwd_sims: np.ndarray,
    bwd_ids: np.ndarray,
) -> np.ndarray:
    """The encoder's view of pairs beyond the run's margin: the ratio margin at k = 4, the distance margin at k = 16
    (both clipped to the lists' width), and how far each pair's cosine stands above the best other neighbour of its
    source (``gap_src``) and of its target (``gap_tgt``; 0 when the list holds no other).

    Args:
        cos: (m,) the pairs' cosines; src_idx, tgt_idx: (m,) int64 rows.
        fwd_sims, fwd_ids: (n_src, K) each source's neighbours (descending, -1 = none); bwd_*: (n_tgt, K) likewise.

    Returns:
        (m, 4) float64, columns NEIGHBOURHOOD_FEATURES.
    """
    cos = np.asarray(cos, dtype=np.float64)
    s, t = np.asarray(src_idx), np.asarray(tgt_idx)
    f_valid, b_valid = fwd_ids >= 0, bwd_ids >= 0

    def mean(sims: np.ndarray, valid: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:
        head, ok = sims[rows, :k], valid[rows, :k]
        return np.where(ok, head, 0.0).sum(axis=1) / np.maximum(ok.sum(axis=1), 1)

    def gap(sims: np.ndarray, ids: np.ndarray, rows: np.ndarray, other: np.ndarray) -> np.ndarray:
        rival = np.where((ids[rows] >= 0) & (ids[rows] != other[:, None]), sims[rows], -np.inf).max(axis=1)
        return np.where(np.isfinite(rival), cos - rival, 0.0)

    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = cos / (mean(fwd_sims, f_valid, s, 4) / 2 + mean(bwd_sims, b_valid, t, 4) / 2)
    distance = cos - (mean(fwd_sims, f_valid, s, 16) / 2 + mean(bwd_sims, b_valid, t, 16) / 2)
    return np.column_stack([ratio, distance, gap(fwd_sims, fwd_ids, s, t), gap(bwd_sims, bwd_ids, t, s)])
