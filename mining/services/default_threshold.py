"""The label-free default threshold of a sentence run, computed from what the run holds in memory after its filter
stage, for the run's stats (``stats["default_threshold"]``).

Meant to be read where a run's threshold is read (``selectors.run_threshold``: the results page, exports, and the
campaigns' "around the threshold" sampling) when the run was started without a threshold and no calibrated threshold
replaces it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..core.default_threshold import MIN_CANDIDATES, default_threshold
from ..core.types import Candidates, Direction

STATS_KEY = "default_threshold"
_BOTH = int(Direction.FORWARD | Direction.BACKWARD)


def default_threshold_for_run(*, cands: Candidates, reasons: Sequence[str], margin: str, k: int) -> dict:
    """The run's default threshold as a JSON-ready dict for ``run.stats[STATS_KEY]``.

    Call it in the sentence-run handler after the filter stage, with the candidates and their filter reasons
    ('' = kept): the estimate is made on the candidates that passed the pre-filters, the list the threshold cuts.

    Args:
        cands: the run's candidates (all of them, sorted by score, as ``mine_candidates`` returns them).
        reasons: one filter reason per candidate, '' when the pair passed.
        margin: the run's margin name ("ratio", ...), recorded beside the estimate.
        k: the run's margin neighbourhood size, recorded likewise.

    Returns:
        ``{"threshold", "method", "estimated_precision", "estimated_recall", "estimated_f1", "estimated_true",
        "n_kept", "n_candidates", "assumption", "margin", "k"}``; when the run has too few candidates to estimate
        from, ``threshold`` and ``method`` are None and ``reason`` says why.
    """
    if len(reasons) != len(cands):
        raise ValueError(f"{len(reasons)} filter reasons for {len(cands)} candidates")
    passed = np.fromiter((not r for r in reasons), dtype=bool, count=len(reasons))
    scores = cands.score[passed]
    mutual = cands.direction[passed] == _BOTH
    base = {"margin": str(margin), "k": int(k)}
    if int(mutual.sum()) < MIN_CANDIDATES:
        return {
            **base,
            "threshold": None,
            "method": None,
            "n_candidates": int(passed.sum()),
            "reason": (
                f"{int(mutual.sum())} candidates found from both sides passed the pre-filters; a threshold without "
                f"labels needs at least {MIN_CANDIDATES}"
            ),
        }
    return {**base, **default_threshold(scores, mutual).to_dict()}
