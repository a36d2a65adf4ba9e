"""The bilingual DAN dual encoder of Guo et al. 2018 (model, encoding, checkpoint files).

Each language has its own tower (no sharing): hashed word-unigram and bigram embeddings (unigrams only with
``bigrams=False``), summed and divided by sqrt(n) (n = number of features), then a residual feed-forward net
(320, 320, 500, 500; ReLU on the first three, a skip connection wherever the width is unchanged) and a linear
projection to the 512-d embedding, L2-normalised. Training lives in ``dan_train``.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from mining.core.encoders.base import (
    DEFAULT_BATCH_SIZE,
    Progress,
    SentenceEncoder,
    normalize_lang,
)
from mining.core.encoders.configs import DanConfig
from mining.core.encoders.tokenize import HashedBatch
from mining.core.files import atomic_path
from mining.core.hw import Compute, resolve_compute

logger = logging.getLogger(__name__)

CHECKPOINT_FORMAT = "pcapp-dan"
CHECKPOINT_VERSION = 1


class Side(enum.Enum):
    """Which tower of the dual encoder."""

    SOURCE = "source"
    TARGET = "target"


class DanTower(nn.Module):
    """One language's encoder: hashed bag of features -> residual MLP -> unit vector."""

    def __init__(self, config: DanConfig) -> None:
        super().__init__()
        # Passing the storage skips EmbeddingBag's own N(0, 1) fill of the (large) table before ours.
        table = torch.empty(config.n_buckets, config.emb_dim)
        self.embedding = nn.EmbeddingBag(config.n_buckets, config.emb_dim, mode="sum", sparse=True, _weight=table)
        nn.init.normal_(self.embedding.weight, std=config.init_std)
        widths = (config.emb_dim, *config.hidden)
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:], strict=True))
        self.projection = nn.Linear(widths[-1], config.out_dim)

    def forward(self, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        """Embed a CSR batch.

        Args:
            ids: (nnz,) int64 bucket ids.
            offsets: (n + 1,) int64 CSR offsets.

        Returns:
            (n, out_dim) float32, rows L2-normalised.
        """
        counts = (offsets[1:] - offsets[:-1]).clamp(min=1).to(torch.float32)
        x = self.embedding(ids, offsets[:-1]) / counts.sqrt().unsqueeze(1)
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            h = layer(x)
            if i < last:
                h = F.relu(h)
            x = h + x if h.shape == x.shape else h
        return F.normalize(self.projection(x), dim=1)

    def forward_bf16(self, ids: torch.Tensor, offsets: torch.Tensor, weights: list[torch.Tensor]) -> torch.Tensor:
        """``forward`` with bf16 matrix products (inference only): the fp32 activations and ``weights`` (each layer's
        and the projection's weight, transposed, as ``bf16_weights`` gives them) in bf16, fp32 accumulation; the
        feature sum, biases, residuals and the normalisation stay fp32.

        Returns:
            (n, out_dim) float32, rows L2-normalised (cosine to ``forward``'s >= 0.9999 measured).
        """
        counts = (offsets[1:] - offsets[:-1]).clamp(min=1).to(torch.float32)
        x = self.embedding(ids, offsets[:-1]) / counts.sqrt().unsqueeze(1)
        last = len(self.layers) - 1
        for i, (layer, w) in enumerate(zip(self.layers, weights, strict=False)):
            h = torch.mm(x.to(torch.bfloat16), w).to(torch.float32).add_(layer.bias)
            if i < last:
                h = F.relu_(h)
            x = h.add_(x) if h.shape == x.shape else h
        out = torch.mm(x.to(torch.bfloat16), weights[-1]).to(torch.float32).add_(self.projection.bias)
        return F.normalize(out, dim=1)

    def bf16_weights(self) -> list[torch.Tensor]:
        """The layers' and the projection's weights as (in, out) bf16 copies, for ``forward_bf16``."""
        mats = [layer.weight for layer in self.layers] + [self.projection.weight]
        return [m.detach().T.contiguous().to(torch.bfloat16) for m in mats]

    def dense_parameters(self) -> list[nn.Parameter]:
        """Every parameter but the (sparse-gradient) feature embeddings."""
        return [p for name, p in self.named_parameters() if not name.startswith("embedding.")]


class DanDualEncoder(nn.Module):
    """Separate source and target towers; score(x, y) = u . v."""

    def __init__(self, config: DanConfig) -> None:
        super().__init__()
        self.config = config
        self.source = DanTower(config)
        self.target = DanTower(config)

    def tower(self, side: Side) -> DanTower:
        """The tower for ``side``."""
        return self.source if side is Side.SOURCE else self.target


def build_model(config: DanConfig, seed: int) -> DanDualEncoder:
    """A freshly initialised model; the same seed gives the same weights (global RNG left untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return DanDualEncoder(config)


def batch_tensors(batch: HashedBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, offsets) int64 tensors sharing the batch's memory."""
    return torch.from_numpy(batch.ids), torch.from_numpy(batch.offsets)


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` intra-op torch threads (None: leave as is), then restore."""
    if threads is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def embed_features(
    model: DanDualEncoder, feats: HashedBatch, side: Side, batch_size: int, progress: Progress | None = None
) -> np.ndarray:
    """Embed pre-hashed sentences with one tower, in eval mode without gradients.

    Returns:
        (n, out_dim) float32, rows L2-normalised.
    """
    n = len(feats)
    out = np.empty((n, model.config.out_dim), dtype=np.float32)
    tower = model.tower(side)
    was_training = tower.training
    tower.eval()
    try:
        with torch.inference_mode():
            for start in range(0, n, batch_size):
                rows = np.arange(start, min(start + batch_size, n))
                out[rows] = tower(*batch_tensors(feats.take(rows))).numpy()
                if progress is not None:
                    progress(int(rows[-1]) + 1, n)
    finally:
        tower.train(was_training)
    return out


class DanEncoder(SentenceEncoder):
    """A trained DAN dual encoder behind the ``SentenceEncoder`` interface.

    ``encode(texts, lang)`` uses the source tower for ``src_lang`` and the target tower for ``tgt_lang``.

    Args:
        model: the trained dual encoder (not copied; treat it as frozen).
        src_lang: language of the source tower.
        tgt_lang: language of the target tower (must differ from ``src_lang``).
        threads: torch intra-op threads while encoding (None: the process setting).
        compute: "auto" (bf16 matrix products where the CPU has bf16 units, ``hw.cpu_compute()``), "bf16" or
            "fp32" (the training arithmetic), or a ``Compute``. bf16 embeddings are the fp32 ones to cosine
            >= 0.999 (``DanTower.forward_bf16``).
    """

    name = "dan"

    def __init__(
        self,
        model: DanDualEncoder,
        src_lang: str,
        tgt_lang: str,
        threads: int | None = 1,
        compute: Compute | str | None = "auto",
    ) -> None:
        self.src_lang, self.tgt_lang = normalize_lang(src_lang), normalize_lang(tgt_lang)
        if self.src_lang == self.tgt_lang:
            raise ValueError(f"source and target languages must differ, both are {self.src_lang!r}")
        self.model = model.eval()
        self.config = model.config
        self.dim = model.config.out_dim
        self.languages = frozenset({self.src_lang, self.tgt_lang})
        self.threads = threads
        self.compute = resolve_compute(compute)
        self._hasher = model.config.hasher()

    def side_of(self, lang: str) -> Side:
        """The tower that embeds ``lang`` (raises ``UnsupportedLanguage``)."""
        return Side.SOURCE if self.check_language(lang) == self.src_lang else Side.TARGET

    def _encode(
        self, texts: list[str], lang: str, *, batch_size: int = DEFAULT_BATCH_SIZE, progress: Progress | None
    ) -> np.ndarray:
        side = self.side_of(lang)
        n = len(texts)
        out = np.empty((n, self.dim), dtype=np.float32)
        tower = self.model.tower(side)
        with torch_threads(self.threads), torch.inference_mode():
            # bf16 copies per call (about 1 ms): a model still being trained never meets stale weights
            weights = tower.bf16_weights() if self.compute is Compute.BF16 else None
            for start in range(0, n, batch_size):
                stop = min(start + batch_size, n)
                ids, offsets = batch_tensors(self._hasher(texts[start:stop]))
                emb = tower(ids, offsets) if weights is None else tower.forward_bf16(ids, offsets, weights)
                out[start:stop] = emb.numpy()
                if progress is not None:
                    progress(stop, n)
        return out

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write a finished-model checkpoint (atomically)."""
        save_checkpoint(path, checkpoint_dict(self.model, self.src_lang, self.tgt_lang))

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], *, threads: int | None = 1, compute: Compute | str | None = "auto"
    ) -> DanEncoder:
        """Load a checkpoint written by ``save`` or ``train_dan`` (a mid-training one loads its weights)."""
        data = load_checkpoint(path)
        model = DanDualEncoder(DanConfig.from_dict(data["config"]))
        model.load_state_dict(data["model"])
        if not data.get("finished", False):
            logger.warning("%s is a mid-training checkpoint; loading its current weights", path)
        return cls(model, data["src_lang"], data["tgt_lang"], threads=threads, compute=compute)


def checkpoint_dict(
    model: DanDualEncoder,
    src_lang: str,
    tgt_lang: str,
    train_state: dict[str, Any] | None = None,
    fingerprint: str | None = None,
) -> dict[str, Any]:
    """The checkpoint payload: config, languages, weights, (mid-training) the resumable state, and the
    fingerprint of the training run that produced it (None for a model saved outside ``train_dan``)."""
    return {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "config": model.config.to_dict(),
        "src_lang": src_lang,
        "tgt_lang": tgt_lang,
        "model": model.state_dict(),
        "finished": train_state is None,
        "train_state": train_state,
        "fingerprint": fingerprint,
    }


def save_checkpoint(path: str | os.PathLike[str], data: dict[str, Any]) -> None:
    """torch.save to a temporary file beside ``path``, then ``os.replace`` (never a torn file)."""
    with atomic_path(path) as tmp:
        torch.save(data, tmp)


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check a DAN checkpoint (tensors and plain types only: ``weights_only``)."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"no DAN checkpoint at {path}")
    data = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a DAN checkpoint")
    if data.get("version") != CHECKPOINT_VERSION:
        raise ValueError(f"{path}: unsupported DAN checkpoint version {data.get('version')}")
    return data
