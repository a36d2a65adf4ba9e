"""Every run kind typed, everywhere (issue 27 item 2): for every start kind and every field, the same bad value gets
the same message from the run form, the API and the command line; what is posted is what is stored; the other kinds'
runs are checked by their class too (`run_create`), with the same words."""

from __future__ import annotations

import enum

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from mining.forms import START_KINDS, RunStartForm
from mining.models import JobStatus, MiningRun, RunKind
from mining.params import PARAMS, ParamsError, ParamSpec, SelfTrainParams, params_class
from mining.services.runs import RunStartError, run_create
from tests.factories.mining import CorpusFactory, MiningRunFactory

pytestmark = pytest.mark.django_db

COMMAND = {
    RunKind.SENTENCE: "mine",
    RunKind.DOCUMENT: "match_documents",
    RunKind.SELF_TRAIN: "self_train",
    RunKind.ALIGN: "align_documents",
}


def bad_value(spec: ParamSpec) -> tuple[str, str] | None:
    """A bad value of a field and the one message every entry point gives for it (None: a field no text can get wrong
    everywhere: a box, free text)."""
    if isinstance(spec.kind, type) and issubclass(spec.kind, enum.Enum):
        return "magic", f"'magic' is not one of: {', '.join(m.value for m in spec.kind)}"
    if spec.kind in (int, float):
        if spec.lo is not None:
            low = spec.lo - 1 if spec.kind is int else spec.lo - 0.5
            text = str(int(low)) if spec.kind is int else str(low)
            return text, f"must be at least {spec.lo:g} (got {text})"
        return "x", f"'x' is not {'a whole number' if spec.kind is int else 'a number'}"
    return None


CASES = [
    (kind, spec.name, *bad)
    for kind, _ in START_KINDS
    for spec in params_class(kind).specs()
    if (bad := bad_value(spec)) is not None
]


@pytest.fixture
def corpus():
    return CorpusFactory(name="tiny", languages=["en", "fr"])


@pytest.fixture
def doc_run(corpus):
    return MiningRunFactory(kind=RunKind.DOCUMENT, src_corpus=corpus, status=JobStatus.SUCCEEDED, params={})


def _where(kind: str, corpus, doc_run) -> dict:
    if kind == RunKind.ALIGN:
        return {"kind": kind, "parent": doc_run.pk}
    return {"kind": kind, "src_corpus": corpus.pk, "src_lang": "en", "tgt_lang": "fr"}


def _cli(kind: str, doc_run) -> list:
    return [doc_run.pk] if kind == RunKind.ALIGN else ["tiny", "--src", "en", "--tgt", "fr"]


def test_every_start_kind_and_every_checkable_field_is_covered() -> None:
    covered = {(kind, name) for kind, name, *_ in CASES}
    assert {kind for kind, _ in covered} == {k for k, _ in START_KINDS}
    assert ("self_train", "rounds") in covered and ("document", "top_n") in covered
    assert ("align", "doc_threshold") in covered  # "x" is not a number


@pytest.mark.parametrize(("kind", "name", "value", "message"), CASES)
def test_same_bad_value_same_message_from_form_api_and_cli(
    kind, name, value, message, corpus, doc_run, staff_client
) -> None:
    runs_before = MiningRun.objects.count()
    where = _where(kind, corpus, doc_run)
    form = RunStartForm(data={**where, name: value})
    assert not form.is_valid()
    assert form.errors[name] == [message]

    response = staff_client.post(reverse("api-run-list"), {**where, name: value}, content_type="application/json")
    assert (response.status_code, response.json()) == (400, {name: [message]})

    with pytest.raises(CommandError) as exc:
        call_command(COMMAND[kind], *_cli(kind, doc_run), f"--{name.replace('_', '-')}", value)
    assert str(exc.value) == f"{name}: {message}"
    assert MiningRun.objects.count() == runs_before


def _other_value(spec: ParamSpec):
    """A valid value other than the default (as JSON would post it)."""
    if isinstance(spec.kind, type) and issubclass(spec.kind, enum.Enum):
        return next(m.value for m in spec.kind if m != spec.default)
    if spec.kind is bool:
        return not spec.default
    if spec.kind is int:
        lo = int(spec.lo) if spec.lo is not None else 0
        return lo + 1 if spec.default != lo + 1 else lo + 2
    if spec.kind is float:
        lo = spec.lo if spec.lo is not None else 0.0
        hi = spec.hi if spec.hi is not None else lo + 1.0
        return round(lo + (hi - lo) / 3, 4)
    return "example.org"


@pytest.mark.parametrize("kind", [k for k, _ in START_KINDS])
def test_what_is_posted_is_what_is_stored(kind, corpus, doc_run, staff_client, monkeypatch) -> None:
    monkeypatch.setattr("mining.services.runs.send_run_task", lambda run_id: None)
    cls = params_class(kind)
    posted = {spec.name: _other_value(spec) for spec in cls.specs()}
    if kind == RunKind.SELF_TRAIN:
        posted["base"] = "usem3"
    response = staff_client.post(
        reverse("api-run-list"), {**_where(kind, corpus, doc_run), **posted}, content_type="application/json"
    )
    assert response.status_code == 201, response.json()
    run = MiningRun.objects.get(pk=response.json()["id"])
    assert run.params == cls.from_dict(posted).to_dict()
    for name, value in posted.items():
        assert run.params[name] == value, name


def test_the_issues_examples_store_exactly_what_was_posted(corpus, staff_client, monkeypatch) -> None:
    monkeypatch.setattr("mining.services.runs.send_run_task", lambda run_id: None)
    url = reverse("api-run-list")
    base = {"src_corpus": corpus.pk, "src_lang": "en", "tgt_lang": "fr"}
    r = staff_client.post(
        url, {**base, "kind": "self_train", "rounds": 2, "dan": False}, content_type="application/json"
    )
    assert r.status_code == 201 and (r.json()["params"]["rounds"], r.json()["params"]["dan"]) == (2, False)
    r = staff_client.post(
        url, {**base, "kind": "document", "top_n": 1, "neighbours": 3}, content_type="application/json"
    )
    assert r.status_code == 201 and (r.json()["params"]["top_n"], r.json()["params"]["neighbours"]) == (1, 3)
    # a field of another kind is a 400 naming it, never silently dropped
    r = staff_client.post(url, {**base, "kind": "sentence", "rounds": 2, "typo": 1}, content_type="application/json")
    assert (r.status_code, r.json()) == (
        400,
        {"rounds": ["is not a parameter of sentence runs"], "typo": ["is not a parameter of sentence runs"]},
    )


def test_the_form_shows_only_the_kinds_fields(corpus) -> None:
    """issue 26 item 7: the run form showed every field for every kind."""
    for kind, _ in START_KINDS:
        form = RunStartForm(initial={"kind": kind, "src_corpus": corpus.pk})
        what = {"kind", "name", "src_corpus", "tgt_corpus", "src_lang", "tgt_lang", "encoder", "shown_kind"}
        shown = set(form.fields) - what
        assert shown - {"parent"} == {spec.name for spec in params_class(kind).specs()}, kind
    align = RunStartForm(initial={"kind": "align"})
    assert "src_lang" not in align.fields and "parent" in align.fields


def test_the_cli_applies_the_start_rules(corpus) -> None:
    """`mine X --src en --tgt en` was not refused: the command now goes through check_run_start."""
    with pytest.raises(CommandError, match="tgt_lang: Pick two different languages when mining a corpus against"):
        call_command("mine", "tiny", "--src", "en", "--tgt", "en")
    assert not MiningRun.objects.exists()


@pytest.mark.parametrize("kind", sorted(set(PARAMS) - {k for k, _ in START_KINDS}))
def test_the_other_kinds_are_checked_by_their_class_in_run_create(kind) -> None:
    cls = params_class(kind)
    with pytest.raises(ParamsError) as exc:
        run_create(kind=kind, params={"typo": 1}, enqueue=False)
    assert exc.value.errors["typo"] == f"is not a parameter of {kind} runs"
    spec = next(s for s in cls.specs() if bad_value(s) is not None)
    value, message = bad_value(spec)
    with pytest.raises(ParamsError) as exc:
        run_create(kind=kind, params={spec.name: value}, enqueue=False)
    assert exc.value.errors[spec.name] == message
    with pytest.raises(TypeError, match=f"a {kind} run takes {cls.__name__}, not SelfTrainParams"):
        run_create(kind=kind, params=SelfTrainParams(), enqueue=False)
    assert not MiningRun.objects.exists()


def test_run_create_refuses_an_alignment_run_without_a_document_run() -> None:
    with pytest.raises(RunStartError) as exc:
        run_create(kind=RunKind.ALIGN, enqueue=False)
    assert exc.value.errors == {"parent": "An alignment run needs a finished document run."}


def test_a_post_whose_kind_changed_after_the_fields_were_shown_is_shown_again(corpus) -> None:
    """A page without htmx (the admin's) does not re-render the fields when the kind changes: the post is shown
    again with the new kind's fields instead of starting it with defaults (an unticked box would read as "off")."""
    data = {"kind": "document", "shown_kind": "sentence", "src_corpus": corpus.pk, "src_lang": "en", "tgt_lang": "fr"}
    form = RunStartForm(data=data)
    assert not form.is_valid()
    assert form.non_field_errors() == [
        "The fields below are now a document matching run's: check them and start it again."
    ]
    again = RunStartForm(data={**data, "shown_kind": form.data["shown_kind"], "prefilter": "on", "calibrated_f1": "on"})
    assert again.is_valid(), again.errors


def test_a_bound_is_shown_as_written_not_in_scientific_notation() -> None:
    """The seed's help on the run form said "From 0 to 2.14748e+09" (walk); whole bounds are printed whole."""
    seed = next(spec for spec in PARAMS[RunKind.DOCUMENT].specs() if spec.name == "seed")
    assert seed.describe() == "Seeds the split of the gold pairs. From 0 to 2147483647."
    k = next(spec for spec in PARAMS[RunKind.SENTENCE].specs() if spec.name == "k")
    assert k.describe().endswith(" From 1 to 64.")
