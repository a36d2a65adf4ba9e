"""Fine-tuning a trained DAN on reviewed pairs: GOOD pairs as positives, high-scoring BAD pairs as hard negatives.

The training signal is the one the encoder was trained with (Guo et al. 2018, section 2.3): the in-batch
translation-ranking softmax, with the batch's hard negatives appended to every row's candidates. There is no
separate term pushing each BAD pair's own score down: reviewers' BAD pairs are often near-translations (partial
translations, repeated boilerplate), and forcing those apart wrecked the encoder (held-out P@1 71.3 -> 59.3 in
``bench/feedback_loop.py``). Against drift the step sizes are a tenth of training's, the original training pairs
are replayed beside the reviewed ones, and the epoch kept is the best on a validation split of the labelled pairs
(the starting weights count as epoch 0, so fine-tuning that does not help there changes nothing).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from mining.core.encoders.base import Progress
from mining.core.encoders.dan import DanDualEncoder, DanEncoder, batch_tensors
from mining.core.encoders.dan_train import _batches, _Corpus, _index_texts, _optimizers
from mining.core.encoders.tokenize import HashedBatch
from mining.core.losses import additive_margin_softmax_loss

logger = logging.getLogger(__name__)

Pairs = Sequence[tuple[str, str]]


@dataclass(frozen=True)
class FineTuneConfig:
    """Hyper-parameters of review fine-tuning.

    Attributes:
        epochs: passes over the training positives (reviewed GOOD pairs plus replayed pairs).
        lr: Adam learning rate of the dense layers (training's default is 1e-3).
        emb_lr: SparseAdam learning rate of the feature embeddings (training's default is 3e-2).
        validation_share: share of the labelled GOOD and of the BAD pairs held out to choose the epoch
            (0: no validation, the last epoch is kept).
        min_validation: below this many validation GOOD pairs, no validation split is made.
        hard_negatives: append the hard negatives to the training batches (False: they only enter validation,
            which makes the positives-only control of an experiment).
        seed: seeds the validation split and the batch shuffles.
    """

    epochs: int = 4
    lr: float = 1e-4
    emb_lr: float = 3e-3
    validation_share: float = 0.2
    min_validation: int = 5
    hard_negatives: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.lr <= 0 or self.emb_lr <= 0 or not 0 <= self.validation_share < 1:
            raise ValueError(f"bad fine-tuning config: {self}")


@dataclass(frozen=True)
class FineTuneResult:
    """The fine-tuned encoder and how it was chosen.

    Attributes:
        encoder: the kept weights (the input encoder's own weights, copied, when ``best_epoch`` is 0).
        best_epoch: the epoch kept (0: no epoch beat the starting weights on validation).
        validation: the validation score after each epoch, starting weights first (empty without validation).
        n_positives, n_hard_negatives: labelled pairs trained on; n_replay: replayed pairs trained on.
        n_val_positives, n_val_hard_negatives: labelled pairs held out for validation.
    """

    encoder: DanEncoder
    best_epoch: int
    validation: tuple[float, ...]
    n_positives: int
    n_hard_negatives: int
    n_replay: int
    n_val_positives: int
    n_val_hard_negatives: int


def split_validation(
    n_pos: int, n_hard: int, share: float, seed: int, minimum: int = 5
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Seeded split of positives and hard negatives into train and validation rows (same share of each).

    Returns:
        (train positives, validation positives, train hard negatives, validation hard negatives), int64 indices;
        the validation arrays are empty when ``share`` is 0 or fewer than ``minimum`` positives would be held out.
    """
    rng = np.random.default_rng([seed, 7])
    pos, hard = rng.permutation(n_pos), rng.permutation(n_hard)
    n_vp = int(round(share * n_pos))
    if n_vp < minimum:
        return np.sort(pos), np.empty(0, np.int64), np.sort(hard), np.empty(0, np.int64)
    n_vh = int(round(share * n_hard))
    return np.sort(pos[n_vp:]), np.sort(pos[:n_vp]), np.sort(hard[n_vh:]), np.sort(hard[:n_vh])


def validation_score(encoder: DanEncoder, positives: Pairs, hard_negatives: Pairs) -> float:
    """How well an encoder separates held-out GOOD pairs from BAD ones, in [0, 1] (higher is better).

    The mean of two shares: GOOD sources whose own target scores highest among all the validation targets
    (GOOD and BAD ones: P@1), and (GOOD pair, BAD pair) couples where the GOOD pair scores higher (ROC AUC).
    Without BAD pairs it is the P@1 alone.
    """
    u = encoder.encode([s for s, _ in positives], encoder.src_lang)
    v = encoder.encode([t for _, t in positives], encoder.tgt_lang)
    own = (u * v).sum(axis=1)
    targets = v
    if hard_negatives:
        bu = encoder.encode([s for s, _ in hard_negatives], encoder.src_lang)
        bv = encoder.encode([t for _, t in hard_negatives], encoder.tgt_lang)
        targets = np.concatenate([v, bv])
    scores = u @ targets.T
    # A target text equal to the row's own target is the same answer, not a competitor.
    texts = [t for _, t in positives] + [t for _, t in hard_negatives]
    ids, _ = _index_texts(texts)
    scores[ids[None, :] == ids[: len(positives), None]] = -np.inf
    p1 = float((own >= scores.max(axis=1)).mean())
    if not hard_negatives:
        return p1
    bad = (bu * bv).sum(axis=1)
    auc = float((own[:, None] > bad[None, :]).mean() + 0.5 * (own[:, None] == bad[None, :]).mean())
    return 0.5 * (p1 + auc)


def fine_tune_dan(
    encoder: DanEncoder,
    pos_pairs: Pairs,
    hard_negative_pairs: Pairs = (),
    *,
    replay_pairs: Pairs = (),
    config: FineTuneConfig | None = None,
    progress: Progress | None = None,
) -> FineTuneResult:
    """Adapt a trained DAN to reviewed pairs; the input encoder is not changed.

    Each step takes a batch of positives (reviewed GOOD pairs mixed with replayed training pairs; every other
    pair of the batch is an in-batch negative, both directions) and appends a share of the hard negatives' targets
    to every row's candidates. After each epoch the model is scored on the held-out labelled pairs
    (``validation_score``); the best epoch is kept, the starting weights counting as epoch 0.

    Args:
        encoder: the model to start from.
        pos_pairs: (source, target) pairs reviewers judged GOOD.
        hard_negative_pairs: (source, target) pairs judged BAD that the model scored high.
        replay_pairs: original training pairs, replayed to limit forgetting (never validated on).
        config: hyper-parameters (``FineTuneConfig()`` by default).
        progress: ``progress(done, total)`` in steps.

    Returns:
        The chosen weights with the validation curve and the split sizes.
    """
    cfg = config or FineTuneConfig()
    tp, vp, th, vh = split_validation(
        len(pos_pairs), len(hard_negative_pairs), cfg.validation_share, cfg.seed, cfg.min_validation
    )
    train_pos = [pos_pairs[i] for i in tp] + list(replay_pairs)
    train_hard = [hard_negative_pairs[i] for i in th] if cfg.hard_negatives else []
    val_pos, val_hard = [pos_pairs[i] for i in vp], [hard_negative_pairs[i] for i in vh]
    if len(train_pos) < 2:
        raise ValueError("fine-tuning needs at least 2 positive pairs (reviewed GOOD or replayed)")
    model = copy.deepcopy(encoder.model).train()
    dense_opt, sparse_opt = _optimizers(model, cfg.lr, cfg.emb_lr)
    hasher = model.config.hasher()
    corpus = _Corpus.build([s for s, _ in train_pos], [t for _, t in train_pos], hasher)
    hard_tgt = hasher([t for _, t in train_hard])
    _, t_map = _index_texts([t for _, t in train_pos])
    hard_t_id, _ = _index_texts([t for _, t in train_hard], dict(t_map))

    def wrap(m: DanDualEncoder) -> DanEncoder:
        return DanEncoder(m, encoder.src_lang, encoder.tgt_lang, threads=encoder.threads)

    curve: list[float] = []
    best_state, best_epoch = None, 0
    if val_pos:
        curve.append(validation_score(encoder, val_pos, val_hard))
    n_batches = max(1, len(train_pos) // model.config.batch_size)
    total, done = cfg.epochs * n_batches, 0
    for epoch in range(cfg.epochs):
        batches = _batches(len(train_pos), model.config.batch_size, cfg.seed, 3, epoch)
        hard_perm = np.random.default_rng([cfg.seed, 4, epoch]).permutation(len(train_hard))
        for rows, hard in zip(batches, np.array_split(hard_perm, len(batches)), strict=True):
            loss = _fine_tune_loss(model, corpus, rows, hard_tgt.take(hard), hard_t_id[hard])
            dense_opt.zero_grad(set_to_none=True)
            sparse_opt.zero_grad(set_to_none=True)
            loss.backward()
            dense_opt.step()
            sparse_opt.step()
            done += 1
            if progress is not None:
                progress(done, total)
        if val_pos:
            curve.append(validation_score(wrap(model), val_pos, val_hard))  # wrap() puts it in eval mode
            if curve[-1] > max(curve[:-1]):
                # Only the best weights so far are copied (the real model is large).
                best_state, best_epoch = copy.deepcopy(model.state_dict()), epoch + 1
            model.train()
        logger.info("fine-tuning epoch %d done (last loss %.4f)", epoch + 1, loss.item())
    if not val_pos:
        best_epoch = cfg.epochs
    elif best_state is None:
        model.load_state_dict(encoder.model.state_dict())
    else:
        model.load_state_dict(best_state)
    return FineTuneResult(
        wrap(model), best_epoch, tuple(curve), len(tp), len(train_hard), len(replay_pairs), len(vp), len(vh)
    )


def _fine_tune_loss(
    model: DanDualEncoder, corpus: _Corpus, rows: np.ndarray, hard_tgt: HashedBatch, hard_t_id: np.ndarray
) -> torch.Tensor:
    """Ranking loss of a positive batch with the hard negatives' targets appended to every row's candidates."""
    config = model.config
    sid, tid = corpus.s_id[rows], corpus.t_id[rows]
    u = model.source(*batch_tensors(corpus.src_feats.take(sid)))
    v = model.target(*batch_tensors(corpus.tgt_feats.take(tid)))
    same = (sid[:, None] == sid[None, :]) | (tid[:, None] == tid[None, :])
    np.fill_diagonal(same, False)
    exclude = torch.from_numpy(same) if same.any() else None
    if len(hard_t_id) == 0:
        return additive_margin_softmax_loss(u, v, config.margin, config.scale, True, exclude=exclude)
    extra = model.target(*batch_tensors(hard_tgt))
    # A BAD pair's target that is the batch row's own target, or another gold target of its source, is no negative.
    known = hard_t_id < corpus.n_tgt
    extra_exclude = (tid[:, None] == hard_t_id[None, :]) | (
        known[None, :] & corpus.is_gold(sid[:, None], np.where(known, hard_t_id, 0)[None, :])
    )
    return additive_margin_softmax_loss(
        u,
        v,
        config.margin,
        config.scale,
        True,
        extra,
        exclude=exclude,
        extra_exclude=torch.from_numpy(extra_exclude) if extra_exclude.any() else None,
    )
