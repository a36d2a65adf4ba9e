"""Sentence embeddings of a corpus side, stored as shard files in the data folder and reused when present.

Layout: PCAPP_DATA_DIR/embeddings/corpus-<id>/<encoder>-v<version>/<lang>/shard-<n>.npz holding `ids` (int64) and
`emb` (float16 to halve disk and RAM; rows L2-normalised before the cast). A shard is reused only when its ids
match the corpus's current sentence ids for that shard, so an import into the corpus invalidates what it changed.

Embeddings are always used as the float16 values the cache holds (widened to float32), also right after they were
computed, so a run that reuses the cache and one that computed everything afresh search the same numbers.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from django.conf import settings

from mining.core.files import atomic_path

from ..models import Artefact, Corpus, Sentence

logger = logging.getLogger(__name__)

SHARD_SIZE = 50_000


def embeddings_dir(corpus: Corpus, encoder: Artefact, lang: str, site: str = "") -> Path:
    """Folder of the embedding shards of one corpus side under one encoder (of one site's pages, when given)."""
    root = Path(settings.PCAPP_DATA_DIR) / "embeddings" / f"corpus-{corpus.pk}"
    name = f"{lang}-site-{re.sub(r'[^a-z0-9.-]', '_', site.lower())}" if site else lang
    return root / f"{encoder.name}-v{encoder.version}" / name


@dataclass(frozen=True)
class Side:
    """One side of a mining job: sentence ids (int64, ascending), their texts and detected languages."""

    ids: np.ndarray
    texts: list[str]
    detected: list[str]

    def __len__(self) -> int:
        return len(self.texts)


def side_sentences(corpus: Corpus, lang: str, *, dedup: bool = True, site: str = "") -> Side:
    """The sentences of one corpus side (of the pages of one `site`, a registered domain, when given); with `dedup`,
    only the first sentence of each normalised text."""
    sentences = Sentence.objects.filter(corpus=corpus, lang=lang)
    if site:
        sentences = sentences.filter(document__site=site)
    rows = sentences.order_by("id").values_list("id", "norm_hash", "text", "detected_lang")
    ids: list[int] = []
    texts: list[str] = []
    detected: list[str] = []
    seen: set[int] = set()
    for sid, norm_hash, text, det in rows.iterator(chunk_size=20_000):
        if dedup:
            if norm_hash in seen:
                continue
            seen.add(norm_hash)
        ids.append(sid)
        texts.append(text)
        detected.append(det)
    return Side(np.asarray(ids, dtype=np.int64), texts, detected)


def embed_side(
    *,
    corpus: Corpus,
    lang: str,
    encoder_artefact: Artefact,
    encode: Callable[[list[str], str], np.ndarray],
    ids: np.ndarray,
    texts: list[str],
    progress: Callable[[int, int], None] | None = None,
    shard_size: int = SHARD_SIZE,
    variant: str = "",
) -> np.ndarray:
    """Embeddings (n, d) float32 for `ids`/`texts`, computing only shards that are not on disk yet.

    `variant` keeps differently ordered selections of the same side (e.g. every sentence by document) apart.
    """
    folder = embeddings_dir(corpus, encoder_artefact, lang)
    if variant:
        folder = folder.parent / f"{lang}-{variant}"
    folder.mkdir(parents=True, exist_ok=True)
    n = len(ids)
    parts: list[np.ndarray] = []
    for shard_no, start in enumerate(range(0, n, shard_size)):
        stop = min(n, start + shard_size)
        path = folder / f"shard-{shard_no:05d}.npz"
        emb = load_shard(path, ids[start:stop])
        if emb is None:
            emb = save_shard(path, ids[start:stop], np.asarray(encode(texts[start:stop], lang), dtype=np.float32))
        else:
            logger.info("reusing %s", path)
        parts.append(emb)
        if progress:
            progress(stop, n)
    if not parts:
        return np.zeros((0, 0), dtype=np.float32)
    return np.concatenate(parts, axis=0)


def shard_path(folder: Path, shard_no: int) -> Path:
    """The file of one embedding shard."""
    return folder / f"shard-{shard_no:05d}.npz"


def load_shard(path: Path, ids: np.ndarray) -> np.ndarray | None:
    """The (n, d) float32 embeddings in `path` (float16 values), or None when it is missing or holds other ids."""
    if not path.exists():
        return None
    try:
        with np.load(path) as data:
            if data["ids"].shape != ids.shape or not np.array_equal(data["ids"], ids):
                return None
            return data["emb"].astype(np.float32)
    except (OSError, ValueError, KeyError, EOFError):  # a torn or foreign file: computed again
        logger.warning("unreadable embedding shard %s; computing it again", path)
        return None


def save_shard(path: Path, ids: np.ndarray, emb: np.ndarray) -> np.ndarray:
    """Store float32 embeddings as float16 (temp file, then an atomic rename); returns them as stored (float32)."""
    half = np.asarray(emb).astype(np.float16)
    with atomic_path(path, suffix=".npz") as tmp:
        np.savez(tmp, ids=ids, emb=half)
    return half.astype(np.float32)
