"""Reads of the calibration page: the latest model of a pair, the threshold for a target precision, and what can be
fine-tuned."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Exists, Max, Min, OuterRef

from annotation.models import Label
from mining.core.calibration.estimates import choose_threshold
from mining.models import (
    Artefact,
    ArtefactKind,
    Corpus,
    GoldSentencePair,
    JobStatus,
    LanguagePairSetting,
    MiningRun,
    RunKind,
    SentencePairCandidate,
)
from mining.selectors import scale_key

from .services.calibration import threshold_labels


def pair_exists(src: str, tgt: str) -> bool:
    """True when some run or stored setting has this language pair (the page of any other pair is a 404)."""
    return (
        MiningRun.objects.filter(src_lang=src, tgt_lang=tgt).exists()
        or LanguagePairSetting.objects.filter(src_lang=src, tgt_lang=tgt).exists()
    )


def latest_calibration_any(src: str, tgt: str) -> Artefact | None:
    """The newest calibration model of a pair, active or not (the page reports on it)."""
    return (
        Artefact.objects.filter(kind=ArtefactKind.CALIBRATION, name=f"calibration-{src}-{tgt}")
        .order_by("-version")
        .first()
    )


MIN_MODEL_LABELS = 100
"""Below this many labels (or 20 of the rarer verdict) a calibration model's probabilities are a rough guide only."""
MIN_MINORITY_LABELS = 20
NEAR_CONSTANT_RANGE = 0.05
"""A model whose P(good) spans less than this over the pair's candidates separates nothing."""
WEAK_LOWER_BOUND_GAP = 0.1
"""A threshold whose interval's lower bound lies this far or more below the target may well miss it."""


def pair_runs(src: str, tgt: str, limit: int | None = 50) -> list[MiningRun]:
    """The pair's succeeded sentence runs, newest first (what a threshold's yield can be counted over)."""
    qs = (
        MiningRun.objects.filter(kind=RunKind.SENTENCE, src_lang=src, tgt_lang=tgt, status=JobStatus.SUCCEEDED)
        .select_related("src_corpus", "tgt_corpus", "encoder")
        .order_by("-created_at")
    )
    return list(qs if limit is None else qs[:limit])


@dataclass(frozen=True)
class ScaleGroup:
    """The pair's succeeded sentence runs of one scoring configuration (their scores share a scale), newest first,
    with the threshold stored for it (None when none is)."""

    key: str
    runs: list[MiningRun]
    setting: LanguagePairSetting | None


def pair_scales(src: str, tgt: str) -> list[ScaleGroup]:
    """The pair's runs grouped by scoring configuration, the group of the newest run first; a stored setting whose
    configuration has no run left is listed too (with no runs). Two queries."""
    groups: dict[str, list[MiningRun]] = {}
    for run in pair_runs(src, tgt, limit=None):
        groups.setdefault(scale_key(run), []).append(run)
    settings = {s.scale_key: s for s in LanguagePairSetting.objects.filter(src_lang=src, tgt_lang=tgt)}
    out = [ScaleGroup(key, runs, settings.get(key)) for key, runs in groups.items()]
    out += [ScaleGroup(key, [], s) for key, s in sorted(settings.items()) if key not in groups]
    return out


def threshold_choice(
    src: str, tgt: str, target: float, runs: list[MiningRun] | None = None, scale: ScaleGroup | None = None
) -> dict[str, Any]:
    """The lowest score threshold whose stratum-weighted precision on the labels reaches `target`, with its Wilson
    interval, and the pairs it keeps (not rejected by a pre-filter, score at least the threshold) over `runs` (the
    runs the user selected; none selected: no count). Labels of items a campaign drew by score or confidence (top,
    around a threshold, uncertain) are left out of the estimate and counted.

    A score threshold is a point on one scale: with `scale` (a scoring configuration of the pair) only the labels of
    its runs are read and only its runs among `runs` are counted (the others are listed as `not_counted`); without
    it, the pair's newest run's configuration.

    `weak` is True when the interval's lower bound lies WEAK_LOWER_BOUND_GAP or more below the target."""
    if scale is None:
        scale = next(iter(pair_scales(src, tgt)), None)
    scale_ids = [r.pk for r in scale.runs] if scale is not None else []
    data = threshold_labels(src_lang=src, tgt_lang=tgt, run_ids=scale_ids)
    runs = list(runs or [])
    counted = [r for r in runs if r.pk in set(scale_ids)]
    out: dict[str, Any] = {
        "target": target,
        "choice": None,
        "n_labels": int(len(data.labels)),
        "n_left_out": data.n_left_out,
        "n_kept": None,
        "kept_runs": counted,
        "not_counted": [r for r in runs if r.pk not in set(scale_ids)],
        "scale": scale,
        "weak": False,
    }
    if not len(data.labels):
        return out
    choice = choose_threshold(data.scores, data.labels, target, weights=data.weights)
    out["choice"] = choice
    if choice is None:
        return out
    out["weak"] = bool(choice.estimate.low < target - WEAK_LOWER_BOUND_GAP)
    if counted:
        out["n_kept"] = SentencePairCandidate.objects.filter(
            run__in=counted, score__gte=choice.threshold, filter_reason=""
        ).count()
    return out


def model_cautions(artefact: Artefact | None) -> list[str]:
    """Why a calibration model's probabilities should not be trusted as they are (empty when nothing stands out):
    too few labels, too few of one verdict, or a near-constant P(good) over the pair's candidates (those it was
    applied to; else the cross-validated bins of the labelled pairs)."""
    if artefact is None:
        return []
    cautions = []
    metrics = artefact.metrics or {}
    n, good = int(metrics.get("labels", 0)), int(metrics.get("good", 0))
    minority = min(good, n - good)
    if n < MIN_MODEL_LABELS or minority < MIN_MINORITY_LABELS:
        cautions.append(
            f"Trained on only {n} label{'' if n == 1 else 's'} ({good} GOOD, {n - good} BAD): with fewer than "
            f"{MIN_MODEL_LABELS} labels, or fewer than {MIN_MINORITY_LABELS} of either verdict, its probabilities "
            "are a rough guide. Review more pairs (a stratified campaign) and train again."
        )
    spread = SentencePairCandidate.objects.filter(calibration=artefact).aggregate(
        lo=Min("confidence"), hi=Max("confidence"), n=Count("pk")
    )
    if spread["n"]:
        lo, hi, where = spread["lo"], spread["hi"], f"the {spread['n']} candidates it was applied to"
    else:
        method = (artefact.params or {}).get("method", "head")
        report = metrics.get("cross_validated", {}).get(method) or {}
        conf = (report.get("reliability") or {}).get("confidence") or []
        lo, hi = (min(conf), max(conf)) if conf else (None, None)
        where = "the labelled pairs (cross-validated)"
    if lo is not None and hi - lo < NEAR_CONSTANT_RANGE:
        cautions.append(
            f"Nearly constant: P(good) lies between {lo:.4f} and {hi:.4f} over {where}, so it hardly tells pairs "
            "apart; it is about the overall GOOD rate, not a per-pair probability."
        )
    return cautions


def fine_tune_options(src: str, tgt: str) -> dict[str, Any]:
    """The DAN encoders of the pair that can be fine-tuned, corpora with gold pairs to evaluate on, and the
    fine-tuned encoders so far with their before/after figures and gate decision."""
    dans = Artefact.objects.filter(kind=ArtefactKind.ENCODER, name="dan", src_lang=src, tgt_lang=tgt)
    return {
        "dan_encoders": dans.filter(is_active=True).exclude(path="").order_by("-version"),
        "eval_corpora": Corpus.objects.filter(
            Exists(GoldSentencePair.objects.filter(corpus=OuterRef("pk"))), languages__contains=[src, tgt]
        ).order_by("name"),
        "fine_tuned": [a for a in dans.order_by("-version")[:20] if "fine_tune" in a.metrics],
    }


def pair_overview() -> list[dict[str, Any]]:
    """Every language pair with a sentence, alignment or calibration run or a stored setting: its runs, its latest
    calibration model, the stored threshold and the labels reviewers gave its pairs. A fixed number of queries."""
    kinds = (RunKind.SENTENCE, RunKind.ALIGN, RunKind.CALIBRATE, RunKind.APPLY_CALIBRATION)
    pairs: dict[tuple[str, str], dict[str, Any]] = {}

    def row(src: str, tgt: str) -> dict[str, Any]:
        return pairs.setdefault(
            (src, tgt),
            {"src": src, "tgt": tgt, "runs": 0, "succeeded": 0, "calibration": None, "settings": [], "labels": 0},
        )

    for src, tgt, status, n in (
        MiningRun.objects.filter(kind__in=kinds)
        .exclude(src_lang="")
        .exclude(tgt_lang="")
        .order_by()
        .values_list("src_lang", "tgt_lang", "status")
        .annotate(n=Count("pk"))
    ):
        r = row(src, tgt)
        r["runs"] += n
        if status == JobStatus.SUCCEEDED:
            r["succeeded"] += n
    for setting in LanguagePairSetting.objects.select_related("calibration").order_by("scale_key"):
        row(setting.src_lang, setting.tgt_lang)["settings"].append(setting)
    for artefact in Artefact.objects.filter(kind=ArtefactKind.CALIBRATION).order_by("version"):
        key = (artefact.src_lang, artefact.tgt_lang)
        if key in pairs and artefact.name == f"calibration-{key[0]}-{key[1]}":
            pairs[key]["calibration"] = artefact  # the newest version wins
    for src, tgt, n in (
        Label.objects.exclude(sentence_pair=None)
        .order_by()
        .values_list("sentence_pair__run__src_lang", "sentence_pair__run__tgt_lang")
        .annotate(n=Count("pk"))
    ):
        if (src, tgt) in pairs:
            pairs[(src, tgt)]["labels"] += n
    return [pairs[k] for k in sorted(pairs)]
