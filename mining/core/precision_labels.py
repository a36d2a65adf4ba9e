"""The precision of a run's kept pairs settled by a few labels, with what the run already knows (the decoy estimate).

Labels drawn at random from the kept set (the one-click check draws ``n // bands`` from each of `bands` equal-width
score bands between the threshold and the top score) estimate its precision without bias, the stratified mean

    p_L = sum_b W_b * g_b / n_b,       W_b = N_b / N,

(N_b kept pairs in band b, n_b of them labelled, g_b GOOD), with variance

    v_L = sum_b W_b^2 * (1 - n_b / N_b) * q_b (1 - q_b) / n_b,   q_b = (g_b + 1) / (n_b + 2),

(a band labelled all GOOD still has a variance: q_b is the rate with one GOOD and one BAD added). But 100 labels of a
70-90 % precise set have a standard error of about 4 points: the binomial floor that no estimator from the labels
alone gets under. The decoy estimate (``core.precision``) is another measurement of the same figure, with its own
error: the counting noise of its decoy hits (``decoy_variance``) and a bias (its decoys are not exactly like the run's
wrong pairs) whose spread was measured on the bench collections (``bias_sd``: bench/feedback_loop.py --precision,
chosen leave-one-collection-out). Taking the decoy estimate as a prior N(p_D, v_D + bias_sd^2) and the stratified
labels as a measurement N(p, v_L), the settled figure is the posterior

    p = (p_D / v_0 + p_L / v_L) / (1 / v_0 + 1 / v_L),   v = 1 / (1 / v_0 + 1 / v_L),   v_0 = v_D + bias_sd^2,

with the interval p +- z sqrt(v) clipped to [0, 1]. Few labels lean on the decoys; many labels outweigh them. The
decoys may also simply be wrong for this collection (their bias far beyond bias_sd: a catalogue whose wrong pairs the
decoys do not imitate). So the prior is a mixture: with probability `trust` the decoy estimate holds as above, else it
says nothing (a uniform prior: the labels alone). The labels weigh the two by how likely they make each, the normal
density of p_L under N(p_D, v_0 + v_L) against 1, and the figure is the posterior mean of the mixture, its interval
p +- z sqrt(the mixture's variance). On the bench collections a trust below 1 did not help (TRUST = 1: the plain
posterior): with up to 200 labels the labels cannot tell a 6-point bias from their own noise. Without a decoy estimate
the figure is the labels' alone (interval: Wilson on the design's effective size p_L (1 - p_L) / v_L).

Labels outside the kept set's score range are ignored; a band with no label is merged into its nearest labelled
neighbour (collapsed strata), so labels from any random sampler over the kept set (uniform, score bands) serve.
A model-assisted (difference) estimator with the decoys' per-band precision as its model is the stratified mean
itself: a model constant within each band cancels out of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

BANDS = 5
CONFIDENCE = 0.95
# The decoy estimate's bias spread (precision units) beyond its counting noise, by kind of decoys, and the trust in it:
# measured by bench/feedback_loop.py --precision on its 15 collections (docs/BENCHMARKS.md, "A few labels settle the
# stated precision"). Disjoint-collection decoys: the grid's (bias_sd, trust) with the most figures within 3 points
# among those whose interval covers the measured precision in 90 % of case x draw (chosen leave-one-collection-out for
# the figures reported; these are the choice on all 15); trust below 1 did not help. Shuffled target sentences (the
# fallback) compete far less well than a near-translation does (their errors' spread: 10.7 points); no figure from
# them is stated, so none serves as a prior.
BIAS_SD_DISJOINT = 0.02
TRUST = 1.0
METHOD = "labels + decoys"
METHOD_LABELS = "labels"


def score_bands(scores: np.ndarray, lo: float, hi: float, bands: int = BANDS) -> np.ndarray:
    """Band of each score among `bands` equal-width bands over [lo, hi) (the samplers' ``width_bucket``).

    Args:
        scores: (n,) float scores; lo < hi.
        bands: number of bands, >= 1.

    Returns:
        (n,) int64 bands in [0, bands - 1]; scores outside [lo, hi) get -1.
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1 or bands < 1 or not hi > lo:
        raise ValueError(f"need 1-d scores, bands >= 1 and lo < hi; got shape {s.shape}, {bands}, [{lo}, {hi})")
    band = np.floor((s - lo) / (hi - lo) * bands).astype(np.int64)
    return np.where((s >= lo) & (s < hi), np.clip(band, 0, bands - 1), -1)


def proportional_allocation(sizes: np.ndarray, n: int) -> np.ndarray:
    """Labels to draw from each band: n in proportion to the bands' sizes (rounded), at least 1 from a band that
    holds pairs, never more than it holds.

    Proportional allocation, not equal: the kept set's equal-width score bands differ in size by an order of
    magnitude, and n / bands labels a band then weigh very unequally in the stratified mean, which inflates its
    variance (bench/feedback_loop.py --precision: 100 labels, RMS error 5.0 points with equal allocation, 3.0 with
    proportional).

    Args:
        sizes: (B,) int pairs per band; n: labels wanted, >= 0.

    Returns:
        (B,) int64 labels per band.
    """
    sz = np.asarray(sizes, dtype=np.int64)
    if sz.ndim != 1 or np.any(sz < 0) or n < 0:
        raise ValueError(f"need 1-d non-negative sizes and n >= 0, got shape {sz.shape} and n = {n}")
    total = int(sz.sum())
    if total == 0 or n == 0:
        return np.zeros_like(sz)
    per = np.maximum(1, np.round(n * sz / total)).astype(np.int64)
    return np.minimum(np.where(sz > 0, per, 0), sz)


@dataclass(frozen=True)
class BandCounts:
    """The kept set cut into score bands: pairs in each band, labelled pairs, GOOD among them (a pair labelled by
    several reviewers counts its share of GOOD verdicts).

    Attributes:
        sizes: (B,) int64 kept pairs per band.
        labelled: (B,) int64 labelled pairs per band (<= sizes).
        good: (B,) float64 GOOD per band (<= labelled).
    """

    sizes: np.ndarray
    labelled: np.ndarray
    good: np.ndarray

    def __post_init__(self) -> None:
        shapes = {np.shape(self.sizes), np.shape(self.labelled), np.shape(self.good)}
        if len(shapes) != 1 or np.ndim(self.sizes) != 1:
            raise ValueError(f"sizes, labelled and good must be 1-d of one length, got {shapes}")
        if np.any(np.asarray(self.labelled) > np.asarray(self.sizes)) or np.any(np.asarray(self.good) < 0):
            raise ValueError("a band has more labelled pairs than pairs, or negative GOOD")
        if np.any(np.asarray(self.good) > np.asarray(self.labelled) + 1e-9):
            raise ValueError("a band has more GOOD than labelled pairs")

    @property
    def n_labels(self) -> int:
        return int(np.sum(self.labelled))

    @classmethod
    def from_scores(
        cls, kept_scores: np.ndarray, labelled_scores: np.ndarray, good: np.ndarray, bands: int = BANDS
    ) -> BandCounts:
        """Counts over `bands` equal-width bands from the lowest kept score to just above the highest.

        Args:
            kept_scores: (N,) scores of the kept set.
            labelled_scores: (n,) scores of its labelled pairs (one per pair); good: (n,) their GOOD share in [0, 1].
        """
        kept = np.asarray(kept_scores, dtype=np.float64)
        if kept.size == 0:
            return cls(np.zeros(bands, np.int64), np.zeros(bands, np.int64), np.zeros(bands))
        lo, hi = float(kept.min()), float(kept.max()) + 1e-9
        y = np.asarray(good, dtype=np.float64)
        lb = score_bands(np.asarray(labelled_scores, dtype=np.float64), lo, hi, bands)
        if y.shape != lb.shape:
            raise ValueError(f"labelled scores and GOOD shares differ in shape: {lb.shape} and {y.shape}")
        inside = lb >= 0
        return cls(
            np.bincount(score_bands(kept, lo, hi, bands), minlength=bands).astype(np.int64),
            np.bincount(lb[inside], minlength=bands).astype(np.int64),
            np.bincount(lb[inside], weights=y[inside], minlength=bands).astype(np.float64),
        )


def _collapse(counts: BandCounts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bands without labels merged into the nearest band with labels (the lower one on a tie)."""
    sizes = counts.sizes.astype(np.float64).copy()
    n, g = counts.labelled.astype(np.float64), counts.good.astype(np.float64)
    has = np.flatnonzero(n > 0)
    if has.size == 0:
        return sizes[:0], n[:0], g[:0]
    for b in np.flatnonzero((n == 0) & (sizes > 0)):
        sizes[has[np.argmin(np.abs(has - b))]] += sizes[b]
        sizes[b] = 0.0
    keep = n > 0
    return sizes[keep], n[keep], g[keep]


@dataclass(frozen=True)
class LabelEstimate:
    """The kept set's precision from stratified labels alone: the stratified mean, its variance, a Wilson interval."""

    precision: float
    variance: float
    low: float
    high: float
    n_labels: int


def stratified_precision(counts: BandCounts, confidence: float = CONFIDENCE) -> LabelEstimate | None:
    """The stratified mean of the labels and its variance (module docstring); None without labels in the kept set."""
    from mining.core.calibration.estimates import wilson_interval

    sizes, n, g = _collapse(counts)
    if n.size == 0:
        return None
    w = sizes / sizes.sum()
    p = float(np.sum(w * g / n))
    q = (g + 1.0) / (n + 2.0)
    fpc = np.clip(1.0 - n / np.maximum(sizes, 1.0), 0.0, 1.0)
    var = float(np.sum(w * w * fpc * q * (1.0 - q) / n))
    qq = (float(np.sum(w * g / n)) * counts.n_labels + 1.0) / (counts.n_labels + 2.0)
    n_eff = qq * (1.0 - qq) / var if var > 0 else float(counts.n_labels)
    low, high = wilson_interval(p, n_eff, NormalDist().inv_cdf(0.5 + confidence / 2))
    return LabelEstimate(p, max(var, 1e-12), float(low), float(high), counts.n_labels)


def decoy_variance(*, decoy_hits: int, n_kept: int, n_targets: int, n_decoys: int) -> float:
    """The counting variance of the decoy estimate of precision: 2 (hits + 1) (targets / decoys)^2 / kept^2 (the
    variance ``core.precision`` puts its interval on)."""
    if n_kept <= 0 or n_decoys <= 0:
        raise ValueError(f"need kept pairs and decoys, got {n_kept} and {n_decoys}")
    return 2.0 * (decoy_hits + 1) * (n_targets / n_decoys) ** 2 / n_kept**2


def bias_sd_from_errors(errors: np.ndarray, variances: np.ndarray) -> float:
    """The spread of a prior's bias beyond its counting noise, from its measured errors on bench collections: the
    root of mean(error^2 - counting variance), 0 when the noise explains the errors."""
    e, v = np.asarray(errors, dtype=np.float64), np.asarray(variances, dtype=np.float64)
    if e.shape != v.shape or e.size == 0:
        raise ValueError(f"need errors and variances of one non-empty shape, got {e.shape} and {v.shape}")
    return math.sqrt(max(float(np.mean(e * e - v)), 0.0))


@dataclass(frozen=True)
class SettledPrecision:
    """The kept set's precision settled by labels (module docstring).

    Attributes:
        precision / low / high: the settled figure and its interval.
        confidence: the interval's nominal coverage.
        n_labels: labelled kept pairs behind it.
        label_precision / label_low / label_high: the labels' own figure (stratified mean, Wilson interval).
        prior_weight: the decoy estimate's share of the settled figure (0 without one).
        method: METHOD (labels + decoys) or METHOD_LABELS (labels alone).
    """

    precision: float
    low: float
    high: float
    confidence: float
    n_labels: int
    label_precision: float
    label_low: float
    label_high: float
    prior_weight: float
    method: str

    def to_dict(self) -> dict:
        """JSON-ready, rounded."""
        out = {k: round(float(v), 4) for k, v in self.__dict__.items() if isinstance(v, float)}
        return {**out, "n_labels": self.n_labels, "method": self.method}


def settle_precision(
    counts: BandCounts,
    *,
    prior_precision: float | None = None,
    prior_variance: float | None = None,
    bias_sd: float = BIAS_SD_DISJOINT,
    trust: float = TRUST,
    confidence: float = CONFIDENCE,
) -> SettledPrecision | None:
    """The kept set's precision from its labels and, when given, the decoy estimate as a prior (module docstring).

    Args:
        counts: the kept set's bands and labels.
        prior_precision: the decoy estimate (None: labels alone); prior_variance: its counting variance
            (``decoy_variance``).
        bias_sd: the decoy estimate's bias spread beyond its counting noise (precision units, >= 0).
        trust: the prior probability that the decoy estimate holds (bias within bias_sd), in (0, 1]; the rest
            goes to "it does not" (labels alone). 1: the decoys are always believed.
        confidence: the interval's coverage, in (0, 1).

    Returns:
        The settled figure, or None when no label falls in the kept set.
    """
    if not 0.0 < confidence < 1.0 or bias_sd < 0 or not 0.0 < trust <= 1.0:
        raise ValueError(
            f"need confidence in (0, 1), bias_sd >= 0, trust in (0, 1]; got {confidence}, {bias_sd}, {trust}"
        )
    lab = stratified_precision(counts, confidence)
    if lab is None:
        return None
    base = {
        "confidence": confidence,
        "n_labels": lab.n_labels,
        "label_precision": lab.precision,
        "label_low": lab.low,
        "label_high": lab.high,
    }
    if prior_precision is None or prior_variance is None:
        return SettledPrecision(lab.precision, lab.low, lab.high, prior_weight=0.0, method=METHOD_LABELS, **base)
    pd, vl = float(prior_precision), lab.variance
    v0 = max(max(float(prior_variance), 0.0) + bias_sd * bias_sd, 1e-12)
    w0 = (1.0 / v0) / (1.0 / v0 + 1.0 / vl)
    m1, v1 = w0 * pd + (1.0 - w0) * lab.precision, 1.0 / (1.0 / v0 + 1.0 / vl)
    # how likely the labels' figure is if the decoys hold (normal) or if they do not (uniform on [0, 1]: density 1)
    holds = trust * NormalDist(pd, math.sqrt(v0 + vl)).pdf(lab.precision)
    w1 = holds / (holds + (1.0 - trust))
    p = w1 * m1 + (1.0 - w1) * lab.precision
    var = w1 * (v1 + m1 * m1) + (1.0 - w1) * (vl + lab.precision**2) - p * p
    half = NormalDist().inv_cdf(0.5 + confidence / 2) * math.sqrt(max(var, 0.0))
    return SettledPrecision(p, max(0.0, p - half), min(1.0, p + half), prior_weight=w1 * w0, method=METHOD, **base)
