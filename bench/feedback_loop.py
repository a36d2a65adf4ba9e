"""The feedback loop, simulated: reviewers' labels (GOOD = a gold pair of a held-out real corpus) calibrate the
scores, choose the threshold for a target precision, and give hard negatives that fine-tune the app's DAN.

    ./run python bench/feedback_loop.py                # en-fr, 200 / 500 / 1,000 labels
    ./run python bench/feedback_loop.py --quick
    ./run python bench/feedback_loop.py --precision     # issue 31: stated vs measured precision after 0-200 labels
                                                        # on every bench collection (bench/_precision_loop.py)

Data: the GIMP manual and Debian Reference pages (scripts/fetch_data.py), drawn into disjoint page groups: a review
pool (gold pairs hidden among other pages' sentences, BUCC style) whose mined candidates the simulated reviewers
label, and an evaluation set built the same way from other pages, used only to compare the encoder before and after
fine-tuning. Labels are drawn by the campaign samplers: stratified by score band (equal allocation, each label
weighted by its band's size, so estimates are unbiased); the "uncertain" sampler's picks are kept apart.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(ROOT.parent)]

from _bucc_data import TEST_ORIGINS, TRAIN_ORIGINS, datasets, page_sentences  # noqa: E402
from mining_quality import train  # noqa: E402

from mining.core.calibration.baselines import IsotonicCalibration, PlattScaling  # noqa: E402
from mining.core.calibration.crossval import compare_calibrators  # noqa: E402
from mining.core.calibration.estimates import choose_threshold, stratum_weights, uncertain_sample  # noqa: E402
from mining.core.calibration.hardneg import review_training_pairs  # noqa: E402
from mining.core.calibration.head import CalibrationHead  # noqa: E402
from mining.core.candidates import Strategy, mine_candidates  # noqa: E402
from mining.core.encoders.dan_finetune import FineTuneConfig, fine_tune_dan  # noqa: E402
from mining.core.encoders.usem import Usem3Encoder  # noqa: E402
from mining.core.evaluation import BuccSet, build_bucc, evaluate_mining  # noqa: E402
from mining.core.knn import knn_both_ways  # noqa: E402
from mining.core.margin import Margin  # noqa: E402
from scripts.data_sources import load_pairs  # noqa: E402

ROLES = ("r-gold", "r-src", "r-tgt", "e-gold", "e-src", "e-tgt")


def split(manual, seed: int) -> dict:
    docs = sorted({(origin, doc) for _, _, origin, doc in manual})
    draw = np.random.default_rng(seed).integers(0, len(ROLES), size=len(docs))
    return {d: ROLES[r] for d, r in zip(docs, draw, strict=True)}


def bucc(manual, roles, prefix: str, lang: str, n_gold: int, seed: int) -> BuccSet:
    gold = [
        (p[0], p[1])
        for p in manual
        if roles.get((p[2], p[3])) == f"{prefix}-gold" and len(p[0].split()) >= 5 and len(p[1].split()) >= 5
    ]
    return build_bucc(
        gold,
        page_sentences("en", roles, f"{prefix}-src"),
        page_sentences(lang, roles, f"{prefix}-tgt"),
        n_gold=n_gold,
        n_distractors=4 * n_gold,
        min_words=5,
        seed=seed,
    )


def candidates(src: np.ndarray, tgt: np.ndarray, gold: np.ndarray):
    """Ratio-margin max-score candidates with their GOOD labels (a candidate is GOOD when it is a gold pair)."""
    cands = mine_candidates(knn_both_ways(src, tgt, 4), margin=Margin.RATIO, k=4, strategy=Strategy.MAX_SCORE)
    keys = set(map(tuple, gold.tolist()))
    good = np.array([(int(s), int(t)) in keys for s, t in zip(cands.src_idx, cands.tgt_idx, strict=True)])
    return cands, good


def stratified(scores: np.ndarray, n: int, bands: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Equal allocation over score bands (quantiles); returns sampled indices and their stratum weights."""
    edges = np.quantile(scores, np.linspace(0, 1, bands + 1)[1:-1])
    band = np.searchsorted(edges, scores, side="right")
    picked = np.concatenate(
        [
            rng.choice(np.flatnonzero(band == b), size=min(n // bands, int((band == b).sum())), replace=False)
            for b in range(bands)
        ]
    )
    return picked, stratum_weights(band[picked], np.bincount(band, minlength=bands))


def calibration_study(args, lang: str, review: BuccSet, usem) -> None:
    src, tgt = usem.encode(review.src_texts, "en"), usem.encode(review.tgt_texts, lang)
    cands, good = candidates(src, tgt, review.gold)
    print(f"\n== calibration, en-{lang}: {len(cands)} candidates in the review pool, {good.mean():.1%} GOOD ==")
    print(
        f"{'labels':>7}{'ECE head':>10}{'ECE Platt':>10}{'ECE iso':>9}{'Brier head':>11}{'Brier Platt':>12}"
        f"{'thresh@95%':>11}{'est. P [95% CI]':>22}{'true P':>8}{'kept':>6}{'in CI':>6}"
    )
    u_all = src[cands.src_idx]
    for n in args.labels:
        rng = np.random.default_rng(args.seed + n)
        idx, w = stratified(cands.score, n, args.bands, rng)
        reports = compare_calibrators(
            {"head": CalibrationHead, "platt": PlattScaling, "isotonic": IsotonicCalibration},
            u_all[idx],
            cands.score[idx],
            good[idx],
            k=5,
            seed=args.seed,
            sample_weight=w,
        )
        choice = choose_threshold(cands.score[idx], good[idx], 0.95, weights=w, all_scores=cands.score)
        if choice is None:
            print(f"{n:>7}  no threshold reaches 95 % precision on these labels")
            continue
        kept = cands.score >= choice.threshold
        true_p = good[kept].mean()
        e = choice.estimate
        inside = e.low - 1e-9 <= true_p <= e.high + 1e-9
        print(
            f"{n:>7}{reports['head'].ece:>10.3f}{reports['platt'].ece:>10.3f}{reports['isotonic'].ece:>9.3f}"
            f"{reports['head'].brier:>11.3f}{reports['platt'].brier:>12.3f}{choice.threshold:>11.3f}"
            f"{f'{e.precision:.3f} [{e.low:.3f}, {e.high:.3f}]':>22}{true_p:>8.3f}{kept.sum():>6}"
            f"{'yes' if inside else 'NO':>6}"
        )
        uncertain = uncertain_sample(
            PlattScaling().fit(None, cands.score[idx], good[idx], sample_weight=w).predict(None, cands.score),
            0.5,
            50,
            exclude=idx,
            seed=args.seed,
        )
        print(
            f"{'':>7}  (uncertain sampler, kept apart from the estimate: next 50 items have true GOOD rate "
            f"{good[uncertain].mean():.2f})"
        )


def held_out(enc, evaluation: BuccSet, lang: str) -> tuple[float, float]:
    """P@1 on the gold pairs and the best ratio-margin F1 of the held-out evaluation set, in %."""
    scores, p1 = evaluate_mining(
        enc.encode(evaluation.src_texts, "en"), enc.encode(evaluation.tgt_texts, lang), evaluation.gold, k=4
    )
    return 100 * p1, 100 * max(s.f1 for s in scores if s.margin == "ratio")


def finetune_study(args, lang: str, review: BuccSet, evaluation: BuccSet) -> None:
    """Fine-tune on each seed's simulated labels (GOOD pairs + high-scoring BAD pairs as hard negatives, with replay),
    beside the same fine-tuning without the hard negatives; compare with the starting DAN on the held-out pages."""
    catalogue = [(p[0], p[1]) for p in load_pairs(datasets(), "en", lang, origins=TRAIN_ORIGINS)]
    dan, _, _ = train(lang, True, args, catalogue, "cat")
    src, tgt = dan.encode(review.src_texts, "en"), dan.encode(review.tgt_texts, lang)
    cands, good = candidates(src, tgt, review.gold)
    p1_0, f1_0 = held_out(dan, evaluation, lang)
    config = FineTuneConfig(
        **{
            k: v
            for k, v in (("epochs", args.ft_epochs), ("lr", args.ft_lr), ("emb_lr", args.ft_emb_lr))
            if v is not None
        }
    )
    print(
        f"\n== fine-tuning the DAN on reviews, en-{lang}: {max(args.labels)} labels per seed, BAD pairs scoring "
        f"above the run's median are hard negatives, {args.replay} replayed training pairs, lr {config.lr:g} / "
        f"embeddings {config.emb_lr:g}, up to {config.epochs} epochs, epoch chosen on "
        f"{config.validation_share:.0%} of the labels =="
    )
    print(
        f"held-out evaluation pages: {len(evaluation.gold)} gold pairs; DAN before: P@1 {p1_0:.1f}, F1 {f1_0:.1f} "
        "(ratio margin, best threshold)"
    )
    print("(GOOD / BAD: labelled pairs trained on, after the validation split; epoch 0: the starting weights kept)")
    print(
        f"{'seed':>4} {'training':<22}{'GOOD':>5}{'BAD':>5}{'epoch':>6}{'P@1':>7}{'dP@1':>7}{'F1':>7}{'dF1':>7}{'s':>5}"
    )
    deltas: dict[str, list[tuple[float, float]]] = {"hard negatives": [], "positives only": []}
    for seed in args.ft_seeds:
        rng = np.random.default_rng(seed)
        idx, _ = stratified(cands.score, max(args.labels), args.bands, rng)
        pos, hard = review_training_pairs(good[idx], cands.score[idx], min_score=float(np.median(cands.score)))
        rows = cands.src_idx[idx], cands.tgt_idx[idx]
        pairs = [(review.src_texts[s], review.tgt_texts[t]) for s, t in zip(*rows, strict=True)]
        replay = [
            catalogue[i] for i in rng.choice(len(catalogue), size=min(args.replay, len(catalogue)), replace=False)
        ]
        for name, use_hard in (("hard negatives", True), ("positives only", False)):
            t0 = time.perf_counter()
            result = fine_tune_dan(
                dan,
                [pairs[i] for i in pos],
                [pairs[i] for i in hard],
                replay_pairs=replay,
                config=dataclasses.replace(config, seed=seed, hard_negatives=use_hard),
            )
            secs = time.perf_counter() - t0
            p1, f1 = held_out(result.encoder, evaluation, lang)
            deltas[name].append((p1 - p1_0, f1 - f1_0))
            print(
                f"{seed:>4} {name:<22}{result.n_positives:>5}{result.n_hard_negatives:>5}{result.best_epoch:>6}"
                f"{p1:>7.1f}{p1 - p1_0:>+7.1f}{f1:>7.1f}{f1 - f1_0:>+7.1f}{secs:>5.0f}",
                flush=True,
            )
    for name, d in deltas.items():
        dp, df = np.array(d).T
        print(
            f"mean over {len(d)} seeds, {name}: P@1 {dp.mean():+.1f} (min {dp.min():+.1f}), "
            f"F1 {df.mean():+.1f} (min {df.min():+.1f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lang", default="fr")
    parser.add_argument("--labels", default="200,500,1000")
    parser.add_argument("--bands", type=int, default=5)
    parser.add_argument("--gold", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--split-seed",
        type=int,
        default=None,
        help="page split and test-set draws (default: --seed; the DAN is trained with --seed)",
    )
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--hard-epochs", type=int, default=2)
    parser.add_argument("--hard-negatives", type=int, default=5)
    parser.add_argument("--max-train", type=int, default=0)
    parser.add_argument("--ft-epochs", type=int, default=None, help="fine-tuning epochs (default: FineTuneConfig's)")
    parser.add_argument("--ft-lr", type=float, default=None, help="fine-tuning lr of the dense layers")
    parser.add_argument("--ft-emb-lr", type=float, default=None, help="fine-tuning lr of the embeddings")
    parser.add_argument("--ft-seeds", default="0,1,2", help="label draws (and fine-tuning seeds) to average over")
    parser.add_argument("--replay", type=int, default=5000, help="original training pairs replayed in fine-tuning")
    parser.add_argument("--skip-finetune", action="store_true")
    parser.add_argument("--skip-calibration", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--precision", action="store_true", help="the issue-31 loop instead: stated vs measured precision by labels"
    )
    parser.add_argument("--langs", default="fr,de,es", help="--precision: languages")
    parser.add_argument(
        "--collections", default="manuals,manuals-repeat,gimp,debref,catalogue", help="--precision: collections"
    )
    parser.add_argument("--distractors", type=int, default=4000, help="--precision: distractors a side")
    parser.add_argument("--draws", type=int, default=20, help="--precision: label draws per budget")
    parser.add_argument(
        "--decoys",
        choices=("disjoint", "shuffled"),
        default="disjoint",
        help="--precision: decoys from the disjoint collection, or shuffled target sentences (the fallback)",
    )
    parser.add_argument(
        "--allocation",
        choices=("equal", "proportional"),
        default="proportional",
        help="--precision: labels per kept band: proportional to its size (the one-click check's sampler) or equal "
        "(its sampler before)",
    )
    parser.add_argument("--precision-gold", type=int, default=1000, help="--precision: gold pairs per case")
    args = parser.parse_args()
    if args.precision:
        from _precision_loop import run as precision_loop

        args.gold = args.precision_gold
        precision_loop(args)
        return
    args.labels = [int(x) for x in args.labels.split(",")]
    args.ft_seeds = [int(x) for x in args.ft_seeds.split(",")]
    if args.quick:
        args.gold, args.labels, args.epochs, args.hard_epochs, args.max_train = 300, [200, 500], 1, 1, 20000
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    manual = load_pairs(datasets(), "en", args.lang, origins=TEST_ORIGINS)
    split_seed = args.seed if args.split_seed is None else args.split_seed
    roles = split(manual, split_seed)
    review = bucc(manual, roles, "r", args.lang, args.gold, split_seed)
    evaluation = bucc(manual, roles, "e", args.lang, args.gold, split_seed)
    print(
        f"review pool: {len(review.gold)} gold among {len(review.src_texts)}/{len(review.tgt_texts)}; "
        f"evaluation: {len(evaluation.gold)} gold among {len(evaluation.src_texts)}/{len(evaluation.tgt_texts)}"
    )
    if not args.skip_calibration:
        calibration_study(args, args.lang, review, Usem3Encoder())
    if not args.skip_finetune:
        finetune_study(args, args.lang, review, evaluation)


if __name__ == "__main__":
    main()
