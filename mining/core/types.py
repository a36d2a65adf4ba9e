"""Frozen result types shared by the kNN, margin and candidate modules."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

from mining.core.hw import Compute, Device


class Direction(enum.IntFlag):
    """Which search direction proposed a candidate pair (bit flags, combinable)."""

    FORWARD = 1  # source -> target: the target is the source's best
    BACKWARD = 2  # target -> source: the source is the target's best


@dataclass(frozen=True)
class KnnInfo:
    """How a kNN result was computed, for a run's stats (``as_dict`` is JSON-ready).

    Attributes:
        compute: the arithmetic of the similarity tiles (BF16 and INT8 tiles are always re-scored exactly).
        device: where the tiles were computed.
        candidates: per-row candidate list width of the bf16 / int8 pass (k + margin); 0 for fp32.
        rescued: rows (both directions) whose candidate list could not be proved to hold the fp32 top-k and were
            searched again (every similarity within the tiles' error bound, re-scored exactly).
    """

    compute: Compute = Compute.FP32
    device: Device = Device.CPU
    candidates: int = 0
    rescued: int = 0

    def as_dict(self) -> dict[str, object]:
        """{"compute": "bf16", "device": "cpu", "candidates": 12, "rescued": 3}."""
        return {
            "compute": self.compute.value,
            "device": self.device.value,
            "candidates": self.candidates,
            "rescued": self.rescued,
        }


@dataclass(frozen=True)
class KnnResult:
    """k nearest neighbours in both directions between a source and a target set.

    Attributes:
        fwd_sims: (n_src, k) float32, each source's neighbour similarities, descending.
        fwd_ids: (n_src, k) int64, target row ids of those neighbours (-1 = none found).
        bwd_sims: (n_tgt, k) float32, each target's neighbour similarities, descending.
        bwd_ids: (n_tgt, k) int64, source row ids of those neighbours (-1 = none found).
        info: how it was computed (default: fp32 on the CPU).
    """

    fwd_sims: np.ndarray
    fwd_ids: np.ndarray
    bwd_sims: np.ndarray
    bwd_ids: np.ndarray
    info: KnnInfo = field(default_factory=KnnInfo, compare=False)

    def __post_init__(self) -> None:
        if self.fwd_sims.shape != self.fwd_ids.shape:
            raise ValueError(f"fwd shapes differ: {self.fwd_sims.shape} vs {self.fwd_ids.shape}")
        if self.bwd_sims.shape != self.bwd_ids.shape:
            raise ValueError(f"bwd shapes differ: {self.bwd_sims.shape} vs {self.bwd_ids.shape}")
        if self.fwd_sims.ndim != 2 or self.bwd_sims.ndim != 2:
            raise ValueError("kNN arrays must be 2-d (n, k)")

    @property
    def n_src(self) -> int:
        """Number of source rows."""
        return int(self.fwd_sims.shape[0])

    @property
    def n_tgt(self) -> int:
        """Number of target rows."""
        return int(self.bwd_sims.shape[0])

    @property
    def k(self) -> int:
        """Neighbours kept per row (the smaller of the two directions' widths)."""
        return int(min(self.fwd_sims.shape[1], self.bwd_sims.shape[1]))


@dataclass(frozen=True)
class Candidates:
    """Mined candidate pairs, one row per pair, sorted by score descending.

    Attributes:
        src_idx: (m,) int64 source row ids.
        tgt_idx: (m,) int64 target row ids.
        cosine: (m,) float32 cosine (inner product) of the pair.
        score: (m,) float32 margin score of the pair.
        fwd_mean: (m,) float32 mean similarity of the source's k nearest targets.
        bwd_mean: (m,) float32 mean similarity of the target's k nearest sources.
        rank: (m,) int64 0-based rank of the target among the source's k neighbours,
            -1 when the pair was found only from the target side.
        direction: (m,) uint8 ``Direction`` bit flags (which directions proposed the pair).
    """

    src_idx: np.ndarray
    tgt_idx: np.ndarray
    cosine: np.ndarray
    score: np.ndarray
    fwd_mean: np.ndarray
    bwd_mean: np.ndarray
    rank: np.ndarray
    direction: np.ndarray

    def __post_init__(self) -> None:
        n = self.src_idx.shape[0]
        for name in ("tgt_idx", "cosine", "score", "fwd_mean", "bwd_mean", "rank", "direction"):
            arr = getattr(self, name)
            if arr.shape != (n,):
                raise ValueError(f"{name} has shape {arr.shape}, expected ({n},)")

    def __len__(self) -> int:
        return int(self.src_idx.shape[0])

    def take(self, index: np.ndarray) -> Candidates:
        """Return the rows selected by ``index`` (a boolean mask or integer array)."""
        return Candidates(
            src_idx=self.src_idx[index],
            tgt_idx=self.tgt_idx[index],
            cosine=self.cosine[index],
            score=self.score[index],
            fwd_mean=self.fwd_mean[index],
            bwd_mean=self.bwd_mean[index],
            rank=self.rank[index],
            direction=self.direction[index],
        )
