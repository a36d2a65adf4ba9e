"""Sentence encoders by name, built lazily and cached per (name, arguments) in the process.

Built-in names: ``"usem3"`` (the default; ``threads=``, ``compute=`` "auto" / "bf16" / "fp32", ``device=``),
``"dan"`` (``path=`` a checkpoint written by
``train_dan`` or ``DanEncoder.save``; ``threads=``), ``"adapted"`` (``path=`` a file written by
``AdaptedEncoder.save``: a pretrained encoder plus a trained tower per language; ``threads=``), ``"combined"``
(``path=`` a file written by ``combine.save_combination``: weighted members, each by registry name and path) and
``"local"`` (``path=`` a sentence-transformers model directory; ``threads=``). Nothing is imported or loaded
before ``get_encoder`` is called.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from mining.core.encoders.base import SentenceEncoder

DEFAULT_ENCODER = "usem3"

Factory = Callable[..., SentenceEncoder]

_factories: dict[str, Factory] = {}
_cache: dict[tuple[str, tuple[tuple[str, Any], ...]], SentenceEncoder] = {}
_lock = threading.RLock()  # re-entrant: a factory may load its base encoder through get_encoder


def register(name: str, factory: Factory, *, replace: bool = False) -> None:
    """Make ``get_encoder(name, **kwargs)`` call ``factory(**kwargs)``."""
    if not name or not isinstance(name, str):
        raise ValueError("encoder name must be a non-empty string")
    with _lock:
        if name in _factories and not replace:
            raise ValueError(f"encoder {name!r} is already registered")
        _factories[name] = factory
        for key in [k for k in _cache if k[0] == name]:
            del _cache[key]


def unregister(name: str) -> None:
    """Forget a registered name and its loaded encoders (tests; plug-ins that go away)."""
    with _lock:
        _factories.pop(name, None)
        for key in [k for k in _cache if k[0] == name]:
            del _cache[key]


def available() -> list[str]:
    """Registered encoder names, sorted."""
    return sorted(_factories)


def _cache_key(name: str, kwargs: dict[str, Any]) -> tuple[str, tuple[tuple[str, Any], ...]]:
    # Paths are made absolute so "model" and "./model" share one loaded encoder.
    items = {k: os.path.abspath(os.fspath(v)) if k == "path" else v for k, v in kwargs.items()}
    return name, tuple(sorted(items.items()))


def get_encoder(name: str = DEFAULT_ENCODER, **kwargs: Any) -> SentenceEncoder:
    """The encoder ``name`` built with ``kwargs`` (e.g. ``path=``), loaded once per process.

    Raises:
        KeyError: unknown name (the message lists the available ones).
    """
    if name not in _factories:
        raise KeyError(f"unknown encoder {name!r}; available: {', '.join(available())}")
    key = _cache_key(name, kwargs)
    with _lock:
        encoder = _cache.get(key)
        if encoder is None:
            encoder = _factories[name](**kwargs)
            _cache[key] = encoder
    return encoder


def clear_cache() -> None:
    """Forget every loaded encoder (tests; freeing memory)."""
    with _lock:
        _cache.clear()


def _usem3(threads: int = 1, compute: str = "auto", device: str = "auto") -> SentenceEncoder:
    from mining.core.encoders.usem import Usem3Encoder

    return Usem3Encoder(threads=threads, compute=compute, device=device)


def _dan(path: str | os.PathLike[str], threads: int | None = 1) -> SentenceEncoder:
    from mining.core.encoders.dan import DanEncoder

    return DanEncoder.load(path, threads=threads)


def _local(path: str | os.PathLike[str], threads: int | None = 1, **options: Any) -> SentenceEncoder:
    from mining.core.encoders.local import LocalSentenceTransformer

    return LocalSentenceTransformer(path, threads=threads, **options)


def _adapted(path: str | os.PathLike[str], threads: int | None = 1) -> SentenceEncoder:
    from mining.core.encoders.adapter import AdaptedEncoder

    return AdaptedEncoder.load(path, load_base=get_encoder, threads=threads)


def _combined(path: str | os.PathLike[str], threads: int | None = 1) -> SentenceEncoder:
    from mining.core.encoders.combine import load_combination

    return load_combination(path, load_member=get_encoder, threads=threads)


register("usem3", _usem3)
register("dan", _dan)
register("local", _local)
register("adapted", _adapted)
register("combined", _combined)
