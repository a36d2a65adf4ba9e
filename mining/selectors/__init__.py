"""Reads of the mining app: run progress, candidate lists, score histograms, run comparison, the dashboard.

Every function here reads only; each list is a fixed number of queries whatever the table size. Modules: `runs`
(progress bars, run lists, the threshold that keeps a run's candidates), `corpora`, `candidates` (kept filter,
labels, querysets, pages, pre-filter tallies, score histogram), `labels` (the label model the app above provides),
`compare` (two runs side by side), `dashboard`.
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
from .runs import (
    JobBar,
    RunProgress,
    RunThreshold,
    job_bar,
    run_get,
    run_list,
    run_progress,
    run_threshold,
    run_threshold_info,
)

__all__ = [
    "BAD",
    "GOOD",
    "CandidatePage",
    "JobBar",
    "RunComparison",
    "RunProgress",
    "RunThreshold",
    "ScoreHistogram",
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
    "score_histogram",
]
