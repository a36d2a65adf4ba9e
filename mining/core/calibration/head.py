"""Source-aware calibration head (Guo et al. 2018, section 2.4.2).

conf(x, y) = sigmoid(a(u) * phi(x, y) + b(u)), with a(u) > 0 and b(u) small feed-forward heads over
[u, u^2] (u the source embedding, u^2 element-wise), dropout on that input. The encoders stay
frozen: the head is trained on arrays (u, phi, label). Because a(u) > 0 and neither head reads the
target, conf is non-decreasing in phi for a fixed source: it never reorders one source's targets.

The heads are written as a(u) = softplus(a0 + g_a(f)) and b(u) = b0 + g_b(f) on the standardised
features f and score; a0 and b0 start at the Platt solution and g_a, g_b start at zero and carry
the ridge penalty, so with few labels or uninformative u the head stays close to Platt scaling.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from typing import Any, Self

import numpy as np
import torch
from torch import nn

from mining.core.calibration.base import ScoreFeature, as_scores
from mining.core.calibration.baselines import fit_logistic_1d
from mining.core.calibration.crossval import stratified_folds
from mining.core.calibration.metrics import validate_binary
from mining.core.files import atomic_path

logger = logging.getLogger(__name__)

# (u, phi, labels, weights) tensors of a hold-out set: (n, d), (n,), (n,), (n,) float32.
_Split = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]

_MIN_SCALE = 1e-4  # floor on a(u) on the standardised scale, so conf stays strictly increasing in phi


@dataclass(frozen=True)
class HeadConfig:
    """Hyper-parameters of the calibration head.

    Attributes:
        hidden: hidden units of each head; 0 makes them linear (the paper's weighted sum).
        dropout: dropout on the [u, u^2] input.
        l2: ridge penalty on the u-dependent weights (not on the Platt terms a0, b0), used when
            there is no hold-out.
        l2_grid: ridge penalties tried on the hold-out (with early stopping each); the best one is
            used for the final fit. Empty: always ``l2``.
        lr: Adam learning rate.
        max_epochs: epochs at most.
        patience: early stopping: epochs without validation improvement before stopping.
        val_fraction: stratified share held out for early stopping; the head is then refitted on
            all labels for the best epoch count. 0: no hold-out, train ``max_epochs`` with ``l2``.
        min_val: smallest hold-out worth early stopping on; with fewer labels than that needs,
            the u-dependent terms are not trained and the head is plain Platt scaling.
        batch_size: mini-batch size (full batch for the usual few hundred labels).
        feature: which stored pair score phi is (metadata for the caller).
    """

    hidden: int = 0
    dropout: float = 0.4
    l2: float = 1e-2
    l2_grid: tuple[float, ...] = (1e-3, 1e-2, 1e-1, 1.0)
    lr: float = 1e-2
    max_epochs: int = 300
    patience: int = 30
    val_fraction: float = 0.2
    min_val: int = 20
    batch_size: int = 4096
    feature: ScoreFeature = ScoreFeature.MARGIN

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python form (enum as its value)."""
        out = dataclasses.asdict(self)
        out["feature"] = self.feature.value
        out["l2_grid"] = list(self.l2_grid)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HeadConfig:
        """Inverse of ``to_dict``."""
        return cls(**{**data, "feature": ScoreFeature(data["feature"]), "l2_grid": tuple(data["l2_grid"])})


def _head(d_in: int, hidden: int) -> nn.Module:
    if hidden <= 0:
        last = nn.Linear(d_in, 1)
        body: nn.Module = last
    else:
        last = nn.Linear(hidden, 1)
        body = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), last)
    # Start at zero so the untrained head is exactly Platt scaling.
    nn.init.zeros_(last.weight)
    nn.init.zeros_(last.bias)
    return body


class _Net(nn.Module):
    def __init__(self, d: int, hidden: int, dropout: float) -> None:
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.g_a = _head(2 * d, hidden)
        self.g_b = _head(2 * d, hidden)
        self.a0 = nn.Parameter(torch.zeros(()))
        self.b0 = nn.Parameter(torch.zeros(()))
        self.register_buffer("f_mean", torch.zeros(2 * d))
        self.register_buffer("f_std", torch.ones(2 * d))
        self.register_buffer("phi_mean", torch.zeros(()))
        self.register_buffer("phi_std", torch.ones(()))

    def scale_bias(self, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(n,) scale > 0 and (n,) bias on the standardised score."""
        f = (torch.cat([u, u * u], dim=1) - self.f_mean) / self.f_std
        f = self.drop(f)
        a = nn.functional.softplus(self.a0 + self.g_a(f).squeeze(1)) + _MIN_SCALE
        return a, self.b0 + self.g_b(f).squeeze(1)

    def forward(self, u: torch.Tensor, phi: torch.Tensor) -> torch.Tensor:
        a, b = self.scale_bias(u)
        return a * (phi - self.phi_mean) / self.phi_std + b

    def penalty(self) -> torch.Tensor:
        return sum((p.pow(2).sum() for n, p in self.named_parameters() if n.startswith("g_")), torch.zeros(()))


def _inv_softplus(x: float) -> float:
    return float(x + np.log(-np.expm1(-x)))


class CalibrationHead:
    """Trainable conf = sigmoid(a(u) * phi + b(u)) with the fit / predict calibrator interface."""

    def __init__(self, config: HeadConfig | None = None) -> None:
        self.config = config or HeadConfig()
        self._net: _Net | None = None
        self.epochs_trained = 0
        self.l2_chosen = self.config.l2

    # ---- input handling -------------------------------------------------------------------
    @staticmethod
    def _inputs(u: np.ndarray | None, phi: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        if u is None:
            raise ValueError("CalibrationHead needs the source embeddings u")
        uu = np.asarray(u, dtype=np.float32)
        s = as_scores(phi)
        if uu.ndim != 2 or uu.shape[0] != s.size:
            raise ValueError(f"u must be (n, d) with n = {s.size}, got {uu.shape}")
        if not np.all(np.isfinite(uu)):
            raise ValueError("u must be finite")
        return torch.from_numpy(uu.copy()), torch.from_numpy(s.astype(np.float32))

    # ---- training -------------------------------------------------------------------------
    def _new_net(self, u: torch.Tensor, phi: torch.Tensor, y: np.ndarray, w: np.ndarray) -> _Net:
        net = _Net(u.shape[1], self.config.hidden, self.config.dropout)
        f = torch.cat([u, u * u], dim=1)
        wt = torch.from_numpy((w / w.sum()).astype(np.float32))
        f_mean = (wt[:, None] * f).sum(0)
        f_std = ((wt[:, None] * (f - f_mean) ** 2).sum(0)).sqrt()
        net.f_mean.copy_(f_mean)
        net.f_std.copy_(torch.where(f_std > 1e-8, f_std, torch.ones_like(f_std)))
        p_mean = (wt * phi).sum()
        p_std = ((wt * (phi - p_mean) ** 2).sum()).sqrt()
        net.phi_mean.copy_(p_mean)
        net.phi_std.copy_(p_std if p_std > 1e-8 else torch.ones(()))
        z = ((phi - net.phi_mean) / net.phi_std).double().numpy()
        slope, intercept = fit_logistic_1d(z, y, w)
        net.a0.data.fill_(_inv_softplus(max(slope, 1e-3)))
        net.b0.data.fill_(intercept)
        return net

    def _epoch(
        self,
        net: _Net,
        opt: torch.optim.Optimizer,
        u: torch.Tensor,
        phi: torch.Tensor,
        y: torch.Tensor,
        w: torch.Tensor,
        l2: float,
        gen: torch.Generator,
    ) -> None:
        net.train()
        n = phi.shape[0]
        order = torch.randperm(n, generator=gen)
        for start in range(0, n, self.config.batch_size):
            idx = order[start : start + self.config.batch_size]
            logits = net(u[idx], phi[idx])
            bce = nn.functional.binary_cross_entropy_with_logits(logits, y[idx], weight=w[idx], reduction="sum")
            loss = bce / w[idx].sum().clamp_min(1e-12) + l2 * net.penalty()
            opt.zero_grad()
            loss.backward()
            opt.step()

    @staticmethod
    def _val_loss(net: _Net, u: torch.Tensor, phi: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> float:
        net.eval()
        with torch.no_grad():
            bce = nn.functional.binary_cross_entropy_with_logits(net(u, phi), y, weight=w, reduction="sum")
        return float(bce / w.sum())

    def _train(
        self,
        u: torch.Tensor,
        phi: torch.Tensor,
        y: np.ndarray,
        w: np.ndarray,
        epochs: int,
        l2: float,
        val: _Split | None,
        seed: int,
    ) -> tuple[_Net, int, float]:
        """Train a fresh net; with ``val``, stop early and return (best net, best epoch, best val loss)."""
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        net = self._new_net(u, phi, y, w)
        opt = torch.optim.Adam(net.parameters(), lr=self.config.lr)
        yt = torch.from_numpy(y.astype(np.float32))
        wt = torch.from_numpy(w.astype(np.float32))
        best, best_epoch, best_state = float("inf"), 0, None
        if val is not None:
            # Epoch 0 is the Platt start: the hold-out may prefer it to any u-dependent fit.
            best, best_state = self._val_loss(net, *val), {k: v.clone() for k, v in net.state_dict().items()}
        for epoch in range(1, epochs + 1):
            self._epoch(net, opt, u, phi, yt, wt, l2, gen)
            if val is None:
                continue
            loss = self._val_loss(net, *val)
            if loss < best - 1e-6:
                best, best_epoch = loss, epoch
                best_state = {k: v.clone() for k, v in net.state_dict().items()}
            elif epoch - best_epoch >= self.config.patience:
                break
        if best_state is not None:
            net.load_state_dict(best_state)
        return net, (best_epoch if val is not None else epochs), best

    def fit(
        self,
        u: np.ndarray | None,
        phi: np.ndarray,
        labels: np.ndarray,
        sample_weight: np.ndarray | None = None,
        seed: int = 0,
    ) -> Self:
        """Train on labelled pairs; returns self.

        Args:
            u: (n, d) float32 frozen source embeddings.
            phi: (n,) float pair scores (the configured feature).
            labels: (n,) bool or 0/1 human labels (GOOD = 1).
            sample_weight: optional (n,) non-negative weights (e.g. stratum weights).
            seed: seeds the hold-out split, initialisation, shuffling and dropout.
        """
        ut, pt = self._inputs(u, phi)
        _, y, w = validate_binary(pt.numpy(), labels, sample_weight, unit_interval=False)
        if w.sum() <= 0:
            raise ValueError("need at least one labelled pair with positive weight")
        cfg = self.config
        n_val = int(round(cfg.val_fraction * y.size))
        with torch.random.fork_rng(devices=[]):
            epochs, l2 = cfg.max_epochs, cfg.l2
            if cfg.val_fraction > 0:
                # Too few labels to tell a u-dependent fit from noise: stay at the Platt start.
                epochs, l2 = self._select(ut, pt, y, w, seed) if n_val >= cfg.min_val else (0, cfg.l2)
            self._net, self.epochs_trained, _ = self._train(ut, pt, y, w, epochs, l2, None, seed)
            self.l2_chosen = l2
        self._net.eval()
        logger.debug("calibration head trained for %d epochs on %d pairs", self.epochs_trained, y.size)
        return self

    @staticmethod
    def _pair_losses(net: _Net, u: torch.Tensor, phi: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> np.ndarray:
        net.eval()
        with torch.no_grad():
            nll = nn.functional.binary_cross_entropy_with_logits(net(u, phi), y, reduction="none")
        return (nll * w / w.mean()).double().numpy()

    def _select(self, u: torch.Tensor, phi: torch.Tensor, y: np.ndarray, w: np.ndarray, seed: int) -> tuple[int, float]:
        """Best (epoch count, ridge) on a stratified hold-out; (0, l2) means plain Platt scaling.

        One-standard-error rule: the u-dependent fit is kept only when its mean hold-out loss beats
        the Platt start by more than one standard error of the per-pair difference. With a few
        hundred labels the hold-out is small, and picking the raw minimum over epochs and ridges
        overfits it (measured: worse than Platt out of fold with d = 512 and 200 labels).
        """
        cfg = self.config
        k = max(2, int(round(1.0 / cfg.val_fraction)))
        hold = stratified_folds(y, k, seed) == 0
        tr = ~hold
        th, ttr = torch.from_numpy(hold), torch.from_numpy(tr)
        val: _Split = (
            u[th],
            phi[th],
            torch.from_numpy(y[hold].astype(np.float32)),
            torch.from_numpy(w[hold].astype(np.float32)),
        )
        best: tuple[float, int, float, _Net | None] = (float("inf"), 0, cfg.l2, None)
        for l2 in cfg.l2_grid or (cfg.l2,):
            net, epoch, loss = self._train(u[ttr], phi[ttr], y[tr], w[tr], cfg.max_epochs, l2, val, seed)
            logger.debug("hold-out loss %.4f at epoch %d with l2=%g", loss, epoch, l2)
            if loss < best[0]:
                best = (loss, epoch, l2, net)
        _, epoch, l2, net = best
        if net is None or epoch == 0:
            return 0, l2
        platt = self._new_net(u[ttr], phi[ttr], y[tr], w[tr])
        diff = self._pair_losses(platt, *val) - self._pair_losses(net, *val)
        se = float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else float("inf")
        return (epoch, l2) if float(diff.mean()) > se else (0, l2)

    # ---- inference ------------------------------------------------------------------------
    def _fitted(self) -> _Net:
        if self._net is None:
            raise RuntimeError("CalibrationHead is not fitted")
        return self._net

    def scale_bias(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-source (a, b) on the raw score: conf = sigmoid(a * phi + b), a > 0.

        Args:
            u: (n, d) float32 source embeddings.

        Returns:
            a: (n,) float32 positive scale; b: (n,) float32 bias.
        """
        net = self._fitted()
        ut, _ = self._inputs(u, np.zeros(np.asarray(u).shape[0]))
        with torch.no_grad():
            a, b = net.scale_bias(ut)
            a_raw = a / net.phi_std
            b_raw = b - a_raw * net.phi_mean
        return a_raw.numpy().astype(np.float32), b_raw.numpy().astype(np.float32)

    def predict(self, u: np.ndarray | None, phi: np.ndarray) -> np.ndarray:
        """(n,) float32 calibrated confidences for (n, d) sources and (n,) scores."""
        net = self._fitted()
        ut, pt = self._inputs(u, phi)
        out = np.empty(pt.shape[0], dtype=np.float32)
        with torch.no_grad():
            for start in range(0, pt.shape[0], self.config.batch_size):
                sl = slice(start, start + self.config.batch_size)
                out[sl] = torch.sigmoid(net(ut[sl], pt[sl])).numpy()
        return out

    # ---- persistence ----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Config, input dimension, epochs and tensors (torch-serialisable with weights_only)."""
        net = self._fitted()
        return {
            "config": self.config.to_dict(),
            "d": int(net.f_mean.shape[0] // 2),
            "epochs_trained": self.epochs_trained,
            "tensors": {k: v.detach().clone() for k, v in net.state_dict().items()},
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> CalibrationHead:
        """Rebuild a fitted head from ``state_dict()``."""
        head = cls(HeadConfig.from_dict(state["config"]))
        net = _Net(int(state["d"]), head.config.hidden, head.config.dropout)
        net.load_state_dict(state["tensors"])
        net.eval()
        head._net, head.epochs_trained = net, int(state["epochs_trained"])
        return head

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the state to ``path`` atomically (temporary file in the same folder, then os.replace)."""
        with atomic_path(path) as tmp:
            torch.save(self.state_dict(), tmp)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> CalibrationHead:
        """Read a head written by ``save``."""
        return cls.from_state(torch.load(path, map_location="cpu", weights_only=True))
