"""The precision of a run's kept pairs estimated from decoy hits (target-decoy competition), with an interval.

The mixture of two bells (``default_threshold``) assumes what wrong pairs score. Here the corpus shows it: the source
side is mined again, with the run's margin, k, strategy and pre-filters, against the real target side *plus* decoys
(``decoys.py``: target-language sentences that translate nothing of the source side), as many decoys as real target
sentences: one search over the concatenated sides, as proteomics searches a target-decoy database. Every hit on a
decoy is a wrong pair by construction. A source whose translation is among the real targets takes it (a decoy rarely
beats a translation); a source without one takes its best wrong sentence, from the real targets or from the decoys
with equal chance when decoys are like the target side's sentences, and above a threshold high in the wrong pairs'
tail the decoy hits number about the wrong pairs the run alone keeps there (twice the sentences to lose to, half of
the hits each). So the wrong pairs among the `n_kept` pairs of the run scoring at least t are estimated as the decoy
hits scoring at least t (scaled by targets / decoys), and

    precision(t) = 1 - hits(t) * n_targets / n_decoys / n_kept(t).

The interval: the decoy hits and the run's wrong pairs are two draws of about the same Poisson count, so their
difference has twice its variance: hits +- z * sqrt(2 * (hits + 1)) (the +1 keeps a width when no decoy is hit).
That is counting noise only; the decoys are also biased (a disjoint collection is never quite of the target side's
kind), so the bounds move out by a systematic share r of the estimated wrong pairs on each side, clipped to
[0, n_kept]. r is measured, not assumed: bench/precision_estimate.py fits it leave-one-collection-out (the smallest r
whose interval covers the measured precision in 95 % of the other collections' cases) and the app ships the value
fitted on all of them (`PLAN_DISJOINT`, `PLAN_FALLBACK`; docs/BENCHMARKS.md). Where the estimate cannot be trusted
(too few pairs kept, too few decoys, no threshold) it says so in `reason` instead of giving a number.

The decoys decide the bias (bench/precision_estimate.py): sentences of a disjoint collection of the same kind give
the wrong pairs' scores as they are, near-duplicates and all (less those that are near-copies of a real target
sentence, cosine >= 0.75: a near-copy of a translation takes a true pair's place; and each hit weighted so that the
decoys sit as close to the targets as the targets sit to each other, ``decoys.kind_weights``). Shuffled target
sentences (the fallback that needs no extra data) compete less well than a near-translation does; their hits are
counted where the search with decoys keeps as many real pairs as the run (``matched_threshold``), with a much wider
systematic width: that fallback is a rough figure, and the run page says to add a corpus in the target language.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_KEPT = 30  # fewer kept pairs than this: a share of them says little
MIN_DECOY_SHARE = 0.5  # fewer decoys than this share of the target side: the competition is not even
CONFIDENCE = 0.95
METHOD = "target-decoy"


@dataclass(frozen=True)
class DecoyPlan:
    """How the app makes and counts its decoys, chosen leave-one-collection-out on bench/precision_estimate.py.

    Attributes:
        kind: "disjoint" (sentences of another collection in the target language), "shuffled" (``shuffled_decoys``)
            or "mutated" (``mutated_decoys`` at `rate`).
        cut: drop decoys with a real target sentence at cosine >= cut (``near_duplicates``), topped up from a second
            draw; None keeps every decoy.
        rank_matched: count the decoy hits at ``matched_threshold`` instead of the run's threshold.
        weighted: count each decoy hit by its ``decoys.kind_weights`` weight.
        systematic: the interval's systematic width r (``estimate_precision``).
        factor: the wrong pairs a decoy hit stands for beyond targets / decoys (``estimate_precision``).
        rate: the share of words ``mutated_decoys`` replaces.
    """

    kind: str
    cut: float | None
    rank_matched: bool
    systematic: float
    weighted: bool = False
    factor: float = 1.0
    rate: float = 0.0


# Fitted on all five bench collections (manuals, manuals-repeat, gimp, debref, catalogue x fr, de, es x ratio k = 4 and
# distance k = 16: 30 cases) by bench/precision_estimate.py, 2026-11-28; docs/BENCHMARKS.md "Precision a user can
# trust" reports the same choice made leave-one-collection-out. Disjoint decoys: of 5 near-copy cuts x 4 ways to count
# (plain, rank-matched, weighted by decoys.kind_weights, both) x a factor, the weighted count of decoys less near-copies
# at cosine 0.75 (within 5 points in 29 / 30 in-sample and 29 / 30 left out); r = 0.04 covers 29 / 30 (28 / 30 left
# out), median interval 10.4 points. Fallback: of shuffled and mutated decoys, shuffled with the rank-matched count;
# r = 0.8 covers 29 / 30 in-sample (20 / 30 left out), median 44.6 points: too rough to state (selectors.precision).
PLAN_DISJOINT = DecoyPlan(kind="disjoint", cut=0.75, rank_matched=False, systematic=0.04, weighted=True)
PLAN_FALLBACK = DecoyPlan(kind="shuffled", cut=None, rank_matched=True, systematic=0.8)


@dataclass(frozen=True)
class PrecisionEstimate:
    """The estimated precision of the pairs kept at a threshold, or why there is none.

    Attributes:
        threshold: the score threshold (keep score >= threshold); None when the run has none.
        n_kept: real pairs kept at the threshold.
        decoy_hits: decoy hits scoring at least the threshold (in the search against real targets + decoys).
        est_false: the estimated wrong pairs among the kept (weighted decoy hits scaled by targets / decoys).
        precision / low / high: the estimate and its interval, None when `reason` says why there is none.
        confidence: the interval's nominal coverage.
        n_targets / n_decoys: the real target side's size and the decoys'.
        decoys: how the decoys were made ("shuffled target sentences", "corpus 'X'").
        reason: '' when there is an estimate, else why not.
        systematic: the interval's systematic width r (a share of the estimated wrong pairs on each side).
        factor: the wrong pairs a decoy hit stands for beyond targets / decoys (1: the plain count).
        weighted_hits: the decoy hits counted by their weights (= decoy_hits when unweighted).
    """

    threshold: float | None
    n_kept: int
    decoy_hits: int
    est_false: float
    precision: float | None
    low: float | None
    high: float | None
    confidence: float
    n_targets: int
    n_decoys: int
    decoys: str = ""
    reason: str = ""
    systematic: float = 0.0
    factor: float = 1.0
    weighted_hits: float | None = None

    @property
    def ok(self) -> bool:
        return self.precision is not None

    def to_dict(self) -> dict:
        """JSON-ready (no NaN: a missing figure is None); floats rounded."""

        def r(x: float | None, nd: int = 4) -> float | None:
            return None if x is None or not math.isfinite(x) else round(float(x), nd)

        return {
            "method": METHOD,
            "threshold": r(self.threshold, 6),
            "n_kept": self.n_kept,
            "decoy_hits": self.decoy_hits,
            "est_false": r(self.est_false, 1),
            "precision": r(self.precision),
            "low": r(self.low),
            "high": r(self.high),
            "confidence": self.confidence,
            "n_targets": self.n_targets,
            "n_decoys": self.n_decoys,
            "decoys": self.decoys,
            "reason": self.reason,
            "systematic": self.systematic,
            "factor": self.factor,
            "weighted_hits": r(self.weighted_hits, 2),
        }


def decoy_hits(tgt_idx: np.ndarray, n_targets: int) -> np.ndarray:
    """Which candidates of a search over the concatenated sides (real targets first, then decoys) hit a decoy."""
    t = np.asarray(tgt_idx, dtype=np.int64)
    if t.ndim != 1:
        raise ValueError(f"target rows must be 1-d, got shape {t.shape}")
    return t >= n_targets


def matched_threshold(real_hit_scores: np.ndarray, n_kept: int) -> float:
    """The threshold of the search against targets + decoys that keeps as many real-target hits as the run keeps.

    Decoys of the target side's kind crowd every source's neighbourhood, so the margins of that search run lower than
    the run's own: counted at the run's threshold, the decoy hits fall short. Matched by rank instead, the decoy hits
    are counted where that search keeps the run's number of real pairs.

    Args:
        real_hit_scores: (n,) the scores of that search's candidates on real targets (past the pre-filters).
        n_kept: the pairs the run keeps at its threshold.

    Returns:
        The n_kept-th highest of those scores (their lowest when there are fewer; +inf when n_kept is 0).
    """
    s = np.asarray(real_hit_scores, dtype=np.float64)
    if s.ndim != 1:
        raise ValueError(f"scores must be 1-d, got shape {s.shape}")
    if n_kept <= 0 or not s.size:
        return math.inf
    return float(-np.partition(-s, min(n_kept, s.size) - 1)[min(n_kept, s.size) - 1])


def _interval(hits: float, scale: float, n_kept: int, confidence: float, systematic: float) -> tuple[float, float]:
    """(low, high) bounds on the wrong pairs among the kept: see the module docstring."""
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + confidence / 2))
    half = z * math.sqrt(2.0 * (hits + 1))
    bias = systematic * hits * scale
    lo = max(0.0, (hits - half) * scale - bias)
    hi = min(float(n_kept), (hits + half) * scale + bias)
    return lo, hi


def estimate_precision(
    *,
    kept_scores: np.ndarray,
    decoy_scores: np.ndarray,
    threshold: float | None,
    n_targets: int,
    n_decoys: int,
    decoys: str = "",
    confidence: float = CONFIDENCE,
    min_kept: int = MIN_KEPT,
    systematic: float = 0.0,
    decoy_threshold: float | None = None,
    factor: float = 1.0,
    decoy_weights: np.ndarray | None = None,
) -> PrecisionEstimate:
    """The precision of the run's pairs kept at `threshold`, from the decoy hits (module docstring).

    Args:
        kept_scores: the run's candidates that passed its pre-filters: their scores.
        decoy_scores: the scores of the decoy hits (past the same pre-filters) of the search against real targets +
            decoys (``decoy_hits``).
        threshold: keep score >= threshold; None: no estimate (the run keeps every candidate, nothing to state).
        n_targets / n_decoys: sentences on the real target side and among the decoys.
        decoys: how the decoys were made, recorded with the estimate.
        confidence: the interval's coverage, in (0, 1).
        min_kept: below this many kept pairs, no estimate.
        systematic: the decoys' bias bound r: the interval widens by r times the estimated wrong pairs on each
            side (0: counting noise only; the app passes ``SYSTEMATIC`` of its decoy kind).
        decoy_threshold: where the decoy hits are counted, when not at `threshold` (``matched_threshold``).
        factor: wrong pairs a decoy hit stands for, beyond targets / decoys (a decoy kind's measured bias; 1: none).
        decoy_weights: one weight >= 0 per decoy score (``decoys.kind_weights`` of the decoy hit); the hits are then
            counted by their weights (``weighted_hits``); None: each counts 1.

    Raises:
        ValueError: a confidence outside (0, 1), a negative systematic width, negative sizes, scores that are not 1-d.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if not systematic >= 0.0:
        raise ValueError(f"systematic must be >= 0, got {systematic}")
    if not factor > 0.0:
        raise ValueError(f"factor must be > 0, got {factor}")
    if n_targets < 0 or n_decoys < 0:
        raise ValueError(f"sizes must be >= 0, got {n_targets} targets and {n_decoys} decoys")
    kept = np.asarray(kept_scores, dtype=np.float64)
    dec = np.asarray(decoy_scores, dtype=np.float64)
    if kept.ndim != 1 or dec.ndim != 1:
        raise ValueError(f"scores must be 1-d, got shapes {kept.shape} and {dec.shape}")
    n_kept = int(np.count_nonzero(kept >= threshold)) if threshold is not None else int(kept.size)
    at = threshold if decoy_threshold is None else decoy_threshold
    hit = dec >= at if at is not None else np.ones(dec.size, dtype=bool)
    hits = int(np.count_nonzero(hit))
    if decoy_weights is None:
        weighted = float(hits)
    else:
        w = np.asarray(decoy_weights, dtype=np.float64)
        if w.shape != dec.shape or (w.size and not (w >= 0).all()):
            raise ValueError(f"decoy_weights must be >= 0, one per decoy score, got shape {w.shape} for {dec.shape}")
        weighted = float(w[hit].sum())
    scale = factor * n_targets / n_decoys if n_decoys > 0 else math.inf
    base = {
        "threshold": threshold,
        "n_kept": n_kept,
        "decoy_hits": hits,
        "weighted_hits": weighted,
        "confidence": confidence,
        "n_targets": n_targets,
        "n_decoys": n_decoys,
        "decoys": decoys,
        "systematic": systematic,
        "factor": factor,
    }
    reason = ""
    if threshold is None:
        reason = "the run has no threshold: every candidate is kept, and no precision is stated for that"
    elif n_decoys == 0 or n_decoys < MIN_DECOY_SHARE * n_targets:
        reason = (
            f"{n_decoys} decoys for {n_targets} target sentences; an estimate needs at least "
            f"{MIN_DECOY_SHARE:.0%} as many decoys as target sentences"
        )
    elif n_kept < min_kept:
        reason = f"{n_kept} pairs kept at the threshold; an estimate needs at least {min_kept}"
    if reason:
        return PrecisionEstimate(est_false=math.nan, precision=None, low=None, high=None, reason=reason, **base)
    est_false = min(weighted * scale, float(n_kept))
    lo, hi = _interval(weighted, scale, n_kept, confidence, systematic)
    return PrecisionEstimate(
        est_false=est_false,
        precision=1.0 - est_false / n_kept,
        low=1.0 - hi / n_kept,
        high=1.0 - lo / n_kept,
        **base,
    )
