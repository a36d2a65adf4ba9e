"""Training the DAN dual encoder (Guo et al. 2018): in-batch negatives, then mined hard negatives.

Stage 1 trains on the gold pairs with in-batch negatives and the bidirectional additive-margin softmax.
Stage 2 mines, with the stage-1 model, M hard negatives per source (the targets with the highest dot
product that are not a translation of it) and keeps training with each batch's hard negatives appended
to the candidates (K + K*M per source row). Every random draw derives from ``seed``; batches are a
function of (seed, stage, epoch), so a run resumed from its checkpoint ends with the same weights.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mining.core.encoders.base import Progress, normalize_lang
from mining.core.encoders.dan import (
    DanConfig,
    DanDualEncoder,
    DanEncoder,
    Side,
    batch_tensors,
    build_model,
    checkpoint_dict,
    embed_features,
    load_checkpoint,
    save_checkpoint,
)
from mining.core.encoders.tokenize import FeatureHasher, HashedBatch
from mining.core.knn import knn_exact
from mining.core.losses import additive_margin_softmax_loss

logger = logging.getLogger(__name__)


def _index_texts(texts: Sequence[str], seen: dict[str, int] | None = None) -> tuple[np.ndarray, dict[str, int]]:
    """(n,) int64 id of each text among the distinct texts (first-seen order), and the text -> id dict."""
    seen = {} if seen is None else seen
    ids = np.fromiter((seen.setdefault(t, len(seen)) for t in texts), dtype=np.int64, count=len(texts))
    return ids, seen


@dataclass(frozen=True)
class _Corpus:
    """Gold pairs as ids into the distinct source and target texts, with their hashed features."""

    s_id: np.ndarray  # (n,) int64
    t_id: np.ndarray  # (n,) int64
    src_feats: HashedBatch  # distinct source texts
    tgt_feats: HashedBatch  # distinct target texts
    gold_codes: np.ndarray  # sorted int64 codes s * n_t + t of every gold pair
    multi_gold: np.ndarray  # (n_distinct_sources,) bool: the source has several gold targets

    @classmethod
    def build(cls, src_texts: Sequence[str], tgt_texts: Sequence[str], hasher: FeatureHasher) -> _Corpus:
        s_id, s_map = _index_texts(src_texts)
        t_id, t_map = _index_texts(tgt_texts)
        codes = np.unique(s_id * len(t_map) + t_id)
        multi = np.bincount(codes // len(t_map), minlength=len(s_map)) > 1
        return cls(s_id, t_id, hasher(list(s_map)), hasher(list(t_map)), codes, multi)

    @property
    def n_tgt(self) -> int:
        return len(self.tgt_feats)

    def is_gold(self, s: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Elementwise: is (source text s, target text t) a gold pair? Broadcasts like ``s * n + t``."""
        return np.isin(s * self.n_tgt + t, self.gold_codes)


def mine_hard_negatives(
    src_emb: np.ndarray,
    tgt_emb: np.ndarray,
    gold_src: np.ndarray,
    gold_tgt: np.ndarray,
    m: int,
    *,
    batch_size: int = 4096,
) -> np.ndarray:
    """The m targets with the highest dot product with each source that are not gold pairs of it.

    Args:
        src_emb: (n_s, d) float32 source embeddings, rows L2-normalised.
        tgt_emb: (n_t, d) float32 target embeddings, rows L2-normalised (distinct texts).
        gold_src: (g,) int64 source rows of the gold pairs to exclude.
        gold_tgt: (g,) int64 target rows of the gold pairs to exclude.
        m: hard negatives per source.
        batch_size: queries per kNN call.

    Returns:
        (n_s, m) int64 target rows by decreasing score; -1 where fewer than m non-gold targets exist.
    """
    n_s, n_t = len(src_emb), len(tgt_emb)
    if m < 1 or n_s == 0:
        return np.full((n_s, max(m, 0)), -1, dtype=np.int64)
    gold_src, gold_tgt = np.asarray(gold_src, dtype=np.int64), np.asarray(gold_tgt, dtype=np.int64)
    codes = np.unique(gold_src * n_t + gold_tgt)
    per_source = np.bincount(codes // n_t, minlength=n_s) if len(codes) else np.zeros(n_s, dtype=np.int64)
    k = min(n_t, m + int(per_source.max()))
    _, ids = knn_exact(src_emb, tgt_emb, k, batch_size=batch_size)
    rows = np.arange(n_s, dtype=np.int64)[:, None]
    valid = (ids >= 0) & ~np.isin(rows * n_t + ids, codes)
    order = np.argsort(~valid, axis=1, kind="stable")[:, :m]
    picked = np.take_along_axis(ids, order, axis=1)
    picked[~np.take_along_axis(valid, order, axis=1)] = -1
    if picked.shape[1] < m:
        picked = np.pad(picked, ((0, 0), (0, m - picked.shape[1])), constant_values=-1)
    return picked


def _batches(n: int, batch_size: int, seed: int, stage: int, epoch: int) -> list[np.ndarray]:
    """A seeded shuffle of range(n) cut into batches of batch_size..2*batch_size-1 rows."""
    perm = np.random.default_rng([seed, stage, epoch]).permutation(n)
    return np.array_split(perm, max(1, n // batch_size))


def _optimizers(model: DanDualEncoder, lr: float, emb_lr: float) -> tuple[torch.optim.Adam, torch.optim.SparseAdam]:
    dense = [p for tower in (model.source, model.target) for p in tower.dense_parameters()]
    sparse = [model.source.embedding.weight, model.target.embedding.weight]
    return torch.optim.Adam(dense, lr=lr), torch.optim.SparseAdam(sparse, lr=emb_lr)


def _pair_loss(
    model: DanDualEncoder, corpus: _Corpus, rows: np.ndarray, hard: np.ndarray | None, config: DanConfig
) -> torch.Tensor:
    """The ranking loss of one batch of gold pairs (plus the batch's hard negatives when given)."""
    sid, tid = corpus.s_id[rows], corpus.t_id[rows]
    u = model.source(*batch_tensors(corpus.src_feats.take(sid)))
    v = model.target(*batch_tensors(corpus.tgt_feats.take(tid)))
    same = (sid[:, None] == sid[None, :]) | (tid[:, None] == tid[None, :])
    np.fill_diagonal(same, False)
    exclude = torch.from_numpy(same) if same.any() else None
    extra = extra_exclude = None
    if hard is not None:
        negs = np.unique(hard[sid].ravel())
        negs = negs[(negs >= 0) & ~np.isin(negs, tid)]
        if len(negs):
            extra = model.target(*batch_tensors(corpus.tgt_feats.take(negs)))
            # Only a source with several gold targets can have one among the negatives (its batch target
            # was removed above), so only those rows are checked.
            exclude_extra = np.zeros((len(sid), len(negs)), dtype=bool)
            multi = corpus.multi_gold[sid]
            if multi.any():
                exclude_extra[multi] = corpus.is_gold(sid[multi][:, None], negs[None, :])
            extra_exclude = torch.from_numpy(exclude_extra) if exclude_extra.any() else None
    return additive_margin_softmax_loss(
        u, v, config.margin, config.scale, True, extra, exclude=exclude, extra_exclude=extra_exclude
    )


def _fingerprint(src: Sequence[str], tgt: Sequence[str], langs: tuple[str, str], extra: Any) -> str:
    h = hashlib.blake2b(digest_size=16)
    for part in ("\x00".join(src), "\x01".join(tgt), repr(langs), repr(extra)):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x02")
    return h.hexdigest()


def _weigh_domain(src: list[str], tgt: list[str], domain: list[bool], weight: int) -> tuple[list[str], list[str]]:
    """The pairs with each in-domain pair repeated `weight - 1` more times (ahead of the rest)."""
    if len(domain) != len(src):
        raise ValueError(f"domain must be one flag per pair ({len(src)}), got {len(domain)}")
    own = [i for i, inside in enumerate(domain) if inside] * (weight - 1)
    return [src[i] for i in own] + src, [tgt[i] for i in own] + tgt


def _config_key(config: DanConfig) -> dict[str, Any]:
    """The config as fingerprinted: options added later enter only when off their default, so checkpoints written
    before they existed still resume."""
    key = config.to_dict()
    if key["bigrams"]:
        del key["bigrams"]
    if key["domain_weight"] == 1:
        del key["domain_weight"]
    if not key["char_ngrams"]:
        del key["char_ngrams"]
    return key


def train_dan(
    src_texts: Sequence[str],
    tgt_texts: Sequence[str],
    *,
    src_lang: str,
    tgt_lang: str,
    config: DanConfig | None = None,
    seed: int = 0,
    checkpoint_path: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    hard_negatives: bool = True,
    domain: Sequence[bool] | None = None,
) -> DanEncoder:
    """Train a DAN dual encoder on gold pairs (``src_texts[i]`` translates to ``tgt_texts[i]``).

    Args:
        src_texts, tgt_texts: n >= 2 aligned sentences each.
        src_lang, tgt_lang: the towers' languages.
        config: hyper-parameters (``DanConfig()`` by default).
        seed: seeds the initial weights, the batch shuffles and so the whole run.
        checkpoint_path: resumable state is written here (at epoch ends, every ``config.checkpoint_every``
            steps and after mining) and the finished model at the end. If it already holds a run with the
            same data, languages, config and seed, training resumes from it.
        progress: ``progress(done, total)`` in optimisation steps over both stages.
        hard_negatives: run the second, hard-negative stage.
        domain: one flag per pair, True for the text the encoder is for (the others are background pairs): those
            pairs are seen ``config.domain_weight`` times per epoch (repeated texts are never their own negatives).

    Returns:
        The trained encoder (source tower for ``src_lang``, target tower for ``tgt_lang``).
    """
    config = config or DanConfig()
    src_lang, tgt_lang = normalize_lang(src_lang), normalize_lang(tgt_lang)
    src_texts, tgt_texts = list(src_texts), list(tgt_texts)
    if len(src_texts) != len(tgt_texts):
        raise ValueError(f"{len(src_texts)} source texts but {len(tgt_texts)} target texts")
    if len(src_texts) < 2:
        raise ValueError("need at least 2 pairs (in-batch negatives)")
    if domain is not None:
        src_texts, tgt_texts = _weigh_domain(src_texts, tgt_texts, list(domain), config.domain_weight)
    use_hard = hard_negatives and config.hard_negatives > 0 and config.hard_epochs > 0
    stages = [(1, config.epochs)] + ([(2, config.hard_epochs)] if use_hard else [])
    fingerprint = _fingerprint(src_texts, tgt_texts, (src_lang, tgt_lang), (_config_key(config), seed, use_hard))

    corpus = _Corpus.build(src_texts, tgt_texts, config.hasher())
    n = len(src_texts)
    per_epoch = max(1, n // config.batch_size)  # as cut by _batches
    total = per_epoch * sum(epochs for _, epochs in stages)

    model = build_model(config, seed)
    dense_opt, sparse_opt = _optimizers(model, config.lr, config.emb_lr)
    state: dict[str, Any] = {"stage": 1, "epoch": 0, "step": 0, "done": 0, "hard": None}
    if checkpoint_path is not None and Path(checkpoint_path).is_file():
        state = _resume(checkpoint_path, fingerprint, model, dense_opt, sparse_opt, state)
        if state["stage"] > len(stages):
            return DanEncoder(model.eval(), src_lang, tgt_lang)
        logger.info("resuming DAN training at stage %(stage)s epoch %(epoch)s step %(step)s", state)

    def save(train_state: dict[str, Any] | None) -> None:
        if checkpoint_path is None:
            return
        if train_state is not None:
            train_state = {
                **train_state,
                "dense_opt": dense_opt.state_dict(),
                "sparse_opt": sparse_opt.state_dict(),
                "hard": None if train_state["hard"] is None else torch.from_numpy(train_state["hard"]),
            }
        save_checkpoint(checkpoint_path, checkpoint_dict(model, src_lang, tgt_lang, train_state, fingerprint))

    model.train()
    for stage, epochs in stages:
        if stage < state["stage"]:
            continue
        if stage == 2 and state["hard"] is None:
            state["hard"] = _mine_for_training(model, corpus, config)
            save(state)
        hard = state["hard"] if stage == 2 else None
        for epoch in range(state["epoch"], epochs):
            batches = _batches(n, config.batch_size, seed, stage, epoch)
            for step in range(state["step"], len(batches)):
                loss = _pair_loss(model, corpus, batches[step], hard, config)
                dense_opt.zero_grad(set_to_none=True)
                sparse_opt.zero_grad(set_to_none=True)
                loss.backward()
                dense_opt.step()
                sparse_opt.step()
                state.update(step=step + 1, done=state["done"] + 1)
                if config.checkpoint_every and state["done"] % config.checkpoint_every == 0:
                    save(state)
                if progress is not None:
                    progress(state["done"], total)
            state.update(epoch=epoch + 1, step=0)
            logger.info("DAN stage %d epoch %d done (last loss %.4f)", stage, epoch + 1, loss.item())
            save(state)
        state.update(stage=stage + 1, epoch=0, step=0)
    model.eval()
    save(None)
    return DanEncoder(model, src_lang, tgt_lang)


def _resume(
    path: str | os.PathLike[str],
    fingerprint: str,
    model: DanDualEncoder,
    dense_opt: torch.optim.Optimizer,
    sparse_opt: torch.optim.Optimizer,
    fresh: dict[str, Any],
) -> dict[str, Any]:
    """Load a checkpoint of the same run into model and optimisers; return its training state."""
    data = load_checkpoint(path)
    if data.get("fingerprint") != fingerprint:
        raise ValueError(f"{path} holds a different training run (data, languages, config or seed); remove it")
    model.load_state_dict(data["model"])
    train_state = data["train_state"]
    if data.get("finished"):
        logger.info("%s already holds this run's finished model; not retraining", path)
        return {**fresh, "stage": 3}
    dense_opt.load_state_dict(train_state["dense_opt"])
    sparse_opt.load_state_dict(train_state["sparse_opt"])
    hard = train_state["hard"]
    keys = ("stage", "epoch", "step", "done")
    return {**{k: int(train_state[k]) for k in keys}, "hard": None if hard is None else hard.numpy()}


def _mine_for_training(model: DanDualEncoder, corpus: _Corpus, config: DanConfig) -> np.ndarray:
    """(n_distinct_sources, M) int64 hard-negative target ids mined with the current model."""
    bs = config.mining_batch_size
    src_emb = embed_features(model, corpus.src_feats, Side.SOURCE, bs)
    tgt_emb = embed_features(model, corpus.tgt_feats, Side.TARGET, bs)
    hard = mine_hard_negatives(src_emb, tgt_emb, corpus.s_id, corpus.t_id, config.hard_negatives, batch_size=bs)
    model.train()
    logger.info("mined %d hard negatives for %d sources", int((hard >= 0).sum()), len(hard))
    return hard
