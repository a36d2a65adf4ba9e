"""Combining encoders: weighted concatenation of their normalised embeddings."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from mining.core.encoders.base import DEFAULT_BATCH_SIZE, Progress, SentenceEncoder
from mining.core.files import write_text_atomic


class ConcatEncoder(SentenceEncoder):
    """Concatenates the members' unit embeddings, member i scaled by sqrt(w_i / sum w), so the result is unit.

    The cosine of two combined embeddings is then the weighted mean of the members' cosines:
    ``cos = sum_i w_i cos_i / sum_i w_i`` (e.g. the pretrained encoder plus a DAN adapted to the domain).

    Args:
        encoders: two or more members.
        weights: one positive weight per member (default equal).
    """

    def __init__(self, encoders: Sequence[SentenceEncoder], weights: Sequence[float] | None = None) -> None:
        if len(encoders) < 1:
            raise ValueError("ConcatEncoder needs at least one encoder")
        weights = [1.0] * len(encoders) if weights is None else [float(w) for w in weights]
        if len(weights) != len(encoders) or min(weights) <= 0:
            raise ValueError(f"need one positive weight per encoder, got {weights}")
        self.encoders = tuple(encoders)
        self.weights = tuple(weights)
        self._scales = np.sqrt(np.asarray(weights, dtype=np.float64) / sum(weights)).astype(np.float32)
        self.name = "concat(" + ",".join(e.name for e in encoders) + ")"
        self.dim = sum(e.dim for e in encoders)
        covered = [e.languages for e in encoders if e.languages is not None]
        self.languages = frozenset.intersection(*covered) if covered else None

    def _encode(
        self, texts: list[str], lang: str, *, batch_size: int = DEFAULT_BATCH_SIZE, progress: Progress | None
    ) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        col, n, k = 0, len(texts), len(self.encoders)
        for i, (encoder, scale) in enumerate(zip(self.encoders, self._scales, strict=True)):
            member_progress = None if progress is None else functools.partial(_offset_progress, progress, i * n, k * n)
            emb = encoder.encode(texts, lang, batch_size=batch_size, progress=member_progress)
            np.multiply(emb, scale, out=out[:, col : col + encoder.dim])
            col += encoder.dim
        return out


def _offset_progress(progress: Progress, offset: int, total: int, done: int, _member_total: int) -> None:
    """Report a member's progress as part of the whole concatenation."""
    progress(offset + done, total)


def save_combination(path: str | os.PathLike[str], members: Sequence[tuple[str, str | None, float]]) -> None:
    """Write a combination file: its members as (registry name, model path or None, weight).

    A member's path is stored relative to the file's folder when it lies inside it, so a data folder can move whole.
    """
    path = Path(path)
    if len(members) < 2:
        raise ValueError("a combination needs at least two encoders")
    rows = []
    for name, member_path, weight in members:
        if not float(weight) > 0:  # NaN too
            raise ValueError(f"weights must be positive, got {weight} for {name!r}")
        if member_path is not None:
            absolute = Path(member_path).resolve()
            member_path = (
                str(absolute.relative_to(path.parent.resolve()))
                if absolute.is_relative_to(path.parent.resolve())
                else str(absolute)
            )
        rows.append({"name": name, "path": member_path, "weight": float(weight)})
    write_text_atomic(path, json.dumps({"members": rows}, indent=1))


def load_combination(
    path: str | os.PathLike[str], *, load_member: Callable[..., SentenceEncoder], threads: int | None = 1
) -> ConcatEncoder:
    """The ConcatEncoder a combination file describes, each member built by `load_member(name, **kwargs)` (the
    registry's `get_encoder`, passed in so this module does not import the registry that imports it)."""
    path = Path(path)
    try:
        rows = json.loads(path.read_text())["members"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a combination file ({exc})") from exc
    encoders = []
    for row in rows:
        kwargs: dict = {"threads": threads or 1}
        if row.get("path"):
            kwargs["path"] = str(path.parent / row["path"])
        encoders.append(load_member(row["name"], **kwargs))
    return ConcatEncoder(encoders, [row["weight"] for row in rows])
