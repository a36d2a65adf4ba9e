"""Reviewers' labels of candidates, as the app above mining provides them.

Mining's results (label counts, the label filter, run comparison) read labels, but the labels belong to the review
app, which sits above mining and may import it, never the reverse (the import contracts in pyproject.toml). So
mining declares what it reads and the review app registers it at start-up, in its ``AppConfig.ready``:

    provide_label_model(Label, random_sample=Q(item__sampler__in=[...]))

`random_sample` (optional) selects the labels of pairs drawn at random (by a probability sampler, not picked by a
reviewer or drawn near a threshold): the labels that may settle a run's stated precision (``selectors.settled``).

The model must have ``verdict`` ("GOOD" / "BAD") and nullable foreign keys ``sentence_pair`` (to
``SentencePairCandidate``) and ``document_pair`` (to ``DocumentPairCandidate``). Without a provider (mining installed
alone) every candidate reads as unlabelled.
"""

from __future__ import annotations

from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured
from django.db import models

from ..models import DocumentPairCandidate, SentencePairCandidate, Verdict

LABEL_FIELDS = {"verdict": None, "sentence_pair": SentencePairCandidate, "document_pair": DocumentPairCandidate}

_provided: dict[str, type[models.Model] | None] = {"model": None}
_random_sample: dict[str, models.Q | None] = {"q": None}


def provide_label_model(model: type[models.Model] | None, *, random_sample: models.Q | None = None) -> None:
    """Register the model whose rows are the labels mining's results count (None: no labels), and the filter of its
    labels of randomly drawn pairs (None: none is known to be)."""
    if model is not None:
        for name, target in LABEL_FIELDS.items():
            try:
                field = model._meta.get_field(name)
            except FieldDoesNotExist as exc:
                raise ImproperlyConfigured(f"{model.__name__} has no field '{name}', which mining reads") from exc
            if target is not None and getattr(field, "related_model", None) is not target:
                raise ImproperlyConfigured(f"{model.__name__}.{name} must be a foreign key to {target.__name__}")
        verdicts = {value for value, _ in model._meta.get_field("verdict").flatchoices}
        if not {Verdict.GOOD.value, Verdict.BAD.value} <= verdicts:
            raise ImproperlyConfigured(f"{model.__name__}.verdict must offer GOOD and BAD, offers {sorted(verdicts)}")
    _provided["model"] = model
    _random_sample["q"] = random_sample if model is not None else None


def label_model() -> type[models.Model] | None:
    """The label model the app above registered, or None when none did."""
    return _provided["model"]


def random_sample_filter() -> models.Q | None:
    """The filter of the registered model's labels of randomly drawn pairs, or None when the provider gave none."""
    return _random_sample["q"]
