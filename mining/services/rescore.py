"""A sentence run's candidates re-scored by the evidence scorer (``SentenceRunParams.rescore`` = evidence;
``core.evidence_rescore``), in its finish stage: the scorer is trained on the run's confident pairs against their
next-best neighbours, every candidate's score becomes its log-odds (the margin stays in its ``evidence["margin"]``),
the ranks follow, and the label-free threshold is the median3 cut of the log-odds.

``run.stats["rescore"]`` records what was used (features, dictionaries found, training pairs, threshold rule) and
the scorer's coefficients, which the precision estimate (``services.precision``) applies to the decoy hits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from django.db import transaction

from ..core.evidence_rescore import (
    SCORER_L2,
    THRESHOLD_RULE,
    confident_rows,
    dictionaries_for,
    model_to_dict,
    rescore,
)
from ..core.types import Candidates, Direction
from ..models import SentencePairCandidate

logger = logging.getLogger(__name__)

STATS_KEY = "rescore"
_BOTH = int(Direction.FORWARD | Direction.BACKWARD)


def rescore_run(
    *,
    run_id: int,
    src_lang: str,
    tgt_lang: str,
    cands: Candidates,
    reasons: Sequence[str],
    neighbours: dict[str, np.ndarray],
    src_ids: np.ndarray,
    tgt_ids: np.ndarray,
    texts_of: Callable[[np.ndarray], dict[int, tuple[str, str]]],
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Re-score a run's written candidates and return ``(stats["rescore"], stats["default_threshold"] or None)``.

    Idempotent: the rows are matched by (source, target) and given the scores and ranks computed from the margin
    candidates, so a finish stage run twice writes the same values.

    Args:
        cands: the run's candidates as mined (sorted by margin score); reasons: their filter reasons ('' = kept).
        neighbours: ``core.evidence_rescore.candidate_neighbours`` of them (saved by the score stage).
        src_ids, tgt_ids: the sides' sentence ids by row; texts_of: ``ids -> {id: (text, detected language)}``.

    Returns:
        The record, with ``applied`` False and a ``reason`` when no scorer could be trained (the margin scores then
        stand and the second item is None).
    """
    passed = np.fromiter((not r for r in reasons), dtype=bool, count=len(reasons))
    pos, rule = confident_rows(cands.score, cands.direction, passed)
    neg_sel = np.flatnonzero(np.isin(neighbours["rows"], pos))
    neg_rows, neg_tgt = neighbours["rows"][neg_sel], neighbours["tgt"][neg_sel]
    s_db, t_db = src_ids[cands.src_idx], tgt_ids[cands.tgt_idx]
    n_db = tgt_ids[neg_tgt]
    texts = texts_of(np.unique(np.concatenate([s_db, t_db, n_db])))
    src_texts = [texts[int(i)][0] for i in s_db]
    tgt_texts = [texts[int(i)][0] for i in t_db]
    dicts = dictionaries_for(src_lang, tgt_lang, [*src_texts, *tgt_texts])
    record: dict[str, Any] = {
        "method": "evidence",
        "dictionaries": {
            f"{src_lang}-{tgt_lang}": dicts[0] is not None,
            f"{tgt_lang}-{src_lang}": dicts[1] is not None,
        },
        "positives": len(pos),
        "negatives": len(neg_rows),
        "positives_rule": rule,
        "negatives_kind": "next-best neighbour",
    }
    try:
        res = rescore(
            cands=(cands.score, cands.cosine, src_texts, tgt_texts),
            passed=passed,
            mutual=cands.direction == _BOTH,
            positives=(cands.score[pos], cands.cosine[pos], [src_texts[i] for i in pos], [tgt_texts[i] for i in pos]),
            negatives=(
                neighbours["score"][neg_sel],
                neighbours["cosine"][neg_sel],
                [src_texts[i] for i in neg_rows],
                [texts[int(i)][0] for i in n_db],
            ),
            dicts=dicts,
        )
    except ValueError as exc:
        logger.info("run %s: not re-scored (%s)", run_id, exc)
        return {**record, "applied": False, "reason": f"not re-scored: {exc}; the margin scores stand"}, None
    _write_scores(run_id, s_db, t_db, res.logit)
    record.update(
        applied=True,
        features=list(res.model.names),
        evidence=list(res.used),
        l2=SCORER_L2,
        threshold_rule=THRESHOLD_RULE,
        threshold_counts=res.cut.counts,
        length_center=round(res.length_center, 6),
        model=model_to_dict(res.model),
    )
    threshold: dict[str, Any] = {
        "threshold": res.cut.threshold,  # unrounded: it is the last kept pair's own score
        "method": THRESHOLD_RULE if res.cut.threshold is not None else None,
        "scale": "log-odds of the evidence scorer",
        "n_kept": res.cut.n_kept,
        "n_candidates": int(passed.sum()),
    }
    if res.cut.reason:
        threshold["reason"] = res.cut.reason
    return record, threshold


def _write_scores(run_id: int, s_db: np.ndarray, t_db: np.ndarray, logit: np.ndarray) -> None:
    """Set each written candidate's score to its log-odds and its rank to its place by them (1 = best)."""
    order = np.argsort(-logit, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(1, len(order) + 1)
    new = {(int(s), int(t)): (float(v), int(r)) for s, t, v, r in zip(s_db, t_db, logit, rank, strict=True)}
    with transaction.atomic():
        rows = list(SentencePairCandidate.objects.filter(run_id=run_id).only("id", "src_id", "tgt_id"))
        for row in rows:
            row.score, row.rank = new[(row.src_id, row.tgt_id)]
        SentencePairCandidate.objects.bulk_update(rows, ["score", "rank"], batch_size=5000)
