"""Document embeddings for document matching: Sentence-Avg and HiDE (Guo et al. 2019), over frozen sentence
embeddings. Documents are a flat (n_sentences, d) array plus `offsets` (n_docs + 1): document i owns rows
offsets[i]:offsets[i + 1]; segment sums replace padding, so documents of any length batch without masks.

Document BoW (a DAN over the document's unigrams) and the one interface all document embeddings share are in
`docembed`; retrieval reuses `knn` and `candidates`.
"""

from __future__ import annotations

import enum
import logging
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch
from scipy import sparse
from torch import nn

from mining.core.files import atomic_path

from .losses import additive_margin_softmax_loss

logger = logging.getLogger(__name__)
Progress = Callable[[int, int], None]


def check_offsets(offsets: np.ndarray, n_rows: int) -> np.ndarray:
    """Validate (n_docs + 1,) int64 offsets: start at 0, non-decreasing, end at n_rows."""
    offsets = np.asarray(offsets, dtype=np.int64)
    if offsets.ndim != 1 or len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != n_rows:
        raise ValueError(f"offsets must run from 0 to {n_rows}, got {offsets[:3]}...{offsets[-3:]}")
    if np.any(np.diff(offsets) < 0):
        raise ValueError("offsets must be non-decreasing")
    return offsets


def _normalise(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0).astype(np.float32)


def sentence_avg(emb: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Sentence-Avg: the mean of each document's sentence embeddings, L2-normalised; (n_docs, d) float32.

    Empty documents get a zero row (they match nothing).
    """
    offsets = check_offsets(offsets, len(emb))
    # float32 sums as one sparse (documents x sentences) product: a float64 copy of the whole side cost 11-16 s and
    # 1.2 GB at 300k sentences, and np.add.reduceat over rows 1.1 s at 150k x 512 (this: 0.13 s). Empty documents
    # have empty rows, so their sums are zero.
    n_rows = len(emb)
    ones = sparse.csr_matrix(
        (np.ones(n_rows, np.float32), np.arange(n_rows), offsets.astype(np.int64)), shape=(len(offsets) - 1, n_rows)
    )
    sums = np.asarray(ones @ np.asarray(emb, dtype=np.float32), dtype=np.float32)
    lengths = np.diff(offsets)
    return _normalise(sums / np.maximum(lengths, 1)[:, None])


class Pooling(enum.Enum):
    """Where HiDE pools sentence vectors into a document vector."""

    DNN_POOL = "dnn_pool"  # adapt every sentence, then average (HiDE's best on noisy splits)
    POOL_DNN = "pool_dnn"  # average, then adapt


@dataclass(frozen=True)
class HideConfig:
    """HiDE adapter and training settings (paper: batch 200, SGD lr 1e-4, margin 0.5 en-fr / 0.6 en-es).

    On a CPU and a few thousand document pairs the paper's plain SGD at 1e-4 barely moves in minutes; Adam at 1e-3
    is the default here (`optimizer="sgd", lr=1e-4` reproduces the paper's setting).

    `crops`: the paper trained on 86k UN document pairs; with hundreds, HiDE overfits and falls below Sentence-Avg.
    Each training pair also gives `crops` proportional crops (the same random share [f0, f1) of both documents, at
    least `min_crop` of each), drawn once from the seed: more, shorter, loosely aligned pairs, no extra memory (a crop
    is a row range). Crops assume translations keep their original's order (set 0 where they do not). On GIMP manual
    pages en-fr (342 training pairs + their re-split, 343 test pages, noisy split) HiDE DNN->pooling went from P@1
    98.3 without crops (30 epochs) to 100.0 with 8 (10 epochs); Sentence-Avg 97.7.

    `skip` (default on; off is the paper's tower): each tower adds a linear path from its input and gates the adapter,
    starting at 0, so HiDE starts as Sentence-Avg (`HideTower`). Trained on the GIMP manual and tested on man pages
    (noisy), the paper's tower fell to P@1 85.5 en-fr against Sentence-Avg's 97.1; with the skip and the epoch kept on
    validation pairs (`train_hide`) it got 97.6 en-fr and 95.8 en-es (Sentence-Avg 97.0 and 95.1).
    """

    hidden: tuple[int, ...] = (320, 320, 500, 500)
    pooling: str = Pooling.DNN_POOL.value
    batch_size: int = 200
    lr: float = 1e-3
    optimizer: str = "adam"
    margin: float = 0.5
    scale: float = 20.0
    epochs: int = 10
    crops: int = 8
    min_crop: float = 0.2
    skip: bool = True


class HideTower(nn.Module):
    """The residual 4-layer adapter: ReLU on the first three layers, tanh on the last; skip where widths match.

    With `skip`, the tower's output is `P x + g * adapter(x)`: a linear path from its input with P (out, in)
    initialised to orthonormal rows, and a learned gate g that starts at 0 (ReZero). Before training the tower is then
    a near-isometry (the sentence embeddings' cosines kept; exactly when out >= in), so HiDE starts as Sentence-Avg and
    learns a correction to it. Both towers must start with the same P (`HideModel` draws it from one seed).
    """

    def __init__(self, in_dim: int, hidden: tuple[int, ...], skip: bool = False) -> None:
        super().__init__()
        dims = (in_dim, *hidden)
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:], strict=True))
        self.skip = self.gate = None
        if skip:
            self.skip = nn.Linear(in_dim, hidden[-1], bias=False)
            nn.init.orthogonal_(self.skip.weight)
            self.gate = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Without autograd the activation and the skip run in place: two fewer (rows, width) buffers per layer, each
        # freshly page-faulted at 60k rows (~20 % of embedding 300k sentences on 2 cores). Same values either way.
        in_place = not torch.is_grad_enabled()
        direct = self.skip(x) if self.skip is not None else None
        for i, layer in enumerate(self.layers):
            y = layer(x)
            if i == len(self.layers) - 1:
                y = torch.tanh_(y) if in_place else torch.tanh(y)
            else:
                y = torch.relu_(y) if in_place else torch.relu(y)
            if y.shape == x.shape:
                x = y.add_(x) if in_place else x + y
            else:
                x = y
        if direct is not None:
            x = x.mul_(self.gate).add_(direct) if in_place else x * self.gate + direct
        return x


def paired_towers(in_dim: int, hidden: tuple[int, ...], *, skip: bool, seed: int) -> nn.ModuleDict:
    """A "src" and a "tgt" `HideTower`; with `skip`, both start from the same skip projection, drawn from `seed`
    (the rest of each tower differs freely), so an untrained pair keeps the inputs' cosines across sides."""
    towers = {}
    for side in ("src", "tgt"):
        towers[side] = HideTower(in_dim, hidden, skip=skip)
        if towers[side].skip is not None:
            with torch.random.fork_rng():
                torch.manual_seed(seed)
                nn.init.orthogonal_(towers[side].skip.weight)
    return nn.ModuleDict(towers)


class HideModel(nn.Module):
    """Separate source and target towers over frozen sentence embeddings."""

    def __init__(self, in_dim: int, config: HideConfig) -> None:
        super().__init__()
        self.config = config
        self.in_dim = in_dim
        self.history: list[float] = []  # validation P@1 per epoch, from 0 (untrained), when trained with one
        self.margins: list[float] = []  # validation retrieval margin per epoch (HideValidation.margin)
        self.best_epoch: int | None = None
        self.towers = paired_towers(in_dim, config.hidden, skip=config.skip, seed=torch.initial_seed() % (2**63))

    def doc_vectors(self, emb: torch.Tensor, offsets: torch.Tensor, side: str) -> torch.Tensor:
        """(n_docs, out) document vectors, L2-normalised; segment means via index_add (no padding)."""
        lengths = offsets[1:] - offsets[:-1]
        seg = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
        tower = self.towers[side]
        pooled_input = tower(emb) if self.config.pooling == Pooling.DNN_POOL.value else emb
        sums = torch.zeros(len(lengths), pooled_input.shape[1], dtype=emb.dtype).index_add_(0, seg, pooled_input)
        means = sums / lengths.clamp(min=1).unsqueeze(1).to(emb.dtype)
        out = means if self.config.pooling == Pooling.DNN_POOL.value else tower(means)
        out = torch.where((lengths > 0).unsqueeze(1), out, torch.zeros_like(out))
        return nn.functional.normalize(out, dim=1)

    def embed(self, emb: np.ndarray, offsets: np.ndarray, side: str, *, batch_docs: int = 2048) -> np.ndarray:
        """Document embeddings (n_docs, out) float32 for one side, in batches of documents."""
        offsets = check_offsets(offsets, len(emb))
        parts = []
        self.eval()
        with torch.no_grad():
            for start in range(0, len(offsets) - 1, batch_docs):
                stop = min(len(offsets) - 1, start + batch_docs)
                lo, hi = offsets[start], offsets[stop]
                sub = torch.from_numpy(np.ascontiguousarray(emb[lo:hi], dtype=np.float32))
                off = torch.from_numpy(offsets[start : stop + 1] - lo)
                parts.append(self.doc_vectors(sub, off, side).numpy())
        return np.concatenate(parts) if parts else np.zeros((0, self.config.hidden[-1]), np.float32)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write weights and config atomically."""
        with atomic_path(path) as tmp:
            torch.save({"config": asdict(self.config), "in_dim": self.in_dim, "state": self.state_dict()}, tmp)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> HideModel:
        data = torch.load(path, weights_only=False)
        cfg = {"skip": False, **data["config"]}  # models saved before the skip option have none
        model = cls(data["in_dim"], HideConfig(**{**cfg, "hidden": tuple(cfg["hidden"])}))
        model.load_state_dict(data["state"])
        return model


def _take_docs(
    emb: np.ndarray, starts: np.ndarray, ends: np.ndarray, docs: np.ndarray
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows and offsets of a batch of documents (row ranges starts[d]:ends[d], in the given order)."""
    lengths = ends[docs] - starts[docs]
    rows = np.concatenate([np.arange(starts[d], ends[d]) for d in docs]) if len(docs) else np.empty(0, int)
    new_off = np.concatenate([[0], np.cumsum(lengths)])
    return torch.from_numpy(np.ascontiguousarray(emb[rows], dtype=np.float32)), torch.from_numpy(new_off)


def document_crops(
    src_offsets: np.ndarray, tgt_offsets: np.ndarray, n_crops: int, rng: np.random.Generator, *, min_share: float = 0.2
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(src_starts, src_ends, tgt_starts, tgt_ends) of the aligned pairs plus `n_crops` proportional crops of each.

    A crop takes the same share [f0, f1) of both documents (f1 - f0 >= min_share, at least one row per side), so a
    crop pair is roughly parallel wherever the translation keeps the order of its original. Empty documents give no
    crops."""
    s0, s1 = src_offsets[:-1].astype(np.int64), src_offsets[1:].astype(np.int64)
    t0, t1 = tgt_offsets[:-1].astype(np.int64), tgt_offsets[1:].astype(np.int64)
    keep = np.repeat((s1 > s0) & (t1 > t0), n_crops)
    f0 = rng.uniform(0.0, 1.0 - min_share, size=len(s0) * n_crops)
    f1 = f0 + min_share + rng.uniform(0.0, 1.0, size=len(f0)) * (1.0 - min_share - f0)

    def cut(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a, b = np.repeat(a, n_crops), np.repeat(b, n_crops)
        lo = a + np.floor(f0 * (b - a)).astype(np.int64)
        hi = np.maximum(a + np.floor(f1 * (b - a)).astype(np.int64), lo + 1)
        return lo[keep], np.minimum(hi, b)[keep]

    cs, ce = cut(s0, s1)
    ct, cte = cut(t0, t1)
    return (np.concatenate([s0, cs]), np.concatenate([s1, ce]), np.concatenate([t0, ct]), np.concatenate([t1, cte]))


@dataclass(frozen=True)
class HideValidation:
    """Aligned document pairs (source doc i translates target doc i) on which `train_hide` picks its epoch."""

    src_emb: np.ndarray
    src_offsets: np.ndarray
    tgt_emb: np.ndarray
    tgt_offsets: np.ndarray

    def p_at_1(self, model: HideModel) -> float:
        """Share of source documents whose nearest target document (cosine, over all of them) is their own."""
        return self.scores(model)[0]

    def margin(self, model: HideModel) -> float:
        """Mean, over source documents, of the cosine to their own target minus the best cosine to any other: how
        safely they are retrieved (breaks ties of P@1 when the validation pairs are easy and P@1 saturates)."""
        return self.scores(model)[1]

    def scores(self, model: HideModel) -> tuple[float, float]:
        """(P@1, margin), from one embedding of both sides."""
        u = model.embed(self.src_emb, self.src_offsets, "src")
        v = model.embed(self.tgt_emb, self.tgt_offsets, "tgt")
        if not len(u) or not len(v):
            return 0.0, 0.0
        n = len(u)
        hits, margins = 0, np.zeros(n, dtype=np.float64)
        for start in range(0, n, 2048):  # row blocks of one similarity matrix serve both figures, in bounded memory
            sims = u[start : start + 2048] @ v.T
            rows = np.arange(len(sims))
            hits += int((sims.argmax(axis=1) == rows + start).sum())
            gold = sims[rows, rows + start].copy()
            sims[rows, rows + start] = -np.inf
            margins[start : start + len(sims)] = gold - sims.max(axis=1)
        if n < 2 or len(v) < 2:
            return hits / n, 0.0
        return hits / n, float(margins.mean())


def train_hide(
    src_emb: np.ndarray,
    src_offsets: np.ndarray,
    tgt_emb: np.ndarray,
    tgt_offsets: np.ndarray,
    *,
    config: HideConfig | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    validation: HideValidation | None = None,
) -> HideModel:
    """Train HiDE on aligned document pairs (source doc i translates target doc i) with the bidirectional
    additive-margin softmax over in-batch negatives; sentence embeddings stay frozen.

    With `validation`, P@1 on it is measured before training (with a skip tower, that is Sentence-Avg's) and after
    every epoch, and the model keeps the weights of the best: the highest P@1, and among equal P@1 the largest mean
    retrieval margin (`HideValidation.margin`; easy validation pairs saturate P@1 at every epoch, and the earliest
    would then always be Sentence-Avg). `model.history` holds the P@1 figures, `model.margins` the margins and
    `model.best_epoch` the epoch kept (0: untrained)."""
    config = config or HideConfig()
    src_offsets = check_offsets(src_offsets, len(src_emb))
    tgt_offsets = check_offsets(tgt_offsets, len(tgt_emb))
    n = len(src_offsets) - 1
    if n != len(tgt_offsets) - 1 or n < 2:
        raise ValueError(
            f"need the same number (>= 2) of source and target documents, got {n} and {len(tgt_offsets) - 1}"
        )
    s_start, s_end, t_start, t_end = document_crops(
        src_offsets, tgt_offsets, config.crops, np.random.default_rng(seed), min_share=config.min_crop
    )
    n = len(s_start)
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = HideModel(src_emb.shape[1], config)
    opt = (
        torch.optim.Adam(model.parameters(), lr=config.lr)
        if config.optimizer == "adam"
        else torch.optim.SGD(model.parameters(), lr=config.lr)
    )
    steps_per_epoch = -(-n // config.batch_size)
    total, done = steps_per_epoch * config.epochs, 0
    history: list[float] = []
    margins: list[float] = []
    best_state, best_epoch = None, 0

    def check(epoch: int) -> None:
        nonlocal best_state, best_epoch
        if validation is None:
            return
        p1, margin = validation.scores(model)
        history.append(p1)
        margins.append(margin)
        if best_state is None or (history[-1], margins[-1]) > (history[best_epoch], margins[best_epoch]):
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            best_epoch = epoch
        logger.info("HiDE validation P@1 after epoch %d: %.4f (margin %.4f)", epoch, history[-1], margins[-1])

    check(0)
    model.train()
    for epoch in range(config.epochs):
        order = torch.randperm(n, generator=gen).numpy()
        for start in range(0, n, config.batch_size):
            docs = order[start : start + config.batch_size]
            if len(docs) < 2:
                continue
            s_rows, s_off = _take_docs(src_emb, s_start, s_end, docs)
            t_rows, t_off = _take_docs(tgt_emb, t_start, t_end, docs)
            u = model.doc_vectors(s_rows, s_off, "src")
            v = model.doc_vectors(t_rows, t_off, "tgt")
            loss = additive_margin_softmax_loss(u, v, margin=config.margin, scale=config.scale)
            opt.zero_grad()
            loss.backward()
            opt.step()
            done += 1
            if progress:
                progress(done, total)
        logger.debug("HiDE epoch %d loss %.4f", epoch, loss.item())
        check(epoch + 1)
        model.train()
    if best_state is not None:
        model.load_state_dict(best_state)
    model.history, model.margins, model.best_epoch = history, margins, best_epoch
    model.eval()
    return model
