"""Reads of the mining app: run progress, candidate lists, score histograms, run comparison, the dashboard.

Every function here reads only; each list is a fixed number of queries whatever the table size. Modules: `runs`
(progress bars, run lists), `thresholds` (the threshold that keeps a run's pairs and the scale it is on),
`corpora`, `candidates` (kept filter, labels, querysets, pages, pre-filter tallies, score histogram), `labels` (the
label model the app above provides), `compare` (two runs side by side), `dashboard`.
"""

from .candidates import (
    BAD,
    GOOD,
    CandidatePage,
    ScoreHistogram,
    annotate_labels,
    candidate_model,
    candidate_page,
    candidate_queryset,
    filter_by_label,
    filter_reasons,
    kept_q,
    score_histogram,
)
from .compare import RunComparison, run_compare
from .corpora import corpus_detail, corpus_list
from .dashboard import dashboard_data
from .labels import label_model, provide_label_model
from .runs import JobBar, RunProgress, job_bar, run_get, run_list, run_progress
from .thresholds import RunThreshold, ThresholdInfo, run_threshold, run_threshold_info, scale_key

__all__ = [
    "BAD",
    "GOOD",
    "CandidatePage",
    "JobBar",
    "RunComparison",
    "RunProgress",
    "RunThreshold",
    "ScoreHistogram",
    "ThresholdInfo",
    "annotate_labels",
    "candidate_model",
    "candidate_page",
    "candidate_queryset",
    "corpus_detail",
    "corpus_list",
    "dashboard_data",
    "filter_by_label",
    "filter_reasons",
    "job_bar",
    "kept_q",
    "label_model",
    "provide_label_model",
    "run_compare",
    "run_get",
    "run_list",
    "run_progress",
    "run_threshold",
    "run_threshold_info",
    "scale_key",
    "score_histogram",
]
