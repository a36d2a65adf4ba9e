"""Evaluate sentence mining on a corpus with gold pairs: build a BUCC-style test set and score every configuration."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..core.evaluation import BuccSet, MiningScore, build_bucc, evaluate_mining
from ..models import Corpus, GoldSentencePair, Sentence


@dataclass(frozen=True)
class EvaluationReport:
    """The test set's size and every margin x strategy's figures."""

    n_src: int
    n_tgt: int
    n_gold: int
    scores: list[MiningScore]
    gold_p_at_1: float


def gold_pairs_of(corpus: Corpus, src_lang: str, tgt_lang: str) -> list[tuple[str, str]]:
    """The corpus's gold sentence pairs between two languages, as (src text, tgt text), in either stored direction."""
    pairs: list[tuple[str, str]] = []
    qs = GoldSentencePair.objects.filter(corpus=corpus).values_list("src__lang", "src__text", "tgt__lang", "tgt__text")
    for s_lang, s_text, t_lang, t_text in qs.iterator(chunk_size=20_000):
        if (s_lang, t_lang) == (src_lang, tgt_lang):
            pairs.append((s_text, t_text))
        elif (s_lang, t_lang) == (tgt_lang, src_lang):
            pairs.append((t_text, s_text))
    return pairs


def bucc_from_corpus(
    corpus: Corpus,
    src_lang: str,
    tgt_lang: str,
    *,
    parallel_share: float = 0.04,
    n_gold: int | None = None,
    min_words: int = 5,
    seed: int = 0,
) -> BuccSet:
    """A BUCC-style set from a corpus's gold pairs.

    The gold pairs are split three ways: a small share stays parallel; of the rest, one half gives only its source
    side and the other half only its target side, so those sentences are non-parallel to everything on the other
    side. Sentences without any gold pair join the distractors too.
    """
    pairs = gold_pairs_of(corpus, src_lang, tgt_lang)
    if not pairs:
        raise ValueError(f"corpus '{corpus}' has no gold {src_lang}-{tgt_lang} sentence pairs")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(pairs))
    # G gold pairs kept, the other P - G split in halves: share = G / (G + (P - G) / 2)  =>  G = sP / (2 - s).
    n_keep = n_gold or max(1, int(round(parallel_share * len(pairs) / (2 - parallel_share))))
    n_keep = min(n_keep, len(pairs))
    rest = order[n_keep:]
    half = len(rest) // 2
    gold = [pairs[i] for i in order[:n_keep]]
    src_d = [pairs[i][0] for i in rest[:half]]
    tgt_d = [pairs[i][1] for i in rest[half:]]
    paired = GoldSentencePair.objects.filter(corpus=corpus)
    for lang, bucket in ((src_lang, src_d), (tgt_lang, tgt_d)):
        unpaired = (
            Sentence.objects.filter(corpus=corpus, lang=lang)
            .exclude(id__in=paired.values("src_id"))
            .exclude(id__in=paired.values("tgt_id"))
        )
        bucket.extend(unpaired.values_list("text", flat=True).iterator(chunk_size=20_000))
    n_distractors = None
    if n_gold:
        n_distractors = int(n_gold * (1 - parallel_share) / parallel_share)
    return build_bucc(gold, src_d, tgt_d, min_words=min_words, seed=seed, n_distractors=n_distractors)


def evaluate_corpus(
    bucc: BuccSet, encoder, src_lang: str, tgt_lang: str, *, k: int | Sequence[int] = 4
) -> EvaluationReport:
    """Embed the test set with `encoder` and score every configuration (at each neighbourhood size in `k`)."""
    src = encoder.encode(bucc.src_texts, src_lang)
    tgt = encoder.encode(bucc.tgt_texts, tgt_lang)
    scores, p1 = evaluate_mining(src, tgt, bucc.gold, k=k)
    return EvaluationReport(len(bucc.src_texts), len(bucc.tgt_texts), len(bucc.gold), scores, p1)


def format_report(report: EvaluationReport) -> str:
    """A plain-text table like the margin paper's: P, R, F1 at the F1-best threshold per margin x strategy."""
    lines = [
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
