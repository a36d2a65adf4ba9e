"""Score-only calibrators: Platt scaling and isotonic regression (pool adjacent violators).

Both read only the pair score phi (margin or cosine) and ignore the source embedding, so they
are the baselines the source-aware head must beat.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Self

import numpy as np

from mining.core.calibration.base import ScoreFeature, as_scores
from mining.core.calibration.metrics import validate_binary

logger = logging.getLogger(__name__)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def fit_logistic_1d(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float = 1e-4, max_iter: int = 100
) -> tuple[float, float]:
    """Weighted 1-d logistic regression p = sigmoid(slope * x + intercept) by damped Newton steps.

    Args:
        x: (n,) float64 feature.
        y: (n,) float64 targets in [0, 1] (soft targets allowed).
        w: (n,) float64 non-negative weights with a positive sum.
        l2: ridge on the slope of the standardised feature (keeps separable data finite).
        max_iter: Newton iterations at most.

    Returns:
        (slope, intercept) on the original scale of ``x``.
    """
    wn = w / w.sum()
    mu = float(np.sum(wn * x))
    sd = float(np.sqrt(np.sum(wn * (x - mu) ** 2)))
    sd = sd if sd > 1e-12 else 1.0
    z = (x - mu) / sd
    theta = np.array([0.0, 0.0])  # slope, intercept on z

    def loss(t: np.ndarray) -> float:
        m = t[0] * z + t[1]
        return float(np.sum(wn * (np.logaddexp(0.0, m) - y * m)) + 0.5 * l2 * t[0] ** 2)

    current = loss(theta)
    for _ in range(max_iter):
        p = _sigmoid(theta[0] * z + theta[1])
        r = wn * (p - y)
        grad = np.array([np.sum(r * z) + l2 * theta[0], np.sum(r)])
        h = wn * p * (1.0 - p)
        hess = np.array([[np.sum(h * z * z) + l2, np.sum(h * z)], [np.sum(h * z), np.sum(h) + 1e-12]])
        step = np.linalg.solve(hess + 1e-12 * np.eye(2), grad)
        t_new, new = theta - step, loss(theta - step)
        halvings = 0
        while new > current and halvings < 30:
            step *= 0.5
            t_new, new = theta - step, loss(theta - step)
            halvings += 1
        if new > current:
            break
        theta, improved = t_new, current - new
        current = new
        if improved < 1e-12 and np.max(np.abs(step)) < 1e-9:
            break
    slope = theta[0] / sd
    return float(slope), float(theta[1] - slope * mu)


@dataclass
class PlattScaling:
    """conf = sigmoid(slope * phi + intercept), fitted by weighted maximum likelihood.

    Attributes:
        feature: which pair score this calibrator expects (metadata for the caller).
        prior_smoothing: use Platt's smoothed targets (N+ + 1) / (N+ + 2) and 1 / (N- + 2).
        l2: ridge on the standardised slope.
    """

    feature: ScoreFeature = ScoreFeature.MARGIN
    prior_smoothing: bool = False
    l2: float = 1e-4
    slope: float = field(default=float("nan"), init=False)
    intercept: float = field(default=float("nan"), init=False)

    def fit(
        self,
        u: np.ndarray | None,
        phi: np.ndarray,
        labels: np.ndarray,
        sample_weight: np.ndarray | None = None,
        seed: int = 0,
    ) -> Self:
        """Fit on (n,) scores and 0/1 labels; ``u`` and ``seed`` are unused (deterministic)."""
        x, y, w = validate_binary(as_scores(phi), labels, sample_weight, unit_interval=False)
        if w.sum() <= 0:
            raise ValueError("need at least one labelled pair with positive weight")
        if self.prior_smoothing:
            n_pos, n_neg = float(np.sum(w * y)), float(np.sum(w * (1.0 - y)))
            y = np.where(y > 0.5, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
        self.slope, self.intercept = fit_logistic_1d(x, y, w, l2=self.l2)
        return self

    def predict(self, u: np.ndarray | None, phi: np.ndarray) -> np.ndarray:
        """(n,) float32 confidences for (n,) scores."""
        if np.isnan(self.slope):
            raise RuntimeError("PlattScaling is not fitted")
        return _sigmoid(self.slope * as_scores(phi) + self.intercept).astype(np.float32)

    def state_dict(self) -> dict[str, Any]:
        """Plain-Python state (JSON-serialisable)."""
        return {
            "kind": "platt",
            "feature": self.feature.value,
            "prior_smoothing": self.prior_smoothing,
            "l2": self.l2,
            "slope": self.slope,
            "intercept": self.intercept,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> PlattScaling:
        """Rebuild from ``state_dict()``."""
        model = cls(ScoreFeature(state["feature"]), bool(state["prior_smoothing"]), float(state["l2"]))
        model.slope, model.intercept = float(state["slope"]), float(state["intercept"])
        return model


def pool_adjacent_violators(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted least-squares non-decreasing fit to ``y`` (already in x order).

    Args:
        y: (m,) float64 values in x order.
        w: (m,) float64 positive weights.

    Returns:
        (m,) float64 non-decreasing fitted values.
    """
    # PAV is sequential; it runs once per fit over distinct labelled scores (hundreds to
    # thousands), never over mining candidates.
    vals: list[float] = []
    wts: list[float] = []
    sizes: list[int] = []
    for v, wt in zip(y.tolist(), w.tolist(), strict=True):
        vals.append(v)
        wts.append(wt)
        sizes.append(1)
        while len(vals) > 1 and vals[-2] > vals[-1]:
            v2, w2, s2 = vals.pop(), wts.pop(), sizes.pop()
            merged = wts[-1] + w2
            vals[-1] = (vals[-1] * wts[-1] + v2 * w2) / merged
            wts[-1] = merged
            sizes[-1] += s2
    return np.repeat(np.asarray(vals, dtype=np.float64), np.asarray(sizes, dtype=np.int64))


@dataclass
class IsotonicCalibration:
    """Non-decreasing step fit of P(GOOD | phi), linearly interpolated between distinct scores.

    Scores outside the fitted range get the end values. Attributes are the knots after ``fit``.
    """

    feature: ScoreFeature = ScoreFeature.MARGIN
    x: np.ndarray = field(default_factory=lambda: np.zeros(0), init=False)
    y: np.ndarray = field(default_factory=lambda: np.zeros(0), init=False)

    def fit(
        self,
        u: np.ndarray | None,
        phi: np.ndarray,
        labels: np.ndarray,
        sample_weight: np.ndarray | None = None,
        seed: int = 0,
    ) -> Self:
        """Fit on (n,) scores and 0/1 labels; ``u`` and ``seed`` are unused (deterministic)."""
        x, y, w = validate_binary(as_scores(phi), labels, sample_weight, unit_interval=False)
        keep = w > 0
        if not keep.any():
            raise ValueError("need at least one labelled pair with positive weight")
        x, y, w = x[keep], y[keep], w[keep]
        ux, inv = np.unique(x, return_inverse=True)
        wsum = np.bincount(inv, weights=w)
        ymean = np.bincount(inv, weights=w * y) / wsum
        self.x, self.y = ux, pool_adjacent_violators(ymean, wsum)
        return self

    def predict(self, u: np.ndarray | None, phi: np.ndarray) -> np.ndarray:
        """(n,) float32 confidences for (n,) scores."""
        if self.x.size == 0:
            raise RuntimeError("IsotonicCalibration is not fitted")
        return np.interp(as_scores(phi), self.x, self.y).astype(np.float32)

    def state_dict(self) -> dict[str, Any]:
        """Plain-Python state (JSON-serialisable)."""
        return {"kind": "isotonic", "feature": self.feature.value, "x": self.x.tolist(), "y": self.y.tolist()}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> IsotonicCalibration:
        """Rebuild from ``state_dict()``."""
        model = cls(ScoreFeature(state["feature"]))
        model.x = np.asarray(state["x"], dtype=np.float64)
        model.y = np.asarray(state["y"], dtype=np.float64)
        return model
