"""Training a document model (HiDE or Document BoW) on a corpus's gold document pairs: the TRAIN_DOC_MODEL run.

The numeric work is in mining.core (docmatch, docembed); this module loads the sides, calls it and saves the model as
the next version of its artefact. Matching with a trained model is mining.services.document_runs'.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
from django.conf import settings

from ..core.docembed import DocumentBow, Documents, document_bow_config, train_document_bow
from ..core.docmatch import HideConfig, HideModel, HideValidation, train_hide
from ..core.encoders.dan import DanConfig
from ..models import ArtefactKind, MiningRun
from ..params import TrainDocModelParams
from .document_runs import DocSide, doc_side, embed_doc_side, gold_doc_pairs
from .encoders import encoder_default
from .progress import ProgressReporter
from .runs import run_record_timing
from .training_runs import artefact_create

DOC_MODELS = ("hide", "bow")  # TRAIN_DOC_MODEL's params.model; also the artefact names


def check_doc_model_params(model: str, params: dict) -> None:
    """Raise ValueError for a TRAIN_DOC_MODEL parameter that `model`'s training would not read."""
    config = HideConfig if model == "hide" else DanConfig
    extra = {"seed", "model", "validation"} if model == "hide" else {"seed", "model"}
    unknown = set(params) - {f.name for f in dataclasses.fields(config)} - extra
    if unknown:
        raise ValueError(f"unknown {model} training parameters: {', '.join(sorted(unknown))}")


# HiDE holds out this share of the gold document pairs (params.validation) and keeps the epoch that retrieves best on
# them (epoch 0: untrained, which with skip towers is Sentence-Avg), when there are at least this many pairs (or the
# run asks for a share).
HIDE_VALIDATION_SHARE = 0.1
HIDE_VALIDATION_MIN_PAIRS = 20


def execute_train_doc_model(run: MiningRun, reporter: ProgressReporter) -> dict:
    """Train a document model (params.model: "hide", the default, or "bow") on the corpus's gold document pairs
    between run.src_lang and run.tgt_lang; store it as the next version of that document-model artefact."""
    name = TrainDocModelParams.from_stored(run.params).model.value
    if name == "hide" and run.encoder is None:
        MiningRun.objects.filter(pk=run.pk).update(encoder=encoder_default())
        run.refresh_from_db()
    src, tgt = doc_side(run.src_corpus, run.src_lang), doc_side(run.src_corpus, run.tgt_lang)
    s_index = {int(d): i for i, d in enumerate(src.doc_ids)}
    t_index = {int(d): i for i, d in enumerate(tgt.doc_ids)}
    gold = [
        (s_index[s], t_index[t])
        for s, t in gold_doc_pairs(run.src_corpus, run.src_lang, run.tgt_lang)
        if s in s_index and t in t_index
    ]
    if len(gold) < 2:
        raise ValueError(
            f"corpus '{run.src_corpus}' has {len(gold)} gold {run.src_lang}-{run.tgt_lang} document "
            f"pairs with sentences; {'HiDE' if name == 'hide' else 'Document BoW'} needs at least 2"
        )
    train = _train_bow if name == "bow" else _train_hide
    model, params = train(run, src, tgt, gold, reporter)
    folder = Path(settings.PCAPP_DATA_DIR) / "models" / "documents" / f"run-{run.pk}"
    folder.mkdir(parents=True, exist_ok=True)
    model.save(folder / f"{name}.pt")
    n_val = params.get("validation_pairs", 0)  # HiDE only
    metrics = {"train_pairs": len(gold) - n_val}
    if n_val:
        metrics.update(
            validation_pairs=n_val,
            validation_p_at_1=model.history,
            validation_margin=model.margins,
            best_epoch=model.best_epoch,
        )
    artefact = artefact_create(
        kind=ArtefactKind.DOC_MODEL, name=name, path=folder / f"{name}.pt", run=run, params=params, metrics=metrics
    )
    return {"artefact_id": artefact.pk, "version": artefact.version, **metrics}


def _train_hide(
    run: MiningRun, src: DocSide, tgt: DocSide, gold: list[tuple[int, int]], reporter: ProgressReporter
) -> tuple[HideModel, dict]:
    """HiDE over the run encoder's sentence embeddings of the gold pairs' documents; (model, artefact params)."""
    reporter.update(stage="embed", force=True)
    s_emb = embed_doc_side(run, run.src_corpus, run.src_lang, src, reporter)
    t_emb = embed_doc_side(run, run.src_corpus, run.tgt_lang, tgt, reporter)
    p = TrainDocModelParams.from_stored(run.params)
    seed = p.seed
    share = HIDE_VALIDATION_SHARE if p.validation is None else p.validation
    asked = p.validation is not None  # an explicit share applies at any size
    n_val = int(round(share * len(gold))) if asked or len(gold) >= HIDE_VALIDATION_MIN_PAIRS else 0
    if n_val < 2 or len(gold) - n_val < 2:  # P@1 over one document, or training on one pair, means nothing
        n_val = 0
    order = np.random.default_rng([seed, 11]).permutation(len(gold))
    held, kept = [gold[i] for i in order[:n_val]], [gold[i] for i in order[n_val:]]
    s_rows, s_off = select_docs(s_emb, src.offsets, [g[0] for g in kept])
    t_rows, t_off = select_docs(t_emb, tgt.offsets, [g[1] for g in kept])
    validation = None
    if n_val:
        vs, vs_off = select_docs(s_emb, src.offsets, [g[0] for g in held])
        vt, vt_off = select_docs(t_emb, tgt.offsets, [g[1] for g in held])
        validation = HideValidation(vs, vs_off, vt, vt_off)
    cfg = HideConfig(**{k: (tuple(v) if k == "hidden" else v) for k, v in p.settings.items()})
    reporter.update(stage="train", done=0, force=True)
    t0 = time.perf_counter()
    model = train_hide(
        s_rows, s_off, t_rows, t_off, config=cfg, seed=seed, progress=reporter.progress, validation=validation
    )
    run_record_timing(run=run, stage="train", seconds=time.perf_counter() - t0)
    return model, {**run.params, "encoder": run.encoder.pk, "validation_pairs": n_val}


def _train_bow(
    run: MiningRun, src: DocSide, tgt: DocSide, gold: list[tuple[int, int]], reporter: ProgressReporter
) -> tuple[DocumentBow, dict]:
    """Document BoW on the gold pairs' whole texts (no sentence encoder); (model, artefact params).

    DanConfig fields in run.params override `document_bow_config()`'s."""
    s_texts = Documents(src.offsets, src.texts).texts()
    t_texts = Documents(tgt.offsets, tgt.texts).texts()
    p = TrainDocModelParams.from_stored(run.params)
    cfg = document_bow_config(**p.settings)
    reporter.update(stage="train", done=0, force=True)
    t0 = time.perf_counter()
    model = train_document_bow(
        [s_texts[i] for i, _ in gold],
        [t_texts[j] for _, j in gold],
        run.src_lang,
        run.tgt_lang,
        cfg,
        p.seed,
        progress=reporter.progress,
        threads=settings.PCAPP_COMPUTE_THREADS,
    )
    run_record_timing(run=run, stage="train", seconds=time.perf_counter() - t0)
    return model, {**cfg.to_dict(), **run.params, "model": "bow"}


def select_docs(emb: np.ndarray, offsets: np.ndarray, docs: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The rows of some documents' sentences and their new offsets (documents in the order given)."""
    lengths = np.array([offsets[d + 1] - offsets[d] for d in docs], dtype=np.int64)
    rows = np.concatenate([np.arange(offsets[d], offsets[d + 1]) for d in docs])
    return emb[rows], np.concatenate([[0], np.cumsum(lengths)])
