"""The mining-quality test sets for bench/mining_quality.py: the manuals' pages split into training and held-out
pages, their sentences, and BUCC-style sets with gold pairs hidden among distractors; best F1 / P@1 of a pair of
embedded sides."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from mining.core.evaluation import BuccSet, build_bucc, evaluate_mining
from scripts.data_sources import UNALIGNED_PAGES, load_documents

ROOT = Path(__file__).resolve().parent.parent
TEST_ORIGINS = ["gimp-help", "debian-reference"]
TRAIN_ORIGINS = ["debian-mo", "django"]


def datasets() -> Path:
    return Path(os.environ.get("PCAPP_DATA_DIR", ROOT / "var")) / "datasets"


def split_pages(pairs: list[tuple[str, str, str, str]], share: float, seed: int) -> dict[tuple[str, str], str]:
    """Assign each manual page: 'train' (1 - share), or one of the three test roles 'gold', 'src', 'tgt'."""
    docs = sorted({(origin, doc) for _, _, origin, doc in pairs})
    draw = np.random.default_rng(seed).random(len(docs))
    roles = {}
    for d, r in zip(docs, draw, strict=True):
        roles[d] = "train" if r >= share else ("gold", "src", "tgt")[int(3 * r / share)]
    return roles


def page_sentences(
    lang: str, roles: dict[tuple[str, str], str], role: str, other: str | None = None
) -> tuple[list[str], list[list[str]]]:
    """All sentences (>= 5 words) of the manual pages with `role`, from the document collections, and with `other`
    each one's shadow: the sentences of its block in the page's `other`-language version (the whole page when the two
    versions' blocks do not line up), the text that may translate it."""
    import sentencex

    out, shadows = [], []
    for collection in TEST_ORIGINS:
        others = {d["id"]: d for d in load_documents(datasets(), collection, other)} if other else {}
        for doc in load_documents(datasets(), collection, lang):
            if roles.get((collection, doc["id"])) != role or doc["id"] in UNALIGNED_PAGES:
                continue
            twin = others.get(doc["id"])
            if twin is None or not other:
                out.extend(s for s in doc["sentences"] if len(s.split()) >= 5)
                shadows.extend([] for s in doc["sentences"] if len(s.split()) >= 5)
                continue
            aligned = len(twin["blocks"]) == len(doc["blocks"])
            for i, block in enumerate(doc["blocks"]):
                shadow = (
                    [s.strip() for s in sentencex.segment(other, twin["blocks"][i]) if s.strip()]
                    if aligned
                    else twin["sentences"]
                )
                for sent in (s.strip() for s in sentencex.segment(lang, block)):
                    if len(sent.split()) >= 5:
                        out.append(sent)
                        shadows.append(shadow)
    return out, shadows


def in_language(texts: list[str], lang: str) -> list[bool]:
    """Whether py3langid (the importer's language id) reads each text as `lang`."""
    from mining.ingest.langid import detect

    return [d == lang for d in detect(texts)]


def _kept(items: list, keep: list[bool]) -> list:
    return [x for x, k in zip(items, keep, strict=True) if k]


def test_set(pairs, roles, lang: str, n_gold: int, n_distractors: int, seed: int, care: str = "fuzzy") -> BuccSet:
    """Gold pairs from the 'gold' pages; source distractors from the 'src' pages' English, target distractors from
    the 'tgt' pages' translation: disjoint pages, so no distractor pair can be a real translation.

    care="exact" drops near-duplicates by normalised key only (the first version of this bench). care="fuzzy" also
    keeps only sentences in their side's language (the German manual leaves some paragraphs in English) and drops, by
    word-set Jaccard >= 0.5, distractors that nearly repeat a gold sentence or whose block's translation on their own
    page nearly repeats a sentence of the other side: the manuals reuse sentences across pages with small edits, and
    the near-copy's translation is then a translation of a test sentence, not a distractor."""
    gold = [
        (p[0], p[1])
        for p in pairs
        if roles.get((p[2], p[3])) == "gold" and len(p[0].split()) >= 5 and len(p[1].split()) >= 5
    ]
    fuzzy = care == "fuzzy"
    src, src_shadows = page_sentences("en", roles, "src", lang if fuzzy else None)
    tgt, tgt_shadows = page_sentences(lang, roles, "tgt", "en" if fuzzy else None)
    if fuzzy:
        ok_s, ok_t = in_language([g[0] for g in gold], "en"), in_language([g[1] for g in gold], lang)
        gold = [g for g, a, b in zip(gold, ok_s, ok_t, strict=True) if a and b]
        keep_s, keep_t = in_language(src, "en"), in_language(tgt, lang)
        src, src_shadows, tgt, tgt_shadows = (
            _kept(src, keep_s),
            _kept(src_shadows, keep_s),
            _kept(tgt, keep_t),
            _kept(tgt_shadows, keep_t),
        )
    return build_bucc(
        gold,
        src,
        tgt,
        n_gold=n_gold,
        n_distractors=n_distractors,
        min_words=5,
        seed=seed,
        known_pairs=[p[:2] for p in pairs],
        fuzzy=0.5 if fuzzy else None,
        src_shadows=src_shadows if fuzzy else None,
        tgt_shadows=tgt_shadows if fuzzy else None,
    )


def best_f1_p1(src: np.ndarray, tgt: np.ndarray, gold: np.ndarray, ks: list[int]) -> tuple[float, float]:
    """(best F1 over every k x margin x strategy, gold P@1)."""
    scores, p1 = evaluate_mining(src, tgt, gold, k=ks)
    return max(s.f1 for s in scores), p1
