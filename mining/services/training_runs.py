"""Training runs: a DAN sentence encoder on a corpus's gold pairs, stored as a versioned encoder artefact."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from ..core.encoders.dan import DanConfig
from ..core.encoders.dan_train import train_dan
from ..models import Artefact, ArtefactKind, MiningRun, RunKind
from .evaluation import gold_pairs_of
from .progress import ProgressReporter
from .runs import register_run_handler, run_record_timing

DAN_PARAM_NAMES = {f.name for f in dataclasses.fields(DanConfig)} - {"hidden"}


def dan_config_from(params: dict) -> DanConfig:
    """A DanConfig from a run's parameters (unknown names are rejected, so typos do not pass silently)."""
    unknown = set(params) - DAN_PARAM_NAMES - {"seed", "hard_negative_stage", "max_pairs"}
    if unknown:
        raise ValueError(f"unknown training parameters: {', '.join(sorted(unknown))}")
    return DanConfig(**{k: v for k, v in params.items() if k in DAN_PARAM_NAMES})


@transaction.atomic
def artefact_create(*, kind: str, name: str, path: Path, run: MiningRun, params: dict, metrics: dict) -> Artefact:
    """Register a trained model file as the next version of (kind, name)."""
    version = (Artefact.objects.select_for_update().filter(kind=kind, name=name)
               .aggregate(v=Max("version"))["v"] or 0) + 1
    rel = path.relative_to(settings.PCAPP_DATA_DIR) if path.is_relative_to(settings.PCAPP_DATA_DIR) else path
    return Artefact.objects.create(
        kind=kind, name=name, version=version, path=str(rel), src_lang=run.src_lang,
        tgt_lang=run.tgt_lang, params=params, metrics=metrics, trained_on=run.src_corpus, created_by=run.created_by,
    )


@register_run_handler(RunKind.TRAIN_ENCODER)
def execute_train_encoder(run: MiningRun, reporter: ProgressReporter) -> dict:
    """Train a DAN dual encoder (in-batch, then hard negatives) on the source corpus's gold pairs."""
    params = dict(run.params)
    config = dan_config_from(params)
    reporter.update(stage="load", force=True)
    pairs = gold_pairs_of(run.src_corpus, run.src_lang, run.tgt_lang)
    if params.get("max_pairs"):
        pairs = pairs[: int(params["max_pairs"])]
    if len(pairs) < 2:
        raise ValueError(f"corpus '{run.src_corpus}' has {len(pairs)} gold {run.src_lang}-{run.tgt_lang} pairs; "
                         "training needs at least 2")
    folder = Path(settings.PCAPP_DATA_DIR) / "models" / "encoders" / f"run-{run.pk}"
    folder.mkdir(parents=True, exist_ok=True)
    reporter.update(stage="train", done=0, force=True)
    t0 = time.perf_counter()
    encoder = train_dan(
        [s for s, _ in pairs], [t for _, t in pairs], src_lang=run.src_lang, tgt_lang=run.tgt_lang,
        config=config, seed=int(params.get("seed", 0)), checkpoint_path=folder / "checkpoint.pt",
        progress=reporter.progress, hard_negatives=bool(params.get("hard_negative_stage", True)),
    )
    run_record_timing(run=run, stage="train", seconds=time.perf_counter() - t0)
    final = folder / "model.pt"
    encoder.save(final)
    artefact = artefact_create(kind=ArtefactKind.ENCODER, name="dan", path=final, run=run,
                               params={**config.to_dict(), **params}, metrics={"train_pairs": len(pairs)})
    return {"artefact_id": artefact.pk, "version": artefact.version, "train_pairs": len(pairs)}
