"""The BUCC-style split of gold pairs and the report table (no database)."""

from __future__ import annotations

import numpy as np
import pytest

from mining.core.evaluation import MiningScore
from mining.core.evaluation_report import EvaluationReport, format_report, split_gold


def test_split_keeps_the_asked_parallel_share_and_uses_every_pair_once() -> None:
    split = split_gold(1000, parallel_share=0.04, seed=3)
    # G = sP / (2 - s) = 40 / 1.96 = 20.4 -> 20 parallel; the other 980 halve into one-sided distractors
    assert (len(split.parallel), len(split.src_only), len(split.tgt_only)) == (20, 490, 490)
    every = np.concatenate([split.parallel, split.src_only, split.tgt_only])
    assert sorted(every.tolist()) == list(range(1000))
    share = len(split.parallel) / (len(split.parallel) + len(split.src_only))
    assert share == pytest.approx(0.04, abs=0.002)
    again = split_gold(1000, parallel_share=0.04, seed=3)
    assert np.array_equal(again.parallel, split.parallel)


def test_split_with_a_fixed_gold_count_and_bad_inputs() -> None:
    assert len(split_gold(50, parallel_share=0.5, n_gold=7).parallel) == 7
    assert len(split_gold(5, parallel_share=0.5, n_gold=70).parallel) == 5
    with pytest.raises(ValueError, match="no gold pairs"):
        split_gold(0, parallel_share=0.04)
    with pytest.raises(ValueError, match="parallel_share"):
        split_gold(10, parallel_share=0.0)


def _report(n_gold: int) -> EvaluationReport:
    score = MiningScore("ratio", "max_score", 1.2345, 0.9, 0.8, 0.8471, 120, 4)
    return EvaluationReport(n_src=500, n_tgt=480, n_gold=n_gold, scores=[score], gold_p_at_1=0.95)


def test_report_rows_and_a_caution_under_100_gold_pairs() -> None:
    text = format_report(_report(250))
    assert not text.startswith("caution")
    assert text.splitlines()[-1].split() == ["4", "ratio", "max_score", "1.2345", "90.0", "80.0", "84.7", "120"]
    assert "250 gold pairs (50.0% parallel); gold-only P@1 = 0.950" in text
    few = format_report(_report(20)).splitlines()[0]
    assert few.startswith("caution: only 20 gold pairs (fewer than 100); one pair moves F1 by about 5 points")
