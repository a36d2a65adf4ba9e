"""A run's parameters are defined once (SentenceRunParams): defaults, parsing, bounds, and the same message for the
same bad value from the run form, the API and the `mine` command."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from mining.core.candidates import Strategy
from mining.core.knn import KnnMethod
from mining.core.margin import Margin
from mining.forms import RunStartForm
from mining.models import Corpus, MiningRun
from mining.services.params import ParamsError, SentenceRunParams


def test_defaults_fill_missing_fields_of_older_rows() -> None:
    # a row written before `nprobe` existed reads back with its default
    p = SentenceRunParams.from_dict({"knn": "ivf", "margin": "distance", "k": 6, "strategy": "intersection"})
    assert p == SentenceRunParams(
        knn=KnnMethod.IVF, margin=Margin.DISTANCE, k=6, strategy=Strategy.INTERSECTION, threshold=None, nprobe=16
    )
    assert p.to_dict() == {
        "knn": "ivf",
        "margin": "distance",
        "k": 6,
        "strategy": "intersection",
        "threshold": None,
        "filters": True,
        "nprobe": 16,
        "index": "auto",
        "site": "",
        "rescore": "none",
    }
    assert SentenceRunParams.from_dict(p.to_dict()) == p


def test_values_are_parsed_from_form_and_command_line_strings() -> None:
    p = SentenceRunParams.from_dict({"k": "16", "threshold": "1.05", "filters": "false", "margin": "Ratio"})
    assert (p.k, p.threshold, p.filters, p.margin) == (16, 1.05, False, Margin.RATIO)
    # a blank optional field is "not set"; a blank required one takes the default
    assert SentenceRunParams.from_dict({"threshold": "", "k": ""}).threshold is None
    assert SentenceRunParams.from_dict({"k": ""}).k == 4


def test_every_bad_field_is_named_once() -> None:
    with pytest.raises(ParamsError) as exc:
        SentenceRunParams.from_dict({"k": 0, "margin": "foo", "nprobe": "many", "threshold": "nan", "kk": 4})
    assert exc.value.errors == {
        "k": "must be at least 1 (got 0)",
        "margin": "'foo' is not one of: absolute, distance, ratio",
        "nprobe": "'many' is not a whole number",
        "threshold": "must be a number, not NaN",
        "kk": "is not a parameter of sentence runs",
    }
    with pytest.raises(ParamsError) as exc:
        SentenceRunParams.from_dict({"k": 65, "k_": None} | {"k": 2.5})
    assert exc.value.errors["k"] == "'2.5' is not a whole number"


@pytest.fixture
def corpus(db) -> Corpus:
    return Corpus.objects.create(name="tiny", languages=["en", "fr"])


BAD = [("k", "0", "must be at least 1 (got 0)"), ("margin", "foo", "'foo' is not one of: absolute, distance, ratio")]


@pytest.mark.parametrize(("name", "value", "message"), BAD)
def test_same_bad_value_same_message_from_form_api_and_cli(
    name, value, message, corpus, staff_client, monkeypatch
) -> None:
    base = {"kind": "sentence", "src_corpus": corpus.pk, "src_lang": "en", "tgt_lang": "fr"}

    form = RunStartForm(data={**base, name: value})
    assert not form.is_valid()
    assert form.errors[name] == [message]

    response = staff_client.post(reverse("api-run-list"), {**base, name: value}, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {name: [message]}

    with pytest.raises(CommandError) as exc:
        call_command("mine", "tiny", "--src", "en", "--tgt", "fr", f"--{name}", value)
    assert str(exc.value) == f"{name}: {message}"
    assert MiningRun.objects.count() == 0


def test_a_document_run_started_from_the_form_or_the_api_stores_document_parameters(corpus, staff_client) -> None:
    from mining.core.docmethod import DocMethod
    from mining.services.params import DocumentRunParams, SentenceRunParams

    base = {"kind": "document", "src_corpus": corpus.pk, "src_lang": "en", "tgt_lang": "fr", "k": "6"}
    form = RunStartForm(data=base)
    assert form.is_valid(), form.errors
    stored = form.run_kwargs()["params"]
    # an HTML form sends no value for an unticked box: the two boxes (pre-filter, calibrated f1) are off here
    assert stored == DocumentRunParams(k=6, prefilter=False, calibrated_f1=False)
    assert stored.method is DocMethod.RERANK
    # the margin neighbourhood is the sentence run's field (one definition: same default and bounds)
    assert DocumentRunParams.__dataclass_fields__["k"].metadata == SentenceRunParams.__dataclass_fields__["k"].metadata
    bad = {**base, "method": "magic"}
    message = "'magic' is not one of: sentence_avg, hide, bow, sentence_vote, count, rerank"
    assert RunStartForm(data=bad).errors["method"] == [message]
    response = staff_client.post(reverse("api-run-list"), bad, content_type="application/json")
    assert (response.status_code, response.json()) == (400, {"method": [message]})
    assert MiningRun.objects.count() == 0


def test_a_self_training_run_can_be_started_from_the_form(corpus) -> None:
    from mining.services.params import SelfTrainParams

    form = RunStartForm(
        data={"kind": "self_train", "src_corpus": corpus.pk, "src_lang": "en", "tgt_lang": "fr", "k": 8}
    )
    assert form.is_valid(), form.errors
    kwargs = form.run_kwargs()
    # an HTML form sends no value for an unticked box: the two boxes (pre-filters, subword DAN) are off here
    expected = SelfTrainParams(k=8, filters=False, dan=False)
    assert kwargs["kind"] == "self_train" and kwargs["params"] == expected


def test_the_form_sets_self_training_rounds_dan_and_its_weight(corpus) -> None:
    from mining.services.params import SelfTrainParams

    data = {"kind": "self_train", "src_corpus": corpus.pk, "src_lang": "en", "tgt_lang": "fr", "filters": "on"}
    form = RunStartForm(data={**data, "rounds": "2", "dan": "on", "dan_weight": "0.4", "min_gain": "0.01"})
    assert form.is_valid(), form.errors
    expected = SelfTrainParams(rounds=2, dan=True, dan_weight=0.4, min_gain=0.01)
    assert form.run_kwargs()["params"] == expected
    bad = RunStartForm(data={**data, "dan_weight": "1.5"})
    assert not bad.is_valid() and list(bad.errors) == ["dan_weight"]
    # a sentence run stores none of them
    sentence = RunStartForm(data={**data, "kind": "sentence", "rounds": "2", "dan": "on"})
    assert sentence.is_valid(), sentence.errors
    assert sentence.run_kwargs()["params"] == SentenceRunParams(filters=True)
    assert "rounds" not in sentence.fields and "dan" not in sentence.fields
