"""A campaign's parameters, defined once on the run parameters' framework (`mining.params`): their types, defaults,
bounds and help in the field definitions, their checks and error messages the run kinds' (`Params.from_dict`).

The campaign form and the API serializer derive their fields from `CampaignSpec.specs()` and pass the raw values to
`CampaignSpec.from_dict`, so the same bad value gets the same message from both, and the same words as a run's
parameters ("'x' is not a whole number", "must be at least 1 (got 0)"); `services.campaign_create` takes the spec;
the model's defaults are the spec's. Which runs and reviewers a campaign has are rows, not parameters: the form, the
serializer and the service check those.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar

from django.db import models

from mining.params import Params, param


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


@dataclass(frozen=True)
class CampaignSpec(Params):
    """How a campaign samples its items from each run and how it is reviewed.

    Typed construction checks every field too (`check_fields`), raising ParamsError with one message per bad field."""

    OWNER: ClassVar[str] = "campaigns"

    name: str = param(MISSING, "", lo=1, hi=200, label="Name")
    sample_size: int = param(200, "Items per run (the paper used 200).", lo=1, hi=100_000, label="Sample size")
    sampler: Sampler = param(Sampler.UNIFORM, "", label="Sampler")
    threshold: float | None = param(
        None,
        "Score threshold of the 'around the threshold' and 'kept set' samplers (blank: each run's own threshold: "
        "the one it was started with, else its language pair's calibrated threshold, else its label-free default).",
        label="Threshold",
    )
    n_uncertain: int = param(
        0,
        "Active sampling: extra items whose calibrated confidence is nearest the language pair's threshold "
        "(needs a calibration applied to the run). Kept out of the precision estimates.",
        lo=0,
        hi=100_000,
        label="Uncertain items per run",
    )
    bands: int = param(5, "Score bands (stratified).", lo=2, hi=20, label="Bands")
    seed: int = param(0, "", lo=0, hi=SEED_MAX, label="Seed")
    overlap: int = param(1, "Reviewers who judge each item.", lo=1, hi=10, label="Overlap")
    n_controls: int = param(0, "Known GOOD/BAD control items per run.", lo=0, hi=1000, label="Control items per run")
    blind: bool = param(False, "Hide the mining evidence from reviewers.", label="Blind")
    guidelines: str = param(DEFAULT_GUIDELINES, "", lo=1, hi=20_000, label="Guidelines")

    def __post_init__(self) -> None:
        self.check_fields()


DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(CampaignSpec) if f.default is not MISSING}
"""The default of every parameter that has one (all but the name)."""
