"""A campaign's parameters, defined once: their types, defaults, bounds and error messages.

The campaign form and the API serializer pass the raw values to `CampaignSpec.from_dict`, so the same bad value gets
the same message from both; `services.campaign_create` takes the spec; the model's defaults are the spec's. Which runs
and reviewers a campaign has are rows, not parameters: the form, the serializer and the service check those.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from enum import Enum
from typing import Any

from django.db import models


class Sampler(models.TextChoices):
    UNIFORM = "uniform", "Uniform"
    STRATIFIED = "stratified", "Stratified by score band"
    TOP = "top", "Top N"
    THRESHOLD = "threshold", "Around the threshold"
    UNCERTAIN = "uncertain", "Uncertain: calibrated confidence nearest the pair's threshold"
    KEPT = "kept", "Stratified over the kept set (score bands above the run's threshold)"


DEFAULT_GUIDELINES = (
    "GOOD when more than 70 % of the sentence is correctly translated in the other, so that most of the "
    "information is conveyed. BAD otherwise: partial translations, wrong language, unrelated text, or the same "
    "text on both sides."
)

SEED_MAX = 2**31 - 1
"""Seeds are stored in a 32-bit column and seed numpy's generator, which refuses negative ones."""


class CampaignSpecError(ValueError):
    """Bad campaign parameters: `errors` maps each bad parameter to its one message."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors = dict(errors)
        super().__init__("; ".join(self.errors.values()))


class Kind(Enum):
    """The type of a parameter, which decides how raw values parse and what its message says."""

    TEXT = "text"
    WHOLE = "whole number"
    NUMBER = "number or nothing"
    FLAG = "true or false"
    SAMPLER = "sampler"


_FLAGS = {"true": True, "on": True, "yes": True, "1": True, "false": False, "off": False, "no": False, "0": False}


@dataclass(frozen=True)
class Param:
    """One parameter: its kind, what the form and the API show of it, and its bounds (inclusive; lengths for text)."""

    kind: Kind
    label: str
    help: str = ""
    lo: int = 0
    hi: int = 0

    def rule(self) -> str:
        """What a good value is, in words."""
        if self.kind is Kind.TEXT:
            return f"text of {self.lo} to {self.hi} characters"
        if self.kind is Kind.WHOLE:
            return f"a whole number from {self.lo} to {self.hi}"
        if self.kind is Kind.NUMBER:
            return "a finite number or nothing"
        if self.kind is Kind.FLAG:
            return "true or false"
        return "one of " + ", ".join(Sampler.values)

    def accepts(self, value: Any) -> bool:
        """Whether a typed value is good."""
        if self.kind is Kind.TEXT:
            return isinstance(value, str) and self.lo <= len(value.strip()) <= self.hi
        if self.kind is Kind.FLAG:
            return isinstance(value, bool)
        if self.kind is Kind.SAMPLER:
            return value in Sampler.values
        if isinstance(value, bool):
            return False
        if self.kind is Kind.WHOLE:
            return isinstance(value, int) and self.lo <= value <= self.hi
        return value is None or (isinstance(value, int | float) and math.isfinite(value))

    def parse(self, raw: Any) -> Any:
        """A typed value from a form string or a JSON value (ValueError or TypeError when it is none)."""
        if isinstance(raw, bool) and self.kind is not Kind.FLAG:
            raise TypeError("a boolean")
        if self.kind is Kind.TEXT:
            if not isinstance(raw, str):
                raise TypeError("not text")
            return raw.strip()
        if self.kind is Kind.WHOLE:
            if isinstance(raw, float) and not raw.is_integer():
                raise ValueError("not whole")
            return int(raw) if isinstance(raw, int | float) else int(str(raw).strip())
        if self.kind is Kind.NUMBER:
            return float(raw) if isinstance(raw, int | float) else float(str(raw).strip())
        if self.kind is Kind.FLAG:
            return raw if isinstance(raw, bool) else _FLAGS[str(raw).strip().lower()]
        return Sampler(str(raw).strip())


def _param(default: Any = MISSING, **kw: Any) -> Any:
    return field(default=default, metadata={"param": Param(**kw)})


@dataclass(frozen=True)
class CampaignSpec:
    """How a campaign samples its items from each run and how it is reviewed.

    Construction checks every field and raises CampaignSpecError with one message per bad field."""

    name: str = _param(kind=Kind.TEXT, label="Name", lo=1, hi=200)
    sample_size: int = _param(
        200, kind=Kind.WHOLE, label="Sample size", help="Items per run (the paper used 200).", lo=1, hi=100_000
    )
    sampler: Sampler = _param(Sampler.UNIFORM, kind=Kind.SAMPLER, label="Sampler")
    threshold: float | None = _param(
        None,
        kind=Kind.NUMBER,
        label="Threshold",
        help="Score threshold of the 'around the threshold' and 'kept set' samplers (blank: each run's own threshold: "
        "the one it was started with, else its language pair's calibrated threshold, else its label-free default).",
    )
    n_uncertain: int = _param(
        0,
        kind=Kind.WHOLE,
        label="Uncertain items per run",
        help="Active sampling: extra items whose calibrated confidence is nearest the language pair's threshold "
        "(needs a calibration applied to the run). Kept out of the precision estimates.",
        lo=0,
        hi=100_000,
    )
    bands: int = _param(5, kind=Kind.WHOLE, label="Bands", help="Score bands (stratified).", lo=2, hi=20)
    seed: int = _param(0, kind=Kind.WHOLE, label="Seed", lo=0, hi=SEED_MAX)
    overlap: int = _param(1, kind=Kind.WHOLE, label="Overlap", help="Reviewers who judge each item.", lo=1, hi=10)
    n_controls: int = _param(
        0, kind=Kind.WHOLE, label="Control items per run", help="Known GOOD/BAD control items per run.", lo=0, hi=1000
    )
    blind: bool = _param(False, kind=Kind.FLAG, label="Blind", help="Hide the mining evidence from reviewers.")
    guidelines: str = _param(DEFAULT_GUIDELINES, kind=Kind.TEXT, label="Guidelines", lo=1, hi=20_000)

    def __post_init__(self) -> None:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        errors = {name: message(name, v) for name, v in values.items() if not param(name).accepts(v)}
        if errors:
            raise CampaignSpecError(errors)
        object.__setattr__(self, "sampler", Sampler(self.sampler))  # a plain string becomes the enum member

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CampaignSpec:
        """A spec from raw values (form strings or JSON values); a missing, None or blank value takes the default.

        Raises CampaignSpecError naming every bad or unknown parameter at once."""
        errors = {k: f"'{k}' is not a campaign parameter" for k in data if k not in PARAMS}
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = data.get(f.name)
            if raw is None or (isinstance(raw, str) and not raw.strip()):
                if f.default is MISSING:
                    errors[f.name] = message(f.name, raw)
                continue
            try:
                value = param(f.name).parse(raw)
            except (TypeError, ValueError, KeyError):
                value = raw
            if param(f.name).accepts(value):
                values[f.name] = value
            else:
                errors[f.name] = message(f.name, raw)
        if errors:
            raise CampaignSpecError(errors)
        return cls(**values)


PARAMS: dict[str, Param] = {f.name: f.metadata["param"] for f in fields(CampaignSpec)}
"""Every parameter of CampaignSpec by name, in declaration order."""

DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(CampaignSpec) if f.default is not MISSING}
"""The default of every parameter that has one (all but the name)."""


def param(name: str) -> Param:
    """The description of one parameter of CampaignSpec."""
    return PARAMS[name]


def _shown(raw: Any) -> str:
    """A bad value as a message quotes it, the same whether it came as form text or as a JSON value ('0' for "0" and
    0): as text in quotes, long text by its length, no value as "empty"."""
    text = str(raw).strip() if raw is not None else ""
    if not text:
        return "empty"
    return f"'{text}'" if len(text) <= 40 else f"a text of {len(text)} characters"


def message(name: str, raw: Any) -> str:
    """The one message for a bad value of `name`, whatever is wrong with it."""
    return f"{name} must be {param(name).rule()}, not {_shown(raw)}"
