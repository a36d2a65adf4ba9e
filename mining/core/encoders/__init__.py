"""Sentence encoders behind one interface: ``encode(texts, lang) -> (n, d) float32``, rows L2-normalised.

Importing this package loads no model and no heavy library beyond numpy: use ``get_encoder(name, ...)``.
"""

from mining.core.encoders.base import SentenceEncoder, UnsupportedLanguage, l2_normalize, normalize_lang
from mining.core.encoders.combine import ConcatEncoder
from mining.core.encoders.registry import (
    DEFAULT_ENCODER,
    available,
    clear_cache,
    get_encoder,
    register,
    unregister,
)

__all__ = [
    "DEFAULT_ENCODER",
    "ConcatEncoder",
    "SentenceEncoder",
    "UnsupportedLanguage",
    "available",
    "clear_cache",
    "get_encoder",
    "l2_normalize",
    "normalize_lang",
    "register",
    "unregister",
]
