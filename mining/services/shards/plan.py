"""The stages of a sharded sentence run, the plan that cuts a run into shards, and the run's shard files (written
under PCAPP_DATA_DIR/runs/run-<id>/ through a temp file and an atomic rename)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from django.conf import settings

from mining.core.files import atomic_path

from ...core.knn import KnnMethod
from ...core.knn.shards import row_shards

STAGES = ("plan", "embed", "train", "index", "search", "score", "filter", "write", "finish")

# Share of the run's progress bar per stage (split evenly over the stage's shards).
STAGE_WEIGHT = {
    "plan": 2,
    "embed": 30,
    "train": 3,
    "index": 5,
    "search": 40,
    "score": 4,
    "filter": 6,
    "write": 8,
    "finish": 2,
}


class ShardError(RuntimeError):
    """A shard cannot do its work (its inputs are missing or changed); the run fails with this message."""


@dataclass(frozen=True)
class Plan:
    """How a run is cut into shards (stored as the `plan` shard's result)."""

    n_src: int
    n_tgt: int
    shard_rows: int
    chunk_rows: int
    knn: str
    encoder_id: int
    # "flat" (float32 rows: exact search or IVF-Flat) or "pq" (compressed IVF-PQ shards, pqstages.py), the groups
    # of index shards a compressed search is cut into, bytes of code a row and candidates re-scored a query
    index: str = "flat"
    groups: int = 1
    pq_m: int = 64
    pq_candidates: int = 32

    @property
    def src_shards(self) -> list[tuple[int, int]]:
        return row_shards(self.n_src, self.shard_rows)

    @property
    def tgt_shards(self) -> list[tuple[int, int]]:
        return row_shards(self.n_tgt, self.shard_rows)

    @property
    def ivf(self) -> bool:
        """IVF-Flat index shards (float32 rows)."""
        return self.knn == KnnMethod.IVF.value and not self.pq

    @property
    def pq(self) -> bool:
        """Compressed IVF-PQ index shards, searched by group (pqstages.py)."""
        return self.index == "pq"

    def count(self, stage: str, chunks: int | None) -> int | None:
        """Shards of `stage`; None for filter/write before the score stage has counted the candidates."""
        s, t = len(self.src_shards), len(self.tgt_shards)
        return {
            "plan": 1,
            "embed": s + t,
            "train": 1 if self.ivf or self.pq else 0,
            "index": s + t if self.ivf or self.pq else 0,
            "search": (s + t) * self.groups if self.pq else s + t,
            "score": 1,
            "filter": chunks,
            "write": chunks,
            "finish": 1,
        }[stage]


def run_dir(run_id: int) -> Path:
    """The folder of one run's shard outputs (on the file system every worker shares)."""
    return Path(settings.PCAPP_DATA_DIR) / "runs" / f"run-{run_id}"


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Write `path` through a temp file in the same folder and an atomic rename (readers never see half a file)."""
    with atomic_path(path) as tmp:
        write(tmp)


def save_npz(path: Path, **arrays: np.ndarray) -> None:
    """Write named arrays to `path` as one .npz file, atomically."""

    def write(tmp: Path) -> None:
        with tmp.open("wb") as fh:
            np.savez(fh, **arrays)

    write_atomic(path, write)


def save_npy(tmp: Path, arr: np.ndarray) -> None:
    """Write one array to `tmp` as .npy (a writer for `write_atomic`)."""
    with tmp.open("wb") as fh:
        np.save(fh, arr)


def load_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of a shard output .npz; ShardError when the file is missing."""
    if not path.exists():
        raise ShardError(f"{path} is missing (the data folder must be shared by every worker); retry the run")
    with np.load(path) as data:
        return {name: data[name] for name in data.files}


def run_files_delete(run_id: int) -> None:
    """Remove a run's shard outputs (the embedding cache is the corpus's and stays)."""
    shutil.rmtree(run_dir(run_id), ignore_errors=True)
