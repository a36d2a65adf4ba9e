"""Label-aware reads: label-state filters, GOOD-only export, precision per threshold and per run (the labels are
staff reviews outside campaigns, each by its own staff member)."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from mining.models import SentencePairCandidate
from mining.selectors import candidate_page, run_compare, score_histogram
from tests.factories.annotation import LabelFactory
from tests.factories.mining import make_run

pytestmark = pytest.mark.django_db


def label(cand: SentencePairCandidate, verdict: str) -> None:
    LabelFactory(sentence_pair=cand, verdict=verdict)


@pytest.fixture
def labelled_run():
    """Ranks 1-5; labels: 1 GOOD, 2 BAD, 3 GOOD+BAD (tie), 4 GOOD+GOOD, 5 none."""
    run = make_run(5, scores=[1.5, 1.4, 1.3, 1.2, 1.1])
    c = {x.rank: x for x in SentencePairCandidate.objects.filter(run=run)}
    label(c[1], "GOOD")
    label(c[2], "BAD")
    label(c[3], "GOOD")
    label(c[3], "BAD")
    label(c[4], "GOOD")
    label(c[4], "GOOD")
    return run


def test_label_state_filters(labelled_run):
    def ranks(state):
        return [c.rank for c in candidate_page(run=labelled_run, filters={"label": state}).items]

    assert ranks("good") == [1, 4]
    assert ranks("bad") == [2]
    assert ranks("unlabelled") == [5]
    page = candidate_page(run=labelled_run, filters={})
    assert [(c.n_good, c.n_bad) for c in page.items] == [(1, 0), (0, 1), (1, 1), (2, 0), (0, 0)]


def test_export_good_only_and_both(staff_client, labelled_run):
    url = reverse("run-export", args=[labelled_run.pk])
    body = b"".join(
        staff_client.get(url, {"format": "jsonl", "keep": "good", "download": "1"}).streaming_content
    ).decode()
    rows = [json.loads(line) for line in body.splitlines()]
    assert [r["rank"] for r in rows] == [1, 4] and rows[1]["labels"] == {"good": 2, "bad": 0}
    body = b"".join(
        staff_client.get(url, {"format": "tsv", "keep": "both", "threshold": "1.3", "download": "1"}).streaming_content
    ).decode()
    assert len(body.splitlines()) == 1 and body.endswith("\tGOOD\n")


def test_threshold_table_precision(labelled_run):
    hist = score_histogram(run=labelled_run, bins=4)
    rows = [(kept, n, p) for _, kept, n, p in hist.threshold_table()]
    assert rows[0] == (5, 4, 0.5)  # all kept; labelled ranks 1-4, GOOD majority for 1 and 4
    assert rows[-1] == (1, 1, 1.0)  # the top bin holds rank 1 only


def test_compare_precision_on_labels(labelled_run):
    cmp = run_compare(a=labelled_run, b=labelled_run, threshold_a=None, threshold_b=1.35)
    assert (cmp.labelled_a, cmp.good_a) == (4, 2)
    assert (cmp.labelled_b, cmp.good_b) == (2, 1)
