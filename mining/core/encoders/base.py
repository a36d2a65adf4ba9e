"""The one small interface every sentence encoder implements.

``SentenceEncoder.encode(texts, lang)`` returns an (n, d) float32 array with L2-normalised rows, so an
inner product is a cosine and any encoder plugs into the kNN and margin code unchanged.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable, Sequence

import numpy as np

logger = logging.getLogger(__name__)

Progress = Callable[[int, int], None]

DEFAULT_BATCH_SIZE = 256


class UnsupportedLanguage(ValueError):
    """Raised when an encoder is asked to embed a language it does not cover."""

    def __init__(self, encoder: str, lang: str, supported: frozenset[str] | None) -> None:
        self.encoder = encoder
        self.lang = lang
        self.supported = supported
        listed = ", ".join(sorted(supported)) if supported else "none"
        super().__init__(f"encoder {encoder!r} does not support language {lang!r} (supported: {listed})")


def normalize_lang(lang: str) -> str:
    """Primary ISO 639-1 subtag, lower case: ``"fr_FR"`` / ``"FR-ca"`` -> ``"fr"``."""
    if not isinstance(lang, str) or not lang.strip():
        raise ValueError(f"language code must be a non-empty string, got {lang!r}")
    return lang.strip().lower().replace("_", "-").split("-", 1)[0]


def check_domain_weight(weight: object) -> None:
    """Raise ValueError unless `weight` (times each in-domain pair is seen per epoch) is a whole number >= 1."""
    if not isinstance(weight, int) or isinstance(weight, bool) or weight < 1:
        raise ValueError(f"domain_weight must be a whole number >= 1, got {weight!r}")


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation into a new float32 array; all-zero rows stay zero.

    Args:
        x: (n, d) float array.

    Returns:
        (n, d) float32, each non-zero row of unit norm.
    """
    out = np.array(x, dtype=np.float32, copy=True)
    _normalize_rows_inplace(out)
    return out


def _normalize_rows_inplace(x: np.ndarray) -> None:
    """Divide each non-zero row of a float32 (n, d) array by its norm, in place (for arrays we own)."""
    norms = np.sqrt(np.einsum("ij,ij->i", x, x))[:, None]
    np.divide(x, norms, out=x, where=norms > 0)


class SentenceEncoder(abc.ABC):
    """Maps sentences of one language to unit vectors in a space shared across languages.

    Subclasses set ``name``, ``dim``, ``languages`` (``None`` = any language) and implement ``_encode``;
    ``encode`` validates the call and the result, so the contract lives in one place.
    """

    name: str
    dim: int
    languages: frozenset[str] | None

    def supports(self, lang: str) -> bool:
        """Whether ``lang`` (any case or region suffix) is covered."""
        return self.languages is None or normalize_lang(lang) in self.languages

    def check_language(self, lang: str) -> str:
        """Return the normalised code, or raise ``UnsupportedLanguage``."""
        code = normalize_lang(lang)
        if self.languages is not None and code not in self.languages:
            raise UnsupportedLanguage(self.name, lang, self.languages)
        return code

    def encode(
        self,
        texts: Sequence[str],
        lang: str,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        progress: Progress | None = None,
    ) -> np.ndarray:
        """Embed ``texts`` (all in language ``lang``).

        Args:
            texts: n strings (a bare ``str`` is rejected: wrap it in a list).
            lang: language code such as ``"en"`` or ``"fr_FR"``.
            batch_size: sentences per forward pass (bounds memory; paces ``progress``).
            progress: optional ``progress(done, total)`` callback, in sentences.

        Returns:
            (n, dim) float32, rows L2-normalised.

        Raises:
            UnsupportedLanguage: ``lang`` is not covered by this encoder.
        """
        if isinstance(texts, str):
            raise TypeError("texts must be a sequence of strings, not a single string")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        code = self.check_language(lang)
        texts = list(texts)
        if not all(isinstance(t, str) for t in texts):
            raise TypeError("texts must all be strings")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = self._encode(texts, code, batch_size=batch_size, progress=progress)
        if out.shape != (len(texts), self.dim):
            raise RuntimeError(f"{self.name} returned shape {out.shape}, expected {(len(texts), self.dim)}")
        out = np.asarray(out, dtype=np.float32)
        if not out.flags.writeable or not out.flags.c_contiguous:
            out = np.ascontiguousarray(out).copy()
        _normalize_rows_inplace(out)
        return out

    @abc.abstractmethod
    def _encode(self, texts: list[str], lang: str, *, batch_size: int, progress: Progress | None) -> np.ndarray:
        """Embed non-empty ``texts`` of normalised language ``lang``: (n, dim) float array, any norm."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} dim={self.dim}>"
