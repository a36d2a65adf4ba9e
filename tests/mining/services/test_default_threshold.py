"""The sentence run's default threshold, from its candidates and filter reasons (no database)."""

from __future__ import annotations

import numpy as np

from mining.core.types import Candidates
from mining.services.default_threshold import default_threshold_for_run


def _cands(scores: np.ndarray, direction: np.ndarray) -> Candidates:
    n = len(scores)
    order = np.argsort(-scores, kind="stable")
    idx = np.arange(n, dtype=np.int64)
    zeros = np.zeros(n, dtype=np.float32)
    return Candidates(
        src_idx=idx,
        tgt_idx=idx,
        cosine=zeros,
        score=scores[order].astype(np.float32),
        fwd_mean=zeros,
        bwd_mean=zeros,
        rank=np.zeros(n, dtype=np.int64),
        direction=direction[order].astype(np.uint8),
    )


def test_threshold_is_estimated_on_the_mutual_candidates_that_passed_the_filters() -> None:
    rng = np.random.default_rng(0)
    scores = np.concatenate([rng.normal(1.0, 0.05, 3000), rng.normal(1.3, 0.08, 1000), np.full(500, 2.0)])
    direction = np.full(len(scores), 3)
    cands = _cands(scores, direction)
    # The 500 pairs at 2.0 were rejected by the pre-filters: they must not count.
    reasons = ["identical" if s == np.float32(2.0) else "" for s in cands.score]

    got = default_threshold_for_run(cands=cands, reasons=reasons, margin="ratio", k=4)

    assert got["method"] == "mixture" and got["margin"] == "ratio" and got["k"] == 4
    assert got["n_candidates"] == 4000
    assert 1.12 < got["threshold"] < 1.2
    assert abs(got["estimated_true"] - 1000) < 60
    assert got["estimated_precision"] > 0.95


def test_too_few_candidates_give_no_threshold_and_say_why() -> None:
    cands = _cands(np.linspace(1.0, 1.5, 30), np.full(30, 3))
    got = default_threshold_for_run(cands=cands, reasons=[""] * 30, margin="distance", k=16)
    assert got["threshold"] is None and got["method"] is None
    assert got["reason"].startswith("30 candidates found from both sides")
