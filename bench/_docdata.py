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


class SentenceCache:
    """An encoder whose outputs are cached on disk per sentence (encoder tag, language, text): runs that read the same
    pages a little differently (another extractor, another page-language rule) encode only the sentences they add.
    Each call stores what it encoded as a new shard (keys + vectors)."""

    def __init__(self, encoder, tag: str) -> None:
        self.encoder, self.tag = encoder, tag
        self._rows: dict[str, dict[str, np.ndarray]] = {}

    def _load(self, lang: str) -> dict[str, np.ndarray]:
        if lang not in self._rows:
            rows: dict[str, np.ndarray] = {}
            for keys in sorted(CACHE.glob(f"sent-{self.tag}-{lang}-*.keys")):
                emb = np.load(keys.with_suffix(".npy"))
                rows.update(zip(keys.read_text(encoding="utf-8").split("\x00"), emb, strict=True))
            self._rows[lang] = rows
        return self._rows[lang]

    def __call__(self, texts: list[str], lang: str) -> np.ndarray:
        rows = self._load(lang)
        new = [t for t in dict.fromkeys(texts) if t not in rows]
        if new:
            t0 = time.perf_counter()
            emb = np.asarray(self.encoder.encode(new, lang), dtype=np.float32)
            logging.info("%s encoded %d new %s sentences in %.1f s", self.tag, len(new), lang, time.perf_counter() - t0)
            CACHE.mkdir(parents=True, exist_ok=True)
            name = hashlib.blake2b("\x00".join(new).encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
            base = CACHE / f"sent-{self.tag}-{lang}-{name}"
            np.save(f"{base}.npy", emb)
            Path(f"{base}.keys").write_text("\x00".join(new), encoding="utf-8")
            rows.update(zip(new, emb, strict=True))
        return np.stack([rows[t] for t in texts]) if texts else np.zeros((0, self.encoder.dim), np.float32)
