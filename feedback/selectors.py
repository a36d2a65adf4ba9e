"""Reads of the calibration page: the latest model of a pair, the threshold for a target precision, and what can be
fine-tuned."""

from __future__ import annotations

from typing import Any

import numpy as np
from django.db.models import Exists, OuterRef

from mining.core.calibration.estimates import choose_threshold
from mining.models import (
    Artefact,
    ArtefactKind,
    Corpus,
    GoldSentencePair,
    LanguagePairSetting,
    MiningRun,
    RunKind,
    SentencePairCandidate,
)

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


def threshold_choice(src: str, tgt: str, target: float) -> dict[str, Any]:
    """The lowest score threshold whose stratum-weighted precision on the labels reaches `target`, with its Wilson
    interval and the number of candidates it keeps over every run of the pair. Labels of items a campaign drew by
    score or confidence (top, around a threshold, uncertain) are left out of the estimate and counted."""
    data = threshold_labels(src_lang=src, tgt_lang=tgt)
    if not len(data.labels):
        return {"target": target, "choice": None, "n_labels": 0, "n_left_out": data.n_left_out}
    all_scores = np.array(
        list(
            SentencePairCandidate.objects.filter(run__src_lang=src, run__tgt_lang=tgt, run__kind=RunKind.SENTENCE)
            .values_list("score", flat=True)
            .iterator(chunk_size=100_000)
        )
    )
    choice = choose_threshold(
        data.scores, data.labels, target, weights=data.weights, all_scores=all_scores if len(all_scores) else None
    )
    return {"target": target, "choice": choice, "n_labels": len(data.labels), "n_left_out": data.n_left_out}


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
