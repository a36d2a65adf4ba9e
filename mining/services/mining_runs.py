"""The sentence-mining run in one process: plan, embed both sides, kNN both ways over index shards, margin scoring,
candidate selection, pre-filters, and a binary COPY of the candidates with their evidence.

It runs the shard functions of `shards` one after the other (the same ones the Celery workers run, so both
paths write the same candidates); finished shards of an earlier attempt are skipped. Stages (each timed in
run.timings): plan, embed, [train, index for IVF], search, score, filter, write, finish.
"""

from __future__ import annotations

from ..models import MiningRun
from .progress import ProgressReporter
from .shards import run_inline


def execute_sentence_run(run: MiningRun, reporter: ProgressReporter) -> dict:
    """Mine sentence pairs between run.src_lang of run.src_corpus and run.tgt_lang of run.tgt_corpus (this process)."""
    return run_inline(run, reporter)
