"""Shared by the document benchmarks: where the fetched collections are, the GIMP manual's seeded halves, a page
pair's gold sentence ladder (block i's sentences <-> block i's sentences), and sentence embeddings cached on disk."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from pathlib import Path

import numpy as np

from scripts.data_sources import load_documents

ROOT = Path(__file__).resolve().parent.parent
COLLECTION = "gimp-help"
CACHE = ROOT / "var" / "cache" / "document_quality"


def datasets() -> Path:
    return Path(os.environ.get("PCAPP_DATA_DIR", ROOT / "var")) / "datasets"


def load_split(lang: str, seed: int, limit: int | None) -> tuple[dict, dict, list[str], list[str]]:
    """English and `lang` pages by id, and the seeded train/test halves of the ids present in both."""
    en = {d["id"]: d for d in load_documents(datasets(), COLLECTION, "en")}
    xx = {d["id"]: d for d in load_documents(datasets(), COLLECTION, lang)}
    ids = sorted(set(en) & set(xx))
    order = np.random.default_rng(seed).permutation(len(ids))
    ids = [ids[i] for i in order][:limit]
    half = len(ids) // 2
    return en, xx, sorted(ids[:half]), sorted(ids[half:])


def block_ladder(doc_en: dict, doc_xx: dict, lang: str) -> tuple[list[str], list[str], list[tuple[range, range]]]:
    """Sentences of both pages and the gold beads (block i's sentences <-> block i's sentences); None if the
    stored sentences are not the blocks' splits."""
    import sentencex

    s_sents, t_sents, beads = [], [], []
    for a, b in zip(doc_en["blocks"], doc_xx["blocks"], strict=True):
        sa = [s.strip() for s in sentencex.segment("en", a) if s.strip()]
        sb = [s.strip() for s in sentencex.segment(lang, b) if s.strip()]
        beads.append((range(len(s_sents), len(s_sents) + len(sa)), range(len(t_sents), len(t_sents) + len(sb))))
        s_sents += sa
        t_sents += sb
    if s_sents != doc_en["sentences"] or t_sents != doc_xx["sentences"]:
        return None
    return s_sents, t_sents, beads


class CachedEncoder:
    """An encoder whose outputs are cached on disk per (encoder tag, language, exact list of texts)."""

    def __init__(self, encoder, tag: str) -> None:
        self.encoder, self.tag = encoder, tag

    def __call__(self, texts: list[str], lang: str) -> np.ndarray:
        key = hashlib.blake2b(
            ("\x00".join(texts) + "\x01" + lang).encode("utf-8", "surrogatepass"), digest_size=12
        ).hexdigest()
        path = CACHE / f"{self.tag}-{lang}-{key}.npy"
        if path.exists():
            return np.load(path)
        t0 = time.perf_counter()
        emb = self.encoder.encode(texts, lang)
        logging.info("%s encoded %d %s texts in %.1f s", self.tag, len(texts), lang, time.perf_counter() - t0)
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp.npy"  # two bench processes may encode the same texts at once
        np.save(tmp, emb)
        os.replace(tmp, path)
        return emb
