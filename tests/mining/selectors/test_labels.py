"""Mining reads reviewers' labels through the model the review app provides at start-up, never by naming the app."""

from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from annotation.models import Label, Verdict
from mining.models import Corpus, SentencePairCandidate
from mining.selectors import annotate_labels, filter_by_label, label_model, provide_label_model
from mining.selectors.labels import random_sample_filter
from tests.factories.annotation import LabelFactory
from tests.factories.mining import SentencePairCandidateFactory

MINING = Path(__file__).resolve().parents[3] / "mining"


def test_the_review_app_provides_its_label_model_and_mining_names_no_app() -> None:
    assert label_model() is Label
    # its labels of pairs drawn at random: the one-click check's (kept set) and uniform campaigns', no control
    assert dict(random_sample_filter().children) == {
        "item__is_control": False,
        "item__sampler__in": ["kept", "uniform"],
    }
    sources = {p: p.read_text() for p in MINING.rglob("*.py") if "migrations" not in p.parts}
    assert [str(p) for p, text in sources.items() if 'get_model("annotation"' in text or "'annotation'" in text] == []


def test_a_model_without_what_mining_reads_is_refused() -> None:
    with pytest.raises(ImproperlyConfigured, match="Corpus has no field 'verdict', which mining reads"):
        provide_label_model(Corpus)
    assert label_model() is Label


@pytest.mark.django_db
def test_label_counts_come_from_the_provided_model_and_none_without_one() -> None:
    cand = SentencePairCandidateFactory()
    LabelFactory(sentence_pair=cand, verdict=Verdict.GOOD)
    LabelFactory(sentence_pair=cand, verdict=Verdict.GOOD)
    LabelFactory(sentence_pair=cand, verdict=Verdict.BAD)
    qs = SentencePairCandidate.objects.filter(pk=cand.pk)
    assert list(annotate_labels(qs).values_list("n_good", "n_bad")) == [(2, 1)]
    assert list(filter_by_label(annotate_labels(qs), "good").values_list("pk", flat=True)) == [cand.pk]
    sampled = random_sample_filter()
    provide_label_model(None)
    try:
        assert list(annotate_labels(qs).values_list("n_good", "n_bad")) == [(0, 0)]
        assert list(filter_by_label(annotate_labels(qs), "unlabelled").values_list("pk", flat=True)) == [cand.pk]
        assert list(filter_by_label(annotate_labels(qs), "good")) == []
    finally:
        provide_label_model(Label, random_sample=sampled)
    assert random_sample_filter() is sampled
