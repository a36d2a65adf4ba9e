"""What a run's kept set is: its threshold, where the threshold comes from, and the precision stated for it with an
interval, or why none is stated. The run page, the API's run detail and every export carry this one statement.

The threshold is read through ``run_threshold_info`` here and nowhere else in this module (``_threshold``).
"""

from __future__ import annotations

import json
from typing import Any

from django.db.models import Count

from ..models import Artefact, Corpus, LanguagePairSetting, MiningRun, RunKind, Sentence
from .labels import label_model
from .settled import settled_statement
from .thresholds import run_threshold_info, scale_key

PRECISION_KEY = "precision_estimate"  # services.precision.STATS_KEY (selectors do not import services)
# Decoys made from the target side itself (the fallback) give a figure too rough to state: left out one collection
# at a time on the bench, it fell within 5 points of the measured precision in 2 of 30 cases and its interval
# covered it in 20 (docs/BENCHMARKS.md, "Precision a user can trust"). The record keeps it; the statement does not.
RESCORE_KEY = "rescore"  # services.rescore.STATS_KEY
# A run re-scored by the evidence scorer (`rescore` evidence) ranks by log-odds; the decoy estimate's constants were
# chosen on margin scores and, measured through the app's path (bench/rescore_precision.py), fell within 5 points in
# 11 of 15 bench cases and covered the measured precision in 12: too few to state. The record keeps it.
RESCORED_REASON = (
    "a run re-scored by the evidence scorer ranks its pairs by the scorer's log-odds, and the decoy estimate, tuned "
    "on margin scores, is not yet accurate enough there to state (within 5 points in 11 of 15 bench cases); check "
    "the kept set with labels"
)
FALLBACK_REASON = (
    "no other corpus holds {lang} sentences to draw decoys from (text in that language that translates nothing of "
    "the source side); import one and estimate again (`manage.py estimate_precision`), or check the kept set with "
    "labels. Decoys made from the target side itself are too rough to state a figure"
)


def _threshold(run: MiningRun) -> tuple[float | None, str, dict]:
    info = run_threshold_info(run)
    return info.value, info.source, info.detail


def _calibration_labels(run: MiningRun) -> int | None:
    """Labels behind the calibration stored for the run's language pair on its scale (scoring configuration)."""
    setting = LanguagePairSetting.objects.filter(
        src_lang=run.src_lang, tgt_lang=run.tgt_lang, scale_key=scale_key(run)
    ).first()
    if setting is None or setting.calibration_id is None:
        return None
    metrics = Artefact.objects.filter(pk=setting.calibration_id).values_list("metrics", flat=True).first() or {}
    return int(metrics["labels"]) if "labels" in metrics else None


def decoy_corpus_for(run: MiningRun) -> Corpus | None:
    """The corpus whose sentences in the run's target language give the run's decoys: of the corpora that are neither
    side of the run (nor being deleted) and list that language, the one with the most sentences in it (the lowest id
    on a tie); None when no other corpus holds a sentence in that language (the estimate then falls back to decoys
    made without extra data). Three queries."""
    others = (
        Corpus.objects.filter(languages__contains=[run.tgt_lang], deleting=False)
        .exclude(pk__in=[pk for pk in (run.src_corpus_id, run.tgt_corpus_id) if pk is not None])
        .values_list("pk", flat=True)
    )
    best = (
        Sentence.objects.filter(corpus_id__in=list(others), lang=run.tgt_lang)
        .values("corpus_id")
        .annotate(n=Count("id"))
        .order_by("-n", "corpus_id")
        .first()
    )
    return None if best is None else Corpus.objects.get(pk=best["corpus_id"])


def _fallback(est: dict) -> bool:
    """Whether an estimate came from the fallback decoys (shuffled target sentences): by its `decoy_source`, or for an
    estimate stored before that was recorded, by its decoys' description."""
    source = est.get("decoy_source")
    return source == "fallback" or (source is None and "words shuffled" in (est.get("decoys") or ""))


def _same(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(a - b) <= 1e-6 * max(1.0, abs(a))


def threshold_statement(run: MiningRun, *, threshold: float | None = None) -> dict[str, Any]:
    """The statement of a run's kept set (JSON-ready).

    Args:
        run: the run.
        threshold: a threshold the caller keeps at instead of the run's (an export's own); None: the run's.

    Returns:
        ``{"threshold", "source", "source_label", "n_labels", "precision", "low", "high", "confidence",
        "precision_method", "decoys", "decoy_source", "systematic", "reason", "checked"}``: `decoy_source` is
        "given", "picked" (the other corpus of the target language with the most sentences) or "fallback" (None for an
        estimate stored before it was recorded); `systematic` is the interval's share of the estimated wrong pairs
        added for the decoys' bias; `source` is "default" (label-free estimate), "calibrated"
        (calibrated on `n_labels` labels), "run" (chosen by hand for the run), "export" (chosen by hand for this
        export) or "none"; `precision`/`low`/`high` are the label-free figure, None when `reason` says why no figure
        is stated (the fallback decoys' figure is not stated); `checked` is the figure settled by reviewers' labels of
        randomly drawn kept pairs (``settled.settled_statement``: its `precision`, `low`, `high`, `n_labels`,
        `source_label` "checked with N labels", ...), with the stated label-free figure as its prior, None when no
        such label exists.
    """
    value, source, detail = _threshold(run)
    n_labels = _calibration_labels(run) if source == "calibrated" else None
    if threshold is not None and not _same(threshold, value):
        value, source = float(threshold), "export"
    labels = {
        "default": "label-free estimate",
        "calibrated": f"calibrated on {n_labels} labels" if n_labels is not None else "calibrated on labels",
        "run": "chosen by hand",
        "export": "chosen by hand for this export",
        "none": "no threshold: every candidate is kept",
    }
    out: dict[str, Any] = {
        "threshold": value,
        "source": source,
        "source_label": labels[source],
        "n_labels": n_labels,
        "precision": None,
        "low": None,
        "high": None,
        "confidence": None,
        "precision_method": None,
        "decoys": None,
        "decoy_source": None,
        "systematic": None,
        "reason": "",
        "checked": None,
    }
    est = (run.stats or {}).get(PRECISION_KEY)
    if run.kind != RunKind.SENTENCE:
        out["reason"] = "no precision is estimated for this kind of run"
    elif value is None:
        out["reason"] = "no threshold: every candidate is kept, and no precision is stated for that"
    elif not est:
        out["reason"] = "not estimated yet (the estimate runs after the run; `manage.py estimate_precision`)"
    elif not _same(est.get("threshold"), value):
        out["reason"] = (
            f"the estimate was made at threshold {est.get('threshold')}, not at this one; estimate again "
            "(`manage.py estimate_precision`)"
        )
    elif est.get("precision") is None:
        out["reason"] = est.get("reason") or "no estimate"
    elif ((run.stats or {}).get(RESCORE_KEY) or {}).get("applied"):
        out["reason"] = RESCORED_REASON
        out.update(decoys=est.get("decoys"), decoy_source=est.get("decoy_source"))
    elif _fallback(est):
        out["reason"] = FALLBACK_REASON.format(lang=run.tgt_lang)
        out.update(decoys=est.get("decoys"), decoy_source="fallback")
    else:
        out.update(
            precision=est["precision"],
            low=est["low"],
            high=est["high"],
            confidence=est.get("confidence"),
            precision_method=est.get("method"),
            decoys=est.get("decoys"),
            decoy_source=est.get("decoy_source"),
            systematic=est.get("systematic"),
        )
    if run.kind == RunKind.SENTENCE and value is not None:
        out["checked"] = settled_statement(run, threshold=value, estimate=est if out["precision"] is not None else None)
    if source == "calibrated" and detail.get("target_precision") is not None:
        out["target_precision"] = detail["target_precision"]
    return out


def run_label_count(run: MiningRun) -> int:
    """How many review labels the run's sentence pairs have (0 when the annotation app is absent)."""
    label = label_model()
    return 0 if label is None else label.objects.filter(sentence_pair__run=run).count()


def statement_line(statement: dict[str, Any]) -> str:
    """The statement in one ASCII line (an HTTP header, a comment line)."""
    t = statement["threshold"]
    parts = [f"threshold={'none' if t is None else f'{t:.6f}'}", f"source={statement['source']}"]
    if statement.get("n_labels") is not None:
        parts.append(f"labels={statement['n_labels']}")
    if statement["precision"] is not None:
        parts.append(
            f"precision={statement['precision']:.4f}; interval={statement['low']:.4f}-{statement['high']:.4f}; "
            f"confidence={statement['confidence']}; method={statement['precision_method']}"
        )
    else:
        parts.append("precision=none; reason=" + statement["reason"].encode("ascii", "replace").decode())
    checked = statement.get("checked")
    if checked:
        parts.append(
            f"checked={checked['precision']:.4f}; checked_interval={checked['low']:.4f}-{checked['high']:.4f}; "
            f"checked_labels={checked['n_labels']}; checked_method={checked['method']}"
        )
    return "; ".join(parts)


def statement_json(statement: dict[str, Any]) -> str:
    """The statement as compact JSON (a metadata file or property)."""
    return json.dumps(statement, ensure_ascii=False, sort_keys=True)
