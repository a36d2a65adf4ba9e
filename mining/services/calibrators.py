"""Calibration models as mining artefacts: find a language pair's latest model, save and load one, apply it to a
run's candidates in bulk, and store a language pair's threshold. Training models from reviewers' labels is the
feedback app's (feedback.services.calibration); nothing here reads labels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from django.db import connection, transaction

from mining.core.files import atomic_path

from ..models import Artefact, ArtefactKind, LanguagePairSetting, MiningRun, SentencePairCandidate
from ..params import ApplyCalibrationParams, SentenceRunParams
from .embeddings import embed_side, side_sentences
from .encoders import artefact_path, load_encoder

METHOD_NAMES = ("head", "platt", "isotonic")
"""The calibration methods, in the order the calibration page offers them."""


def calibration_methods() -> dict[str, Any]:
    """Each calibration method's class by name (imports torch: call it where a model is fitted or loaded)."""
    from ..core.calibration.baselines import IsotonicCalibration, PlattScaling
    from ..core.calibration.head import CalibrationHead

    return {"head": CalibrationHead, "platt": PlattScaling, "isotonic": IsotonicCalibration}


def __getattr__(name: str) -> Any:
    """``METHODS``: ``calibration_methods()``, built on first use so the web tier loads no torch (PEP 562)."""
    if name == "METHODS":
        return calibration_methods()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


DEFAULT_PHI = {"margin": SentenceRunParams().margin.value, "k": SentenceRunParams().k}
"""The pair score a calibration model reads when its params do not say (the sentence-mining defaults)."""


def latest_calibration(*, src_lang: str, tgt_lang: str) -> Artefact | None:
    """The newest active calibration model of a language pair."""
    return (
        Artefact.objects.filter(
            kind=ArtefactKind.CALIBRATION, name=f"calibration-{src_lang}-{tgt_lang}", is_active=True
        )
        .order_by("-version")
        .first()
    )


def save_calibrator(model: Any, method: str, path: Path) -> None:
    """Write a fitted calibrator atomically (temporary file, then rename)."""
    import torch

    with atomic_path(path) as tmp:
        torch.save({"method": method, "state": model.state_dict()}, tmp)


def load_calibrator(artefact: Artefact) -> Any:
    """The calibrator stored in a calibration artefact."""
    import torch

    data = torch.load(artefact_path(artefact), weights_only=False)
    return calibration_methods()[data["method"]].from_state(data["state"])


def execute_apply_calibration(run: MiningRun, reporter) -> dict:
    """Recompute the calibrated confidence of every candidate of the parent run with params.calibration."""
    target = run.parent
    artefact = Artefact.objects.get(
        pk=ApplyCalibrationParams.from_stored(run.params).calibration, kind=ArtefactKind.CALIBRATION
    )
    reporter.update(stage="apply", force=True)
    n = calibration_apply(run=target, artefact=artefact)
    return {"candidates": n}


def calibration_apply(*, run: MiningRun, artefact: Artefact, chunk: int = 200_000) -> int:
    """Write calibrated confidences for all the run's candidates: COPY into a temporary table, then one UPDATE."""
    model = load_calibrator(artefact)
    side = side_sentences(run.src_corpus, run.src_lang)
    emb = embed_side(
        corpus=run.src_corpus,
        lang=run.src_lang,
        encoder_artefact=run.encoder,
        encode=load_encoder(run.encoder).encode,
        ids=side.ids,
        texts=side.texts,
    )
    row_of = np.full(int(side.ids.max()) + 1 if len(side.ids) else 1, -1, dtype=np.int64)
    row_of[side.ids] = np.arange(len(side.ids))
    cands = np.array(
        list(
            SentencePairCandidate.objects.filter(run=run)
            .values_list("id", "src_id", "score")
            .iterator(chunk_size=50_000)
        ),
        dtype=np.float64,
    ).reshape(-1, 3)
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("CREATE TEMPORARY TABLE calib_tmp (id bigint PRIMARY KEY, conf double precision) ON COMMIT DROP")
        with cur.cursor.copy("COPY calib_tmp (id, conf) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "float8"])
            for start in range(0, len(cands), chunk):
                part = cands[start : start + chunk]
                rows = row_of[part[:, 1].astype(np.int64)]
                conf = model.predict(emb[rows], part[:, 2])
                for cid, c in zip(part[:, 0].astype(np.int64), conf, strict=True):
                    copy.write_row((int(cid), float(c)))
        cur.execute(
            "UPDATE mining_sentencepaircandidate c SET confidence = t.conf, calibration_id = %s "
            "FROM calib_tmp t WHERE c.id = t.id",
            [artefact.pk],
        )
        updated = cur.rowcount
    return updated


@transaction.atomic
def threshold_apply(
    *,
    src_lang: str,
    tgt_lang: str,
    scale_key: str,
    threshold: float,
    target_precision: float | None,
    estimated_precision: float | None,
    calibration: Artefact | None,
    user: Any,
) -> LanguagePairSetting:
    """Store the threshold chosen for a language pair on one scoring configuration (`scale_key`, see
    mining.selectors.thresholds): it applies to the pair's runs of that key only."""
    if not scale_key:
        raise ValueError("a threshold is stored for a scoring configuration (scale key); none given")
    setting, _ = LanguagePairSetting.objects.update_or_create(
        src_lang=src_lang,
        tgt_lang=tgt_lang,
        scale_key=scale_key,
        defaults={
            "threshold": threshold,
            "target_precision": target_precision,
            "estimated_precision": estimated_precision,
            "calibration": calibration,
            "updated_by": user if getattr(user, "is_authenticated", False) else None,
        },
    )
    return setting
