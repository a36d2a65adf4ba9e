"""Self-training runs: an adapter over a pretrained encoder, trained on the pairs its own mining of the run's corpus
is sure of (``mining.core.selftrain``), registered as the next version of the 'adapted' encoder.

No gold pair is trained on: the corpus's gold pairs, when it has any, only give the figures each round reports
(``report``: P@1 of the gold pairs' sources among every target sentence). The handler is
``execute_self_train_run(run, reporter)`` (kind ``RunKind.SELF_TRAIN``).

Run parameters (all optional): ``base`` (pretrained encoder, "usem3"), ``rounds`` (3), ``k`` (4), ``margin``
("ratio"), ``min_precision`` (0.95), ``filters`` (True: the pre-filters apply to the pairs trained on), ``seed`` (0),
the adapter's ``epochs``, ``lr``, ``batch_size``, ``hard_negatives``, ``margin_loss`` (its additive margin), and
``min_gain`` (0.005: the growth of the mutual-best pairs a round or the DAN must bring), ``dan`` (True: a subword
DAN trained on the best round's pairs, registered with the adapter as a 'combined' encoder when it is kept,
``dan_weight`` 0.3 its share). Mine the whole collection: every sentence of the corpora is a candidate, and
more text makes more confident pairs to train on.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
from django.conf import settings

from ..core.encoders.adapter import AdaptedEncoder, AdapterConfig
from ..core.knn import knn_exact
from ..core.metrics import precision_at_n
from ..core.selftrain import SELF_TRAIN_DAN, SelfTrainConfig, self_train
from ..models import ArtefactKind, MiningRun
from ..params import SelfTrainParams, SentenceRunParams
from .embeddings import Side, side_sentences
from .encoders import combine_encoders, encoder_default
from .evaluation import gold_pairs_of
from .progress import ProgressReporter
from .runs import run_record_timing
from .training_runs import artefact_create


def self_train_config_from(params: dict) -> SelfTrainConfig:
    """The core settings from a run's parameters (SelfTrainParams: unknown names and bad values raise ParamsError,
    a ValueError naming each)."""
    p = SelfTrainParams.from_dict(params)
    return SelfTrainConfig(
        rounds=p.rounds,
        k=p.k,
        margin=p.margin,
        min_precision=p.min_precision,
        min_gain=p.min_gain,
        adapter=AdapterConfig(validation=0.1, **p.adapter_overrides()),
        dan=SELF_TRAIN_DAN if p.dan else None,
        dan_weight=p.dan_weight,
    )


def _keep_fn(run: MiningRun, src: Side, tgt: Side):
    """The sentence run's filter stage (`shards.candidates.filter_reasons`: the same rules, language evidence and
    identifier) over rows of the two sides: a pair is kept when no rule fires."""
    from .shards.candidates import filter_reasons

    stage = SentenceRunParams(filters=True)

    def keep(s_idx: np.ndarray, t_idx: np.ndarray) -> np.ndarray:
        reasons, _ = filter_reasons(
            [(src.texts[i], src.detected[i]) for i in s_idx],
            [(tgt.texts[i], tgt.detected[i]) for i in t_idx],
            run,
            stage,
        )
        return np.array([r == "" for r in reasons], dtype=bool)

    return keep


def _gold_rows(run: MiningRun, src: Side, tgt: Side) -> tuple[np.ndarray, np.ndarray]:
    """(source rows, target rows) of the corpus's gold pairs whose two texts are on the sides (figures only)."""
    s_row = {t: i for i, t in enumerate(src.texts)}
    t_row = {t: i for i, t in enumerate(tgt.texts)}
    found = {
        (s_row[a], t_row[b])
        for a, b in gold_pairs_of(run.src_corpus, run.src_lang, run.tgt_lang)
        if a in s_row and b in t_row
    }
    arr = np.asarray(sorted(found), dtype=np.int64).reshape(-1, 2)
    return arr[:, 0], arr[:, 1]


def execute_self_train_run(run: MiningRun, reporter: ProgressReporter) -> dict:
    """Self-train an adapter on the run's corpus (run.src_lang side of src_corpus, run.tgt_lang of tgt_corpus)."""
    from ..core.encoders.registry import get_encoder

    params = SelfTrainParams.from_dict(run.params)
    config = self_train_config_from(run.params)
    reporter.update(stage="load", force=True)
    src = side_sentences(run.src_corpus, run.src_lang)
    tgt = side_sentences(run.tgt_corpus, run.tgt_lang)
    if min(len(src), len(tgt)) < config.min_pairs:
        raise ValueError(
            f"self-training needs at least {config.min_pairs} sentences a side: {len(src)} '{run.src_lang}' in "
            f"{run.src_corpus}, {len(tgt)} '{run.tgt_lang}' in {run.tgt_corpus}"
        )
    base = get_encoder(params.base, threads=settings.PCAPP_COMPUTE_THREADS)
    total = len(src) + len(tgt)
    reporter.update(stage="embed", done=0, total=total, force=True)
    t0 = time.perf_counter()
    src_emb = base.encode(src.texts, run.src_lang, progress=reporter.progress)
    tgt_emb = base.encode(tgt.texts, run.tgt_lang, progress=lambda done, _: reporter.progress(len(src) + done, total))
    run_record_timing(run=run, stage="embed", seconds=time.perf_counter() - t0)

    gold_src, gold_tgt = _gold_rows(run, src, tgt)

    def evaluate(s: np.ndarray, t: np.ndarray) -> dict:
        if not len(gold_src):
            return {}
        p1 = precision_at_n(knn_exact(s[gold_src], t, 1)[1], gold_tgt, 1)
        return {"gold_pairs": int(len(gold_src)), "gold_p_at_1": round(float(p1), 4)}

    reporter.update(stage="train", done=0, total=config.rounds, force=True)
    t0 = time.perf_counter()
    result = self_train(
        src_emb,
        tgt_emb,
        config=config,
        keep=_keep_fn(run, src, tgt) if params.filters else None,
        evaluate=evaluate,
        seed=params.seed,
        progress=reporter.progress,
        texts=(src.texts, tgt.texts),
        langs=(run.src_lang, run.tgt_lang),
        dan_threads=settings.PCAPP_COMPUTE_THREADS,
    )
    run_record_timing(run=run, stage="train", seconds=time.perf_counter() - t0)
    stats = {
        "rounds": [r.to_dict() for r in result.rounds],
        "best_round": result.best_round,
        "stopped": result.stopped,
        "src_sentences": len(src),
        "tgt_sentences": len(tgt),
        "artefact_id": None,
        "version": None,
    }
    if result.dan is not None:
        stats["dan"] = result.dan_report
    if result.model is None and result.dan is None:
        stats["note"] = "neither a round nor the subword DAN beat the base encoder; nothing was registered"
        return stats
    folder = Path(settings.PCAPP_DATA_DIR) / "models" / "encoders" / f"run-{run.pk}"
    folder.mkdir(parents=True, exist_ok=True)
    best = result.rounds[result.best_round]
    adapted = None
    if result.model is not None:
        final = folder / "model.pt"
        AdaptedEncoder(base, result.model, run.src_lang, run.tgt_lang).save(final)
        adapted = artefact_create(
            kind=ArtefactKind.ENCODER,
            name="adapted",
            path=final,
            run=run,
            params={**dataclasses.asdict(config.adapter), **params.to_dict(), "base": base.name, "self_trained": True},
            metrics={
                "self_training_rounds": stats["rounds"],
                "best_round": result.best_round,
                "train_pairs": result.rounds[result.best_round - 1].n_pairs,
                "held_out_margin": list(best.held_out_margin),
                "best_epoch": best.best_epoch,
            },
        )
        stats.update(artefact_id=adapted.pk, version=adapted.version, name="adapted")
    if result.dan is None:
        return stats
    dan_path = folder / "dan.pt"
    result.dan.save(dan_path)
    dan = artefact_create(
        kind=ArtefactKind.ENCODER,
        name="dan",
        path=dan_path,
        run=run,
        params={**result.dan.config.to_dict(), "self_trained": True, "run": run.pk},
        metrics={"train_pairs": result.dan_report["pairs"], "self_training_round": result.best_round},
    )
    first = adapted if adapted is not None else encoder_default()
    combined = combine_encoders([(first, 1.0 - result.dan_weight), (dan, result.dan_weight)], created_by=run.created_by)
    combined.trained_on = run.src_corpus
    combined.metrics = {
        "self_training_rounds": stats["rounds"],
        "best_round": result.best_round,
        "dan": result.dan_report,
    }
    combined.save(update_fields=["trained_on", "metrics"])
    stats.update(artefact_id=combined.pk, version=combined.version, name="combined", dan_artefact_id=dan.pk)
    return stats
