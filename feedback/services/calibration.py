"""The feedback loop: reviewers' labels train a calibration model per language pair (versioned), and give the
labels behind a language pair's threshold estimate.

The numeric work is in mining.core.calibration; this module gathers labels and embeddings, calls it, and saves.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings

from annotation.models import ESTIMATE_SAMPLERS, Verdict
from annotation.selectors import estimable_labels
from mining.core.calibration.crossval import compare_calibrators
from mining.core.calibration.estimates import stratum_weights
from mining.models import Artefact, ArtefactKind, MiningRun, RunKind
from mining.params import CalibrateParams, SentenceRunParams
from mining.services.calibrators import DEFAULT_PHI, calibration_methods, save_calibrator
from mining.services.embeddings import embed_side, side_sentences
from mining.services.encoders import load_encoder
from mining.services.runs import run_record_timing
from mining.services.training_runs import artefact_create


@dataclass(frozen=True)
class LabelledPairs:
    """Labelled candidates of one language pair: source embeddings, scores, GOOD labels and sampling weights."""

    candidate_ids: np.ndarray
    u: np.ndarray
    phi: np.ndarray
    labels: np.ndarray
    weights: np.ndarray
    encoder: Artefact | None
    run_ids: np.ndarray


@dataclass(frozen=True)
class ThresholdLabels:
    """Labels that may estimate precision at a threshold: scores, GOOD labels, stratum weights, and how many labels
    were left out for coming from a sampler that picks by score or confidence (top, around a threshold, uncertain)."""

    scores: np.ndarray
    labels: np.ndarray
    weights: np.ndarray
    n_left_out: int


def _source_embeddings(run: MiningRun, src_ids: list[int]) -> np.ndarray:
    """Embeddings of some source sentences of a run (from the run's cached shards; computed if missing)."""
    side = side_sentences(run.src_corpus, run.src_lang)
    emb = embed_side(
        corpus=run.src_corpus,
        lang=run.src_lang,
        encoder_artefact=run.encoder,
        encode=load_encoder(run.encoder).encode,
        ids=side.ids,
        texts=side.texts,
    )
    row = {int(s): i for i, s in enumerate(side.ids)}
    return emb[[row[s] for s in src_ids]]


def _stratum_weights(keys: list[tuple]) -> np.ndarray:
    """Per label, from (campaign, run, stratum, stratum size): the stratum's size over the labels drawn from it (the
    core's `stratum_weights`, which the bench measures); 1 for labels on no sampled stratum (outside campaigns,
    controls, uncertain-sampler items)."""
    weights = np.ones(len(keys), dtype=np.float64)
    sampled = [i for i, k in enumerate(keys) if k[3]]
    if not sampled:
        return weights
    ids: dict[tuple, int] = {}
    strata = np.array([ids.setdefault(keys[i][:3], len(ids)) for i in sampled], dtype=np.int64)
    sizes = np.zeros(len(ids), dtype=np.float64)
    for i, stratum in zip(sampled, strata, strict=True):
        sizes[stratum] = keys[i][3]
    weights[sampled] = stratum_weights(strata, sizes)
    return weights


def _estimable(sampler: str | None) -> bool:
    """Labels outside campaigns (no sampler) count as before; campaign items only when probability-sampled."""
    return not sampler or sampler in ESTIMATE_SAMPLERS


def threshold_labels(*, src_lang: str, tgt_lang: str, run_ids: list[int] | None = None) -> ThresholdLabels:
    """The labels of a language pair's candidates for threshold and precision estimates, stratum-weighted; only those
    of `run_ids` when given (the runs of one scoring configuration: a threshold is a point on their scale). Items a
    campaign drew by score or confidence are left out: they would bias the estimate (the head still trains on them)."""
    qs = estimable_labels().filter(sentence_pair__run__src_lang=src_lang, sentence_pair__run__tgt_lang=tgt_lang)
    if run_ids is not None:
        qs = qs.filter(sentence_pair__run_id__in=run_ids)
    rows = list(
        qs.values_list(
            "sentence_pair__score",
            "verdict",
            "item__campaign_id",
            "item__run_id",
            "item__stratum",
            "item__stratum_size",
            "item__sampler",
        )
    )
    kept = [r for r in rows if _estimable(r[6])]
    return ThresholdLabels(
        np.array([r[0] for r in kept], dtype=np.float64),
        np.array([r[1] == Verdict.GOOD for r in kept], dtype=bool),
        _stratum_weights([r[2:6] for r in kept]),
        len(rows) - len(kept),
    )


MIN_CALIBRATION_LABELS = 20


def calibration_label_shortfall(*, src_lang: str, tgt_lang: str, campaign_id: int | None = None) -> str | None:
    """Why a calibration run on these labels would surely fail (fewer than MIN_CALIBRATION_LABELS, or one verdict
    only), counted cheaply before it is queued; None when it may run. The count is an upper bound of what the run
    trains on (it keeps the most used encoder's runs only), so a run this lets through can still stop with the
    same message."""
    qs = estimable_labels().filter(
        sentence_pair__isnull=False, sentence_pair__run__src_lang=src_lang, sentence_pair__run__tgt_lang=tgt_lang
    )
    if campaign_id is not None:
        qs = qs.filter(campaign_id=campaign_id)
    n = qs.count()
    n_good = qs.filter(verdict=Verdict.GOOD).count()
    if n < MIN_CALIBRATION_LABELS or n_good in (0, n):
        return (
            f"{n} labels ({n_good} GOOD) for {src_lang}-{tgt_lang}: calibration needs at least "
            f"{MIN_CALIBRATION_LABELS}, with both GOOD and BAD"
        )
    return None


def labelled_pairs(*, src_lang: str, tgt_lang: str, campaign_id: int | None = None) -> LabelledPairs:
    """Every label on a candidate of a src->tgt run (of one campaign, or all), for training a calibration model.

    Probability-sampled labels are weighted by stratum size over labels drawn from the stratum, scaled to mean 1;
    every other label (outside campaigns, or drawn by score or confidence, e.g. active sampling) weighs 1, as much as
    an average sampled label. Only runs of the most used encoder count, since the head reads the source embedding."""
    qs = estimable_labels().filter(
        sentence_pair__isnull=False, sentence_pair__run__src_lang=src_lang, sentence_pair__run__tgt_lang=tgt_lang
    )
    if campaign_id is not None:
        qs = qs.filter(campaign_id=campaign_id)
    rows = list(
        qs.values_list(
            "sentence_pair_id",
            "sentence_pair__src_id",
            "sentence_pair__run_id",
            "sentence_pair__score",
            "verdict",
            "item__campaign_id",
            "item__stratum",
            "item__stratum_size",
            "sentence_pair__run__encoder_id",
            "item__sampler",
        )
    )
    if not rows:
        return LabelledPairs(
            np.empty(0, np.int64),
            np.empty((0, 0), np.float32),
            np.empty(0),
            np.empty(0, bool),
            np.empty(0),
            None,
            np.empty(0, np.int64),
        )
    encoder_id = Counter(r[8] for r in rows).most_common(1)[0][0]
    rows = [r for r in rows if r[8] == encoder_id]
    sampled = np.array([bool(r[9]) and _estimable(r[9]) for r in rows])
    weights = np.ones(len(rows))
    if sampled.any():
        strata = _stratum_weights([(r[5], r[2], r[6], r[7]) for r, s in zip(rows, sampled, strict=True) if s])
        weights[sampled] = strata / strata.mean()
    by_run: dict[int, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        by_run[r[2]].append(i)
    u = None
    for run_id, idx in by_run.items():
        emb = _source_embeddings(
            MiningRun.objects.select_related("encoder", "src_corpus").get(pk=run_id), [rows[i][1] for i in idx]
        )
        if u is None:
            u = np.zeros((len(rows), emb.shape[1]), dtype=np.float32)
        u[idx] = emb
    return LabelledPairs(
        np.array([r[0] for r in rows], dtype=np.int64),
        u,
        np.array([r[3] for r in rows]),
        np.array([r[4] == Verdict.GOOD for r in rows]),
        weights / weights.mean(),
        Artefact.objects.filter(pk=encoder_id).first(),
        np.array([r[2] for r in rows], np.int64),
    )


def _phi_of(run_ids: np.ndarray) -> dict[str, Any]:
    """How the labelled pairs were scored (the margin and k of most labels' runs): the phi the model learns on."""
    runs = {
        pk: (kind, params)
        for pk, kind, params in MiningRun.objects.filter(pk__in={int(r) for r in run_ids}).values_list(
            "pk", "kind", "params"
        )
    }
    specs: Counter = Counter()
    for run_id, n in Counter(run_ids.tolist()).items():
        kind, params = runs[run_id]
        if kind == RunKind.ALIGN:  # the aligner's score is the cosine
            specs[("absolute", 1)] += n
        else:
            p = SentenceRunParams.from_dict({name: params.get(name) for name in ("margin", "k")})
            specs[(p.margin.value, p.k)] += n
    margin, k = specs.most_common(1)[0][0] if specs else (DEFAULT_PHI["margin"], DEFAULT_PHI["k"])
    return {"margin": margin, "k": k}


def _report(rep) -> dict[str, Any]:
    rb = rep.reliability
    return {
        "ece": round(rep.ece, 4),
        "brier": round(rep.brier, 4),
        "log_loss": round(rep.log_loss, 4),
        "reliability": {
            "confidence": [round(float(x), 4) for x in rb.mean_confidence],
            "frequency": [round(float(x), 4) for x in rb.frequency],
            "count": [int(x) for x in rb.count],
        },
    }


def execute_calibrate(run: MiningRun, reporter) -> dict:
    """Fit every calibration method on the labels of the pair (cross-validated report of each), keep the chosen
    one (params.method, default 'head'), and register it as the next calibration version of the pair."""
    p = CalibrateParams.from_stored(run.params)
    method = p.method.value
    reporter.update(stage="labels", force=True)
    data = labelled_pairs(src_lang=run.src_lang, tgt_lang=run.tgt_lang, campaign_id=p.campaign)
    if len(data.labels) < MIN_CALIBRATION_LABELS or data.labels.all() or not data.labels.any():
        raise ValueError(
            f"{len(data.labels)} labels ({int(data.labels.sum())} GOOD) for {run.src_lang}-"
            f"{run.tgt_lang}: calibration needs at least {MIN_CALIBRATION_LABELS}, with both GOOD and BAD"
        )
    reporter.update(stage="cross-validate", force=True)
    t0 = time.perf_counter()
    methods = calibration_methods()
    reports = compare_calibrators(methods, data.u, data.phi, data.labels, k=5, seed=p.seed, sample_weight=data.weights)
    model = methods[method]().fit(data.u, data.phi, data.labels, sample_weight=data.weights)
    run_record_timing(run=run, stage="fit", seconds=time.perf_counter() - t0)
    folder = Path(settings.PCAPP_DATA_DIR) / "models" / "calibration" / f"run-{run.pk}"
    folder.mkdir(parents=True, exist_ok=True)
    save_calibrator(model, method, folder / "calibration.pt")
    artefact = artefact_create(
        kind=ArtefactKind.CALIBRATION,
        name=f"calibration-{run.src_lang}-{run.tgt_lang}",
        path=folder / "calibration.pt",
        run=run,
        params={
            "method": method,
            "campaign": p.campaign,
            "encoder": data.encoder.pk if data.encoder else None,
            "phi": _phi_of(data.run_ids),
        },
        metrics={
            "labels": int(len(data.labels)),
            "good": int(data.labels.sum()),
            "cross_validated": {name: _report(r) for name, r in reports.items()},
        },
    )
    return {"artefact_id": artefact.pk, "version": artefact.version, "labels": int(len(data.labels))}
