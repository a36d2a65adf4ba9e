"""A pretrained encoder from a local sentence-transformers directory (e.g. a LaBSE copy a user already has).

Loading never touches the network: the path must be an existing model directory, the Hugging Face hub
is switched to offline mode and ``local_files_only`` is passed. sentence-transformers (and transformers)
are imported only when such an encoder is built, since importing them takes seconds.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from mining.core.encoders.base import DEFAULT_BATCH_SIZE, Progress, SentenceEncoder, normalize_lang
from mining.core.encoders.dan import torch_threads

logger = logging.getLogger(__name__)

_MARKERS = ("modules.json", "config_sentence_transformers.json", "config.json")


class LocalModelError(ValueError):
    """The path does not hold a loadable sentence-transformers model."""


def _check_model_dir(path: Path) -> None:
    if not path.exists():
        raise LocalModelError(f"local encoder path {path} does not exist (models are never downloaded)")
    if not path.is_dir() or not any((path / marker).is_file() for marker in _MARKERS):
        raise LocalModelError(
            f"{path} is not a sentence-transformers model directory (expected one of {', '.join(_MARKERS)})"
        )


class LocalSentenceTransformer(SentenceEncoder):
    """A sentence-transformers model loaded from a local directory, on CPU.

    Args:
        path: the model directory (as written by ``SentenceTransformer.save``).
        threads: torch intra-op threads while encoding (None: the process setting).
        languages: the languages the model covers (None: do not check).
        name: display name (default ``"local:<directory name>"``).
        device: torch device.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        threads: int | None = 1,
        languages: Iterable[str] | None = None,
        name: str | None = None,
        device: str = "cpu",
    ) -> None:
        self.path = Path(path).expanduser().resolve()
        _check_model_dir(self.path)
        # Belt and braces: even a module config naming a hub repo must not trigger a download.
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        from sentence_transformers import SentenceTransformer

        self.threads = threads
        with torch_threads(threads):
            try:
                self.model = SentenceTransformer(str(self.path), device=device, local_files_only=True)
            except Exception as exc:
                raise LocalModelError(f"could not load a sentence-transformers model from {self.path}: {exc}") from exc
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        self.name = name or f"local:{self.path.name}"
        self.languages = None if languages is None else frozenset(normalize_lang(lang) for lang in languages)
        logger.info("loaded local encoder %s (dim %d)", self.path, self.dim)

    def _encode(
        self, texts: list[str], lang: str, *, batch_size: int = DEFAULT_BATCH_SIZE, progress: Progress | None
    ) -> np.ndarray:
        n = len(texts)
        # Sorted by length, so each padded batch holds sentences of similar length; order restored below.
        order = np.argsort(np.fromiter(map(len, texts), dtype=np.int64, count=n), kind="stable")
        out = np.empty((n, self.dim), dtype=np.float32)
        with torch_threads(self.threads):
            for start in range(0, n, batch_size):
                idx = order[start : start + batch_size]
                out[idx] = self.model.encode(
                    [texts[i] for i in idx], batch_size=len(idx), convert_to_numpy=True, show_progress_bar=False
                )
                if progress is not None:
                    progress(min(start + batch_size, n), n)
        return out
