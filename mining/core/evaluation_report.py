"""A BUCC-style evaluation of an encoder end to end: split gold pairs into parallel pairs and one-sided distractors,
embed and score every configuration, and print the table.

The database side (which gold pairs and unpaired sentences a corpus has) is the caller's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .encoders.base import SentenceEncoder
from .evaluation import BuccSet, MiningScore, evaluate_mining

# Below this many gold pairs an F1 moves by several points with one pair: the report says so.
FEW_GOLD_PAIRS = 100


@dataclass(frozen=True)
class EvaluationReport:
    """The test set's size and every margin x strategy's figures."""

    n_src: int
    n_tgt: int
    n_gold: int
    scores: list[MiningScore]
    gold_p_at_1: float


@dataclass(frozen=True)
class GoldSplit:
    """Row numbers into a list of gold pairs: kept parallel, source side only, target side only."""

    parallel: np.ndarray
    src_only: np.ndarray
    tgt_only: np.ndarray


def split_gold(n_pairs: int, *, parallel_share: float, n_gold: int | None = None, seed: int = 0) -> GoldSplit:
    """Split `n_pairs` gold pairs three ways so that about `parallel_share` of each side is parallel.

    G pairs stay parallel; of the other P - G, one half gives only its source side and the other half only its target
    side, so share = G / (G + (P - G) / 2), i.e. G = sP / (2 - s). `n_gold` fixes G instead.
    """
    if n_pairs < 1:
        raise ValueError("no gold pairs to split")
    if not 0 < parallel_share <= 1:
        raise ValueError(f"parallel_share must be in (0, 1], got {parallel_share}")
    order = np.random.default_rng(seed).permutation(n_pairs)
    n_keep = n_gold or max(1, int(round(parallel_share * n_pairs / (2 - parallel_share))))
    n_keep = min(n_keep, n_pairs)
    rest = order[n_keep:]
    half = len(rest) // 2
    return GoldSplit(order[:n_keep], rest[:half], rest[half:])


def evaluate_encoder(
    bucc: BuccSet, encoder: SentenceEncoder, src_lang: str, tgt_lang: str, *, k: int | Sequence[int]
) -> EvaluationReport:
    """Embed the test set with `encoder` and score every configuration (at each neighbourhood size in `k`)."""
    src = encoder.encode(bucc.src_texts, src_lang)
    tgt = encoder.encode(bucc.tgt_texts, tgt_lang)
    scores, p1 = evaluate_mining(src, tgt, bucc.gold, k=k)
    return EvaluationReport(len(bucc.src_texts), len(bucc.tgt_texts), len(bucc.gold), scores, p1)


def format_report(report: EvaluationReport) -> str:
    """A plain-text table like the margin paper's: P, R, F1 at the F1-best threshold per margin x strategy; a caution
    line first when the test set has too few gold pairs for the figures to mean much."""
    lines = []
    if report.n_gold < FEW_GOLD_PAIRS:
        lines.append(
            f"caution: only {report.n_gold} gold pairs (fewer than {FEW_GOLD_PAIRS}); one pair moves F1 by "
            f"about {100 / max(1, report.n_gold):.0f} points, so read these figures as rough"
        )
    lines += [
        f"test set: {report.n_src} source / {report.n_tgt} target sentences, {report.n_gold} gold pairs "
        f"({100 * report.n_gold / max(1, report.n_src):.1f}% parallel); gold-only P@1 = {report.gold_p_at_1:.3f}",
        f"{'k':>3}  {'margin':<10}{'strategy':<14}{'threshold':>10}{'P':>8}{'R':>8}{'F1':>8}{'cands':>8}",
    ]
    for s in report.scores:
        lines.append(
            f"{s.k:>3}  {s.margin:<10}{s.strategy:<14}{s.threshold:>10.4f}{100 * s.precision:>8.1f}"
            f"{100 * s.recall:>8.1f}{100 * s.f1:>8.1f}{s.n_candidates:>8}"
        )
    return "\n".join(lines)
