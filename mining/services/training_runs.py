"""Training runs: a sentence encoder on a corpus's gold pairs, stored as a versioned encoder artefact.

`params.model` picks what is trained: "dan" (default; the app's own DAN dual encoder) or "adapter" (the pretrained
encoder `params.base`, the built-in one by default, plus a trained tower per language: `mining.core.encoders.adapter`).
The parameters are `mining.params.TrainEncoderParams`.
`params.background` names a second corpus whose gold pairs are trained on too (general text beside the run's own
domain); `params.domain_weight` repeats the run's own corpus's pairs that many times per epoch, and the adapter's
held-out pairs come from them.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import Max

from ..core.encoders.configs import AdapterConfig, DanConfig
from ..models import Artefact, ArtefactKind, Corpus, MiningRun
from ..params import EncoderModel, TrainEncoderParams
from .evaluation import gold_pairs_of
from .progress import ProgressReporter
from .runs import run_record_timing

DAN_PARAM_NAMES = {f.name for f in dataclasses.fields(DanConfig)} - {"hidden"}
ADAPTER_PARAM_NAMES = {f.name for f in dataclasses.fields(AdapterConfig)} - {"hidden"}
ENCODER_MODELS = ("dan", "adapter")
_COMMON = {"seed", "max_pairs", "model", "background"}


def _check_names(params: dict, allowed: set[str]) -> None:
    unknown = set(params) - allowed - _COMMON
    if unknown:
        raise ValueError(f"unknown training parameters: {', '.join(sorted(unknown))}")


def dan_config_from(params: dict) -> DanConfig:
    """A DanConfig from a run's parameters (unknown names are rejected, so typos do not pass silently)."""
    _check_names(params, DAN_PARAM_NAMES | {"hard_negative_stage"})
    return DanConfig(**{k: v for k, v in params.items() if k in DAN_PARAM_NAMES})


def adapter_config_from(params: dict) -> AdapterConfig:
    """An AdapterConfig from a run's parameters (unknown names are rejected)."""
    _check_names(params, ADAPTER_PARAM_NAMES | {"base"})
    return AdapterConfig(**{k: v for k, v in params.items() if k in ADAPTER_PARAM_NAMES})


def training_pairs(run: MiningRun, params: TrainEncoderParams) -> tuple[list[tuple[str, str]], np.ndarray]:
    """The run corpus's gold pairs (at most `max_pairs`), then the background corpus's; and which are the run's."""
    pairs = gold_pairs_of(run.src_corpus, run.src_lang, run.tgt_lang)
    if params.max_pairs:
        pairs = pairs[: params.max_pairs]
    n_own = len(pairs)
    if params.background:
        background = Corpus.objects.filter(name=params.background).first()
        if background is None:
            raise ValueError(f"no corpus named '{params.background}' (params.background)")
        if background.pk == run.src_corpus_id:
            raise ValueError("params.background must be another corpus than the one trained on")
        pairs += gold_pairs_of(background, run.src_lang, run.tgt_lang)
    return pairs, np.arange(len(pairs)) < n_own


def training_config_from(params: dict) -> DanConfig | AdapterConfig:
    """The config of the model `params.model` names (checked, so a bad run fails before it is queued)."""
    model = params.get("model", "dan")
    if model not in ENCODER_MODELS:
        raise ValueError(f"unknown encoder model {model!r}; choose one of {', '.join(ENCODER_MODELS)}")
    return adapter_config_from(params) if model == "adapter" else dan_config_from(params)


@transaction.atomic
def artefact_create(*, kind: str, name: str, path: Path, run: MiningRun, params: dict, metrics: dict) -> Artefact:
    """Register a trained model file as the next version of (kind, name)."""
    version = (
        Artefact.objects.select_for_update().filter(kind=kind, name=name).aggregate(v=Max("version"))["v"] or 0
    ) + 1
    rel = path.relative_to(settings.PCAPP_DATA_DIR) if path.is_relative_to(settings.PCAPP_DATA_DIR) else path
    return Artefact.objects.create(
        kind=kind,
        name=name,
        version=version,
        path=str(rel),
        src_lang=run.src_lang,
        tgt_lang=run.tgt_lang,
        params=params,
        metrics=metrics,
        trained_on=run.src_corpus,
        created_by=run.created_by,
    )


def execute_train_encoder(run: MiningRun, reporter: ProgressReporter) -> dict:
    """Train a sentence encoder on the source corpus's gold pairs: the DAN (in-batch, then hard negatives) or an
    adapter over a pretrained encoder."""
    typed = TrainEncoderParams.from_stored(run.params)
    params = typed.to_dict()
    config = AdapterConfig(**typed.settings) if typed.model == EncoderModel.ADAPTER else DanConfig(**typed.settings)
    reporter.update(stage="load", force=True)
    pairs, domain = training_pairs(run, typed)
    minimum = 4 if isinstance(config, AdapterConfig) else 2
    if len(pairs) < minimum:
        raise ValueError(
            f"corpus '{run.src_corpus}' has {len(pairs)} gold {run.src_lang}-{run.tgt_lang} pairs; "
            f"training needs at least {minimum}"
        )
    folder = Path(settings.PCAPP_DATA_DIR) / "models" / "encoders" / f"run-{run.pk}"
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(config, AdapterConfig):
        return _train_adapter(run, reporter, config, typed, pairs, domain, folder)
    from ..core.encoders.dan_train import train_dan  # torch loads where the training runs

    reporter.update(stage="train", done=0, force=True)
    t0 = time.perf_counter()
    encoder = train_dan(
        [s for s, _ in pairs],
        [t for _, t in pairs],
        src_lang=run.src_lang,
        tgt_lang=run.tgt_lang,
        config=config,
        seed=typed.seed,
        checkpoint_path=folder / "checkpoint.pt",
        progress=reporter.progress,
        hard_negatives=typed.hard_negative_stage,
        domain=domain,
    )
    run_record_timing(run=run, stage="train", seconds=time.perf_counter() - t0)
    final = folder / "model.pt"
    encoder.save(final)
    artefact = artefact_create(
        kind=ArtefactKind.ENCODER,
        name="dan",
        path=final,
        run=run,
        params={**config.to_dict(), **params},
        metrics={"train_pairs": len(pairs), "domain_pairs": int(domain.sum())},
    )
    return {"artefact_id": artefact.pk, "version": artefact.version, "train_pairs": len(pairs)}


def _train_adapter(
    run: MiningRun,
    reporter: ProgressReporter,
    config: AdapterConfig,
    typed: TrainEncoderParams,
    pairs: list[tuple[str, str]],
    domain: np.ndarray,
    folder: Path,
) -> dict:
    """Embed the pairs with the base encoder, train the adapter on them, register it as an 'adapted' encoder."""
    from ..core.encoders.adapter import AdaptedEncoder, train_adapter
    from ..core.encoders.registry import get_encoder

    base = get_encoder(typed.base, threads=settings.PCAPP_COMPUTE_THREADS)
    src_texts, tgt_texts = [s for s, _ in pairs], [t for _, t in pairs]
    reporter.update(stage="embed", done=0, total=2 * len(pairs), force=True)
    t0 = time.perf_counter()
    src = base.encode(src_texts, run.src_lang, progress=reporter.progress)
    tgt = base.encode(
        tgt_texts, run.tgt_lang, progress=lambda done, total: reporter.progress(len(pairs) + done, 2 * len(pairs))
    )
    run_record_timing(run=run, stage="embed", seconds=time.perf_counter() - t0)
    reporter.update(stage="train", done=0, force=True)
    t0 = time.perf_counter()
    model = train_adapter(
        src,
        tgt,
        src_texts=src_texts,
        tgt_texts=tgt_texts,
        config=config,
        domain=domain,
        seed=typed.seed,
        progress=reporter.progress,
    )
    run_record_timing(run=run, stage="train", seconds=time.perf_counter() - t0)
    final = folder / "model.pt"
    AdaptedEncoder(base, model, run.src_lang, run.tgt_lang).save(final)
    metrics = {
        "train_pairs": len(pairs),
        "domain_pairs": int(domain.sum()),
        "validation_p_at_1": model.history,
        "best_epoch": model.best_epoch,
    }
    artefact = artefact_create(
        kind=ArtefactKind.ENCODER,
        name="adapted",
        path=final,
        run=run,
        params={**dataclasses.asdict(config), **typed.to_dict(), "base": base.name},
        metrics=metrics,
    )
    return {"artefact_id": artefact.pk, "version": artefact.version, **metrics}
