"""Self-training: an adapter trained on the pairs its own mining is sure of, from two piles of text and no labels.

Each round mines the corpus with the current encoder (the base encoder's embeddings, then the adapter's), keeps
the *confident* pairs and trains a fresh adapter (``encoders.adapter``) on them over the base embeddings, picking
its epoch on held-out pseudo-pairs (``AdapterConfig.validation``). The confident pairs are:

1. mutual best: the pair is each side's best by margin (``Strategy.INTERSECTION``), so both directions agree;
2. past the caller's pre-filters (``keep``: identical sides, wrong language, length ratio ...);
3. the largest top-scoring set whose expected precision, read from the label-free mixture of
   ``default_threshold.true_posteriors``, is at least ``min_precision`` (0.95 by default). Training pairs are the
   teacher's output: every false one teaches the adapter a wrong match, so the rule asks for few errors rather than
   for the F1-best cut. With too few mutual pairs for the mixture, the top ``fallback_share`` of them by margin.

The expected precision comes from the false pairs' bell alone (``default_threshold.null_posteriors``): over a
whole collection most mutual-best pairs are translations, and a two-Gaussian mixture then split the true pairs'
skewed bulk in two and kept almost nothing.

Rounds go on while the label-free criterion, the number of mutual-best pairs that pass the pre-filters (the two
directions' agreement: a better aligned space makes more sentences each other's best), grows by at least
``min_gain`` (relative); a round replaces the best one only when it brings that growth, so the rounds that follow
a converged one (their set creeps up by a fraction of a percent while their gold F1 drifts either way) are never
kept (round 0 = the base encoder, returned as ``model=None``). The mixture's expected number of true pairs is not
the criterion: on text it kept growing past the number of translations there were as rounds trained on their own
output.

With ``dan`` set (and the texts given), a subword DAN (character n-grams) is then trained on the best round's
confident pairs and combined with the best round's encoder by weighted concatenation (``dan_weight`` its share of
the cosine): it reads spelling, which the pretrained encoder's sentence-level embedding cannot be taught by an
adapter over it. The combination is judged like a round: it is kept (``SelfTrainResult.dan``) only when it grows the
mutual-best set by ``min_gain`` over the best round's (``dan_report`` has its figures either way). On manual text
(bench/mining_quality.py) it lifted en-de, where the adapter alone gained least, by about 2 F1; its weight, 0.3, was
picked among 0.2-0.5 there: at 0.5 the DAN's share of the cosine made template siblings (sentences sharing most of
their characters) a second bump of high-scoring false pairs, which the label-free threshold took for true ones at
k = 16 (en-es: 6 F1 below the best cut, against 0.2 at 0.3).

The function never sees gold pairs: a caller may pass ``evaluate`` to report figures against them
after each round.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from mining.core.defaults import DEFAULT_K
from mining.core.encoders.adapter import AdapterConfig, AdapterModel, train_adapter
from mining.core.encoders.base import Progress
from mining.core.encoders.dan import DanConfig, DanEncoder
from mining.core.knn import knn_exact
from mining.core.margin import Margin, margin_score
from mining.core.selftrain_pairs import ConfidentPairs, KeepFn, agreement, confident_pairs

logger = logging.getLogger(__name__)

EvaluateFn = Callable[[np.ndarray, np.ndarray], dict]
# The subword DAN self-training trains when asked to: the gold-trained benchmark's subword DAN (character 3-5-grams,
# 3 epochs with in-batch negatives then 2 with hard ones); on 5-7k pseudo-pairs it trains in 2-3 min on one thread.
SELF_TRAIN_DAN = DanConfig(char_ngrams=(3, 4, 5))


@dataclass(frozen=True)
class SelfTrainConfig:
    """Self-training settings.

    `rounds`: at most this many training rounds. `k`, `margin`: how each round mines. `min_precision`: expected
    precision the confident pairs must reach. `fallback_share`: share of the mutual pairs (best first) taken when
    there are too few for the mixture. `min_pairs`: fewer confident pairs than this stop the rounds.
    `min_gain`: relative growth of the criterion a round must bring to go on and to be kept. `adapter`: the
    adapter's settings (10 % of the pseudo-pairs held out to pick the epoch). `dan`: the subword DAN trained on the
    best round's pairs (None: none); `dan_weight`: its share of the combined cosine.
    """

    rounds: int = 3
    k: int = DEFAULT_K
    margin: Margin = Margin.RATIO
    min_precision: float = 0.95
    fallback_share: float = 0.5
    min_pairs: int = 8
    min_gain: float = 0.005
    adapter: AdapterConfig = field(default_factory=lambda: AdapterConfig(validation=0.1))
    dan: DanConfig | None = None
    dan_weight: float = 0.3

    def __post_init__(self) -> None:
        if not 0.0 < self.dan_weight < 1.0:
            raise ValueError(f"dan_weight must be in (0, 1), got {self.dan_weight}")
        if self.rounds < 1:
            raise ValueError(f"rounds must be >= 1, got {self.rounds}")
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        if not isinstance(self.margin, Margin):
            raise TypeError(f"margin must be a Margin, got {self.margin!r}")
        if not 0.0 < self.min_precision <= 1.0:
            raise ValueError(f"min_precision must be in (0, 1], got {self.min_precision}")
        if not 0.0 < self.fallback_share <= 1.0:
            raise ValueError(f"fallback_share must be in (0, 1], got {self.fallback_share}")
        if self.min_pairs < 4:
            raise ValueError(f"min_pairs must be >= 4 (the adapter's minimum), got {self.min_pairs}")


@dataclass(frozen=True)
class RoundStats:
    """One round's figures (round 0 mines with the base encoder and trains nothing)."""

    round: int
    n_mutual: int
    n_pairs: int
    estimated_true: float
    estimated_precision: float
    mean_margin: float
    agreement: float | None
    rule: str
    held_out_margin: tuple[float, ...] = ()  # the adapter's epoch score: mean margin of held-out pseudo-pairs
    best_epoch: int | None = None
    report: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON-ready, floats rounded."""

        def r(x: float | None) -> float | None:
            return None if x is None or not np.isfinite(x) else round(float(x), 4)

        return {
            "round": self.round,
            "n_mutual": self.n_mutual,
            "n_pairs": self.n_pairs,
            "estimated_true": r(self.estimated_true),
            "estimated_precision": r(self.estimated_precision),
            "mean_margin": r(self.mean_margin),
            "agreement": r(self.agreement),
            "rule": self.rule,
            "held_out_margin": [round(x, 4) for x in self.held_out_margin],
            "best_epoch": self.best_epoch,
            "report": self.report,
        }


@dataclass(frozen=True)
class SelfTrainResult:
    """The best round's adapter (None: the base encoder was best), every round's figures, and the subword DAN
    (None unless asked for) with its figures (``dan_report``: pairs trained on, seconds, ``evaluate``'s report on the
    combination)."""

    model: AdapterModel | None
    rounds: tuple[RoundStats, ...]
    best_round: int
    stopped: str
    dan: DanEncoder | None = None
    dan_weight: float = 0.3
    dan_report: dict = field(default_factory=dict)
    dan_trained: DanEncoder | None = None  # the DAN as trained, kept or not (a caller may judge other weights)

    def embed(
        self,
        src_base: np.ndarray,
        tgt_base: np.ndarray,
        src_dan: np.ndarray | None = None,
        tgt_dan: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The self-trained encoder's embeddings from the base's (and, with a DAN, the DAN's) of the same rows."""
        emb = _embed(self.model, np.asarray(src_base, np.float32), np.asarray(tgt_base, np.float32))
        if self.dan is None:
            return emb
        if src_dan is None or tgt_dan is None:
            raise ValueError("this result has a DAN: pass its embeddings of the same rows")
        return combine_embeddings(emb, (src_dan, tgt_dan), 1.0 - self.dan_weight)


def combine_embeddings(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], w: float
) -> tuple[np.ndarray, np.ndarray]:
    """Weighted concatenation of unit rows (``encoders.combine.ConcatEncoder``'s): cosine = w cos_a + (1 - w) cos_b."""
    return tuple(  # type: ignore[return-value]
        np.concatenate([np.sqrt(w) * x, np.sqrt(1.0 - w) * y], axis=1).astype(np.float32)
        for x, y in zip(a, b, strict=True)
    )


def _embed(model: AdapterModel | None, src: np.ndarray, tgt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if model is None:
        return src, tgt
    return model.transform(src, "src"), model.transform(tgt, "tgt")


def self_train(
    src_base: np.ndarray,
    tgt_base: np.ndarray,
    *,
    config: SelfTrainConfig | None = None,
    keep: KeepFn | None = None,
    evaluate: EvaluateFn | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    texts: tuple[list[str], list[str]] | None = None,
    langs: tuple[str, str] = ("src", "tgt"),
    dan_threads: int | None = 1,
) -> SelfTrainResult:
    """Self-train an adapter over base embeddings of two unaligned sides (module docstring).

    Args:
        src_base: (n_src, d) float32 unit rows of the base encoder; tgt_base: (n_tgt, d) likewise.
        config: settings (``SelfTrainConfig()`` by default).
        keep: the pre-filters, ``keep(src_idx, tgt_idx) -> (m,) bool`` over rows of the two sides.
        evaluate: optional ``evaluate(src_emb, tgt_emb) -> dict`` called on each round's embeddings, stored in
            ``RoundStats.report`` (for figures against gold pairs; nothing it returns is trained on).
        seed: seeds each round's adapter (round r uses seed + r).
        progress: ``progress(done, total)`` in rounds.
        texts: the two sides' texts, one per row (needed with ``config.dan``); langs: their language codes.
        dan_threads: torch threads of the DAN's encoding.

    Returns:
        The best round's adapter, every round's figures, and why the rounds stopped.
    """
    config = config or SelfTrainConfig()
    src_base = np.asarray(src_base, dtype=np.float32)
    tgt_base = np.asarray(tgt_base, dtype=np.float32)
    if src_base.ndim != 2 or tgt_base.ndim != 2 or src_base.shape[1] != tgt_base.shape[1]:
        raise ValueError(f"need (n, d) and (m, d) base embeddings, got {src_base.shape} and {tgt_base.shape}")
    if config.dan is not None and (texts is None or len(texts[0]) != len(src_base) or len(texts[1]) != len(tgt_base)):
        raise ValueError("a self-trained DAN needs the two sides' texts, one per embedding row")
    if min(len(src_base), len(tgt_base)) < config.min_pairs:
        raise ValueError(f"{len(src_base)} x {len(tgt_base)} sentences; self-training needs {config.min_pairs} a side")
    mine = {
        "k": config.k,
        "margin": config.margin,
        "min_precision": config.min_precision,
        "fallback_share": config.fallback_share,
        "keep": keep,
    }
    pairs = confident_pairs(src_base, tgt_base, **mine)
    report = evaluate(src_base, tgt_base) if evaluate else {}
    rounds = [_stats(0, pairs, None, None, report)]
    models: list[AdapterModel | None] = [None]
    chosen: list[ConfidentPairs] = [pairs]
    best, stopped = 0, f"{config.rounds} rounds done"
    for r in range(1, config.rounds + 1):
        if len(pairs.src_idx) < config.min_pairs:
            stopped = f"round {r - 1} found {len(pairs.src_idx)} confident pairs (< {config.min_pairs})"
            break
        with torch.random.fork_rng():
            torch.manual_seed(seed + r)  # the towers' layers past the seeded skip draw from torch's generator
            model = train_adapter(
                src_base[pairs.src_idx],
                tgt_base[pairs.tgt_idx],
                config=replace(config.adapter),
                seed=seed + r,
                held_out_score=_held_out_margin(src_base, tgt_base, pairs, config),
            )
        emb = _embed(model, src_base, tgt_base)
        new_pairs = confident_pairs(*emb, **mine)
        report = evaluate(*emb) if evaluate else {}
        rounds.append(_stats(r, new_pairs, model, agreement(pairs, new_pairs, len(tgt_base)), report))
        models.append(model)
        chosen.append(new_pairs)
        if progress:
            progress(r, config.rounds)
        logger.info("self-training round %d: %s", r, rounds[-1].to_dict())
        gain = _gain(rounds[r - 1], rounds[-1])
        if gain < config.min_gain:
            stopped = f"round {r} grew the criterion by {gain:+.4f} (< {config.min_gain})"
            break
        best = r
        pairs = new_pairs
    if config.dan is None or texts is None:
        return SelfTrainResult(model=models[best], rounds=tuple(rounds), best_round=best, stopped=stopped)
    dan, dan_report = _train_dan(
        chosen[best], texts, langs, config, models[best], src_base, tgt_base, evaluate, seed, dan_threads, mine
    )
    # The DAN is judged as one more round: kept only when the combination grows the mutual-best set by min_gain.
    dan_report["n_mutual_before"] = rounds[best].n_mutual
    dan_report["kept"] = (dan_report["n_mutual"] - rounds[best].n_mutual) / max(
        rounds[best].n_mutual, 1
    ) >= config.min_gain
    return SelfTrainResult(
        model=models[best],
        rounds=tuple(rounds),
        best_round=best,
        stopped=stopped,
        dan=dan if dan_report["kept"] else None,
        dan_weight=config.dan_weight,
        dan_report=dan_report,
        dan_trained=dan,
    )


def _train_dan(
    pairs: ConfidentPairs,
    texts: tuple[list[str], list[str]],
    langs: tuple[str, str],
    config: SelfTrainConfig,
    model: AdapterModel | None,
    src_base: np.ndarray,
    tgt_base: np.ndarray,
    evaluate: EvaluateFn | None,
    seed: int,
    threads: int | None,
    mine: dict,
) -> tuple[DanEncoder, dict]:
    """The subword DAN on the best round's confident pairs, and the combination's figures (its mutual-best pairs,
    ``n_mutual``, and what ``evaluate`` reports on it)."""
    import time

    from mining.core.encoders.dan_train import train_dan

    assert config.dan is not None
    t0 = time.perf_counter()
    dan = train_dan(
        [texts[0][i] for i in pairs.src_idx],
        [texts[1][i] for i in pairs.tgt_idx],
        src_lang=langs[0],
        tgt_lang=langs[1],
        config=config.dan,
        seed=seed,
        hard_negatives=config.dan.hard_epochs > 0,
    )
    seconds = time.perf_counter() - t0
    dan.threads = threads
    src_dan, tgt_dan = dan.encode(list(texts[0]), langs[0]), dan.encode(list(texts[1]), langs[1])
    emb = combine_embeddings(_embed(model, src_base, tgt_base), (src_dan, tgt_dan), 1.0 - config.dan_weight)
    report: dict = {
        "pairs": int(len(pairs.src_idx)),
        "seconds": round(seconds, 1),
        "weight": config.dan_weight,
        "n_mutual": confident_pairs(*emb, **mine).n_mutual,
    }
    if evaluate is not None:
        report["report"] = evaluate(*emb)
    logger.info("self-training: subword DAN %s", report)
    return dan, report


def _held_out_margin(
    src_base: np.ndarray, tgt_base: np.ndarray, pairs: ConfidentPairs, config: SelfTrainConfig
) -> Callable[[AdapterModel, np.ndarray], float]:
    """The adapter's epoch score: the mean margin of the held-out pseudo-pairs against the whole corpus.

    Their P@1 among themselves says nothing here (the base encoder found each of them as a mutual best, so it
    retrieves them all); their margin against every sentence of the other side grows only when what the adapter
    learnt on the other pseudo-pairs carries over to them.
    """

    def score(model: AdapterModel, rows: np.ndarray) -> float:
        u, v = model.transform(src_base, "src"), model.transform(tgt_base, "tgt")
        s_rows, t_rows = pairs.src_idx[rows], pairs.tgt_idx[rows]
        k = min(config.k, len(u), len(v))
        fwd = knn_exact(u[s_rows], v, k)[0].mean(axis=1)
        bwd = knn_exact(v[t_rows], u, k)[0].mean(axis=1)
        cos = np.einsum("ij,ij->i", u[s_rows], v[t_rows])
        return float(np.nanmean(margin_score(cos, fwd, bwd, config.margin)))

    return score


def _gain(old: RoundStats, new: RoundStats) -> float:
    """Relative growth of the criterion: the mutual-best pairs that pass the pre-filters."""
    return (new.n_mutual - old.n_mutual) / max(old.n_mutual, 1)


def _stats(
    r: int, pairs: ConfidentPairs, model: AdapterModel | None, agreement: float | None, report: dict
) -> RoundStats:
    return RoundStats(
        round=r,
        n_mutual=pairs.n_mutual,
        n_pairs=int(len(pairs.src_idx)),
        estimated_true=pairs.estimated_true,
        estimated_precision=pairs.estimated_precision,
        mean_margin=float(pairs.score.mean()) if len(pairs.score) else float("nan"),
        agreement=agreement,
        rule=pairs.rule,
        held_out_margin=tuple(model.history) if model is not None else (),
        best_epoch=model.best_epoch if model is not None else None,
        report=report,
    )
