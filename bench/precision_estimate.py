"""Stated against measured precision of a default run's kept set on every bench collection (issue 31), with the decoy
kind, the count and the interval's systematic width chosen leave-one-collection-out.

    ./run python bench/precision_estimate.py                      # fr,de,es x every collection (bench/_precision_cases)
    ./run python bench/precision_estimate.py --langs fr --collections manuals,catalogue
    ./run python bench/precision_estimate.py --rows var/bench/precision/estimate-rows.json   # tables of saved rows

Each case is mined like a default run (usem3, max-score, the pre-filters) at the ratio margin k = 4 and the distance
margin k = 16, and cut at the label-free threshold (mining.core.default_threshold). For every case the target-decoy
count (mining.core.precision: the source side mined against the real target side plus decoys) is taken with each
decoy variant of ``_precision_loco.VARIANTS``: from a disjoint collection (``sample_decoys``), with or without the
decoys that are near-copies of a real target sentence (``near_duplicates`` at a cosine cut, topped up from a second
draw), and without extra data (the target side's sentences with their words shuffled, or with a share of their words
replaced and their digits changed, ``mutated_decoys``); each counted at the run's threshold and at the rank-matched
one (``matched_threshold``). The searches with decoys reuse the real search and one source x decoy similarity matrix
(``_with_decoys``: exact, as one search over targets + decoys). Then, leaving one collection out (each of the five in
turn), the variant, the count's factor and the systematic width are chosen on the four others and reported on the one
left out (``_precision_loco``); last, the values fitted on all five collections, which the app ships.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _precision_cases import CACHE, add_case_arguments, cases_from_args, encode_cached, gold_labels, mine_knn  # noqa: E402
from _precision_loco import VARIANTS, report  # noqa: E402

from mining.core.decoys import (  # noqa: E402
    fill_decoys,
    kind_weights,
    mutated_decoys,
    nearest_similarity,
    sample_decoys,
    shuffled_decoys,
)
from mining.core.default_threshold import default_threshold  # noqa: E402
from mining.core.encoders.usem import Usem3Encoder  # noqa: E402
from mining.core.knn import knn_both_ways  # noqa: E402
from mining.core.margin import Margin  # noqa: E402
from mining.core.precision import decoy_hits  # noqa: E402
from mining.core.threshold import best_f1_threshold, sweep  # noqa: E402
from mining.core.types import KnnResult  # noqa: E402


def _candidates(usem, case, kind: str, seed: int) -> tuple[list[str], np.ndarray]:
    """Twice as many decoy candidates as target sentences, in draw order, and their embeddings (cached)."""
    b = case.bucc
    n = len(b.tgt_texts)
    if kind == "disjoint":
        texts = sample_decoys(case.pool, n=2 * n, exclude=b.tgt_texts, seed=seed) if case.pool else []
    elif kind == "shuffled":
        texts = shuffled_decoys(b.tgt_texts, seed=seed)  # no near-copy cut for shuffled decoys: one draw
    else:
        rate = float(kind.split(":")[1])
        texts = mutated_decoys(b.tgt_texts, rate=rate, seed=seed) + mutated_decoys(
            b.tgt_texts, rate=rate, seed=seed + 1
        )
    emb = encode_cached(usem, texts, case.lang) if texts else np.zeros((0, 512), dtype=np.float32)
    return texts, emb


def _top(sims: np.ndarray, ids: np.ndarray | None, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's k largest similarities, descending, and their ids (column numbers when `ids` is None)."""
    k = min(k, sims.shape[1])
    part = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    top = np.take_along_axis(sims, part, axis=1)
    order = np.argsort(-top, axis=1, kind="stable")
    cols = np.take_along_axis(part, order, axis=1)
    out_ids = cols if ids is None else np.take_along_axis(ids, cols, axis=1)
    return np.take_along_axis(top, order, axis=1).astype(np.float32), out_ids.astype(np.int64)


def _with_decoys(real: KnnResult, sims: np.ndarray, dec_bwd: tuple, idx: list[int], k: int) -> KnnResult:
    """The exact kNN of the sources against the real targets plus the decoys `idx` (rows after the targets), from
    the real targets' kNN and the source x decoy-candidate similarities: a target's neighbours among the sources do
    not change when decoys are added, and a source's are the best k of its real and decoy neighbours."""
    n_t = real.bwd_sims.shape[0]
    d_sims, d_cols = _top(sims[:, idx], None, k)
    f_sims, f_ids = _top(
        np.concatenate([real.fwd_sims, d_sims], axis=1), np.concatenate([real.fwd_ids, d_cols + n_t], axis=1), k
    )
    return KnnResult(
        fwd_sims=f_sims,
        fwd_ids=f_ids,
        bwd_sims=np.concatenate([real.bwd_sims, dec_bwd[0][idx]]),
        bwd_ids=np.concatenate([real.bwd_ids, dec_bwd[1][idx]]),
    )


def collect(args) -> list[dict]:
    usem = Usem3Encoder()
    settings = [(Margin(s.split(":")[0]), int(s.split(":")[1])) for s in args.settings.split(",")]
    k_max = max(k for _, k in settings)
    t0 = time.perf_counter()
    cases = cases_from_args(args)
    print(f"built {len(cases)} test sets in {time.perf_counter() - t0:.0f} s", flush=True)
    rows = []
    for case in cases:
        b = case.bucc
        n_t = len(b.tgt_texts)
        src = encode_cached(usem, b.src_texts, "en")
        tgt = encode_cached(usem, b.tgt_texts, case.lang)
        real_knn = knn_both_ways(src, tgt, k_max)
        tgt_nn = nearest_similarity(tgt, tgt, self_index=np.arange(n_t))
        case_rows = []
        for margin, k in settings:
            real = mine_knn(real_knn, b.src_texts, b.tgt_texts, case.lang, margin, k)
            labels = gold_labels(real, b)
            est = default_threshold(real.score, real.mutual)
            t = est.threshold
            sw = sweep(real.score, labels, n_positive=len(b.gold))
            i = int(np.searchsorted(-sw.thresholds, -t))
            case_rows.append(
                {
                    "collection": case.name,
                    "lang": case.lang,
                    "setting": f"{margin.value} k={k}",
                    "gold": len(b.gold),
                    "n_targets": n_t,
                    "threshold": float(t),
                    "n_kept": int((real.score >= t).sum()),
                    "f1": float(sw.f1[i]),
                    "best_f1": float(best_f1_threshold(real.score, labels, n_positive=len(b.gold)).f1),
                    "mixture": float(est.estimated_precision),
                    "measured": float(sw.precision[i]),
                    "variants": {},
                }
            )
        for kind in dict.fromkeys(v.kind for v in VARIANTS):
            texts, emb = _candidates(usem, case, kind, args.seed)
            sims = src @ emb.T if len(texts) else np.zeros((len(src), 0), dtype=np.float32)
            dec_bwd = _top(sims.T, None, k_max) if len(texts) else None
            dec_nn = nearest_similarity(emb, tgt) if len(texts) else np.zeros(0, dtype=np.float32)
            for v in (v for v in VARIANTS if v.kind == kind):
                if v.cut is None:  # the first draw; a cut tops it up from the second
                    idx = list(range(min(n_t, len(texts))))
                else:
                    idx = fill_decoys(texts, dec_nn >= v.cut, n_t)
                if not idx:
                    for row in case_rows:
                        row["variants"][v.name] = {
                            "n_decoys": 0,
                            "hits": 0,
                            "hits_rank": 0,
                            "real_hits": 0,
                            "hits_w": 0.0,
                            "hits_w_rank": 0.0,
                        }
                    continue
                both_knn = _with_decoys(real_knn, sims, dec_bwd, idx, k_max)
                weights = kind_weights(dec_nn[idx], tgt_nn)
                d_texts = list(b.tgt_texts) + [texts[j] for j in idx]
                for (margin, k), row in zip(settings, case_rows, strict=True):
                    both = mine_knn(both_knn, b.src_texts, d_texts, case.lang, margin, k)
                    on_decoy = decoy_hits(both.tgt, n_t)
                    hits, real_hits = both.score[on_decoy], np.sort(both.score[~on_decoy])[::-1]
                    w_hits = weights[both.tgt[on_decoy] - n_t]
                    # rank-matched: the combined search's threshold that keeps as many real-target hits as the run
                    # keeps (decoys shift every margin; matching ranks undoes the shift)
                    t_rank = real_hits[min(row["n_kept"], len(real_hits)) - 1] if row["n_kept"] else np.inf
                    row["variants"][v.name] = {
                        "n_decoys": len(idx),
                        "hits": int((hits >= row["threshold"]).sum()),
                        "hits_rank": int((hits >= t_rank).sum()),
                        "real_hits": int((real_hits >= row["threshold"]).sum()),
                        "hits_w": float(w_hits[hits >= row["threshold"]].sum()),
                        "hits_w_rank": float(w_hits[hits >= t_rank].sum()),
                    }
        for row in case_rows:
            print(
                f"{row['collection']} en-{row['lang']} {row['setting']}: kept {row['n_kept']} measured "
                f"{100 * row['measured']:.1f}% "
                + " ".join(f"{n}={d['hits']}/{d['n_decoys']}" for n, d in row["variants"].items()),
                flush=True,
            )
        rows += case_rows
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_case_arguments(parser)
    parser.add_argument("--settings", default="ratio:4,distance:16")
    parser.add_argument("--rows", type=Path, default=None, help="read saved rows instead of mining")
    parser.add_argument("--save", type=Path, default=CACHE / "estimate-rows.json", help="where the rows are saved")
    args = parser.parse_args()
    if args.rows is not None:
        rows = json.loads(args.rows.read_text())
    else:
        rows = collect(args)
        args.save.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.save.with_name(args.save.name + f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(rows, indent=1))
        os.replace(tmp, args.save)
        print(f"rows saved to {args.save}", flush=True)
    print(report(rows))


if __name__ == "__main__":
    main()
