"""CampaignSpec holds a campaign's defaults, bounds and messages once: the model's defaults are its defaults, the form
and the API give the same message for the same bad value, and both create the same campaign from the same values."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Campaign, CampaignItem
from annotation.spec import DEFAULT_GUIDELINES, DEFAULTS, CampaignSpec, Sampler
from mining.params import ParamsError
from tests.factories.mining import make_run


def test_defaults_are_the_models_and_a_bare_spec_takes_them():
    spec = CampaignSpec(name="x")
    assert (spec.sample_size, spec.sampler, spec.threshold, spec.n_uncertain, spec.bands) == (
        200,
        Sampler.UNIFORM,
        None,
        0,
        5,
    )
    assert (spec.seed, spec.overlap, spec.n_controls, spec.blind, spec.guidelines) == (
        0,
        1,
        0,
        False,
        DEFAULT_GUIDELINES,
    )
    for name, value in DEFAULTS.items():
        assert Campaign._meta.get_field(name).get_default() == value, name


def test_from_dict_parses_form_text_and_json_values_alike():
    from_form = CampaignSpec.from_dict(
        {"name": " t7 ", "sample_size": "12", "sampler": "threshold", "threshold": "1.5", "blind": "on", "seed": "7"}
    )
    from_json = CampaignSpec.from_dict(
        {"name": "t7", "sample_size": 12, "sampler": "threshold", "threshold": 1.5, "blind": True, "seed": 7.0}
    )
    assert (
        from_form
        == from_json
        == CampaignSpec(name="t7", sample_size=12, sampler=Sampler.THRESHOLD, threshold=1.5, blind=True, seed=7)
    )
    assert type(from_form.sampler) is Sampler and type(from_json.seed) is int
    blanks = CampaignSpec.from_dict({"name": "b", "sample_size": "", "threshold": None, "guidelines": "  "})
    assert blanks == CampaignSpec(name="b")


def test_every_bad_field_is_named_at_once_with_its_one_message():
    with pytest.raises(ParamsError) as caught:
        CampaignSpec.from_dict(
            {
                "name": "",
                "sample_size": "0",
                "bands": "x",
                "seed": -1,
                "blind": "maybe",
                "sampler": "random",
                "threshold": "nan",
                "overlap": 2.5,
                "n_controls": True,
                "guidelines": "y" * 20_001,
                "colour": "red",
            }
        )
    assert caught.value.errors == {
        "colour": "is not a parameter of campaigns",
        "name": "is required",
        "sample_size": "must be at least 1 (got 0)",
        "sampler": "'random' is not one of: uniform, stratified, top, threshold, uncertain, kept",
        "threshold": "must be a number, not NaN",
        "bands": "'x' is not a whole number",
        "seed": "must be at least 0 (got -1)",
        "overlap": "'2.5' is not a whole number",
        "n_controls": "'True' is not a whole number",
        "blind": "'maybe' is not true or false",
        "guidelines": "must be at most 20000 characters long (got 20001)",
    }


def test_typed_construction_checks_the_same_rules_with_the_same_messages():
    with pytest.raises(ParamsError) as typed:
        CampaignSpec(name="x", sample_size=0, bands=21, sampler=Sampler.THRESHOLD)
    with pytest.raises(ParamsError) as parsed:
        CampaignSpec.from_dict({"name": "x", "sample_size": 0, "bands": 21, "sampler": "threshold"})
    assert (
        typed.value.errors
        == parsed.value.errors
        == {
            "sample_size": "must be at least 1 (got 0)",
            "bands": "must be at most 20 (got 21)",
        }
    )
    with pytest.raises(ParamsError, match="is_control"):
        CampaignSpec.from_dict({"name": "x", "is_control": True})


BAD_VALUES = [
    ("sample_size", "0", "must be at least 1 (got 0)"),
    ("sample_size", "abc", "'abc' is not a whole number"),
    ("sample_size", "100001", "must be at most 100000 (got 100001)"),
    ("bands", "1", "must be at least 2 (got 1)"),
    ("overlap", "11", "must be at most 10 (got 11)"),
    ("seed", "-1", "must be at least 0 (got -1)"),
    ("seed", "4294967296", "must be at most 2147483647 (got 4294967296)"),
    ("n_uncertain", "-3", "must be at least 0 (got -3)"),
    ("n_controls", "1.5", "'1.5' is not a whole number"),
    ("sampler", "random", "'random' is not one of: uniform, stratified, top, threshold, uncertain, kept"),
    ("threshold", "inf", "must be a finite number (got inf)"),
    ("name", "", "is required"),
    ("name", "n" * 201, "must be at most 200 characters long (got 201)"),
]


@pytest.fixture
def campaign_inputs(reviewer_user):
    run = make_run(4)
    return {"name": "same", "runs": [run.pk], "reviewers": [reviewer_user.pk], "sample_size": "3", "seed": "2"}


@pytest.mark.django_db
@pytest.mark.parametrize(("field", "value", "expected"), BAD_VALUES)
def test_the_form_and_the_api_give_the_same_message_for_the_same_bad_value(
    staff_client, staff_user, campaign_inputs, field, value, expected
):
    data = {**campaign_inputs, field: value}
    page = staff_client.post(reverse("campaign-new"), data)
    api = APIClient()
    api.force_authenticate(staff_user)
    response = api.post("/api/review/campaigns/", data, format="json")
    assert page.status_code == 400 and response.status_code == 400
    form_errors = page.context["form"].errors
    assert list(form_errors) == [field] and list(response.json()) == [field]
    with pytest.raises(ParamsError) as caught:
        CampaignSpec.from_dict({k: v for k, v in data.items() if k not in ("runs", "reviewers")})
    assert form_errors[field] == response.json()[field] == [caught.value.errors[field]] == [expected]
    assert not Campaign.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("field", "value", "run_field"),
    [("seed", "x", "seed"), ("seed", "-1", "seed"), ("seed", "2.5", "seed"), ("threshold", "abc", "threshold")],
)
def test_a_bad_campaign_value_gets_a_run_parameters_words_from_the_form_and_the_api(
    staff_client, staff_user, campaign_inputs, field, value, run_field
):
    """One framework: the campaign form, the campaigns API and a run's parameters (mining.params) word the same bad
    value alike."""
    from mining.params import SelfTrainParams, SentenceRunParams

    run_class = SelfTrainParams if run_field == "seed" else SentenceRunParams
    with pytest.raises(ParamsError) as run_error:
        run_class.from_dict({run_field: value})
    data = {**campaign_inputs, field: value}
    page = staff_client.post(reverse("campaign-new"), data)
    api = APIClient()
    api.force_authenticate(staff_user)
    response = api.post("/api/review/campaigns/", data, format="json")
    assert (page.status_code, response.status_code) == (400, 400)
    assert page.context["form"].errors[field] == response.json()[field] == [run_error.value.errors[run_field]]
    assert not Campaign.objects.exists()


@pytest.mark.django_db
def test_the_api_refuses_a_key_that_is_not_a_campaign_parameter_by_name(staff_user, campaign_inputs):
    api = APIClient()
    api.force_authenticate(staff_user)
    response = api.post("/api/review/campaigns/", {**campaign_inputs, "colour": "red"}, format="json")
    assert (response.status_code, response.json()) == (400, {"colour": ["is not a parameter of campaigns"]})
    assert not Campaign.objects.exists()


@pytest.mark.django_db
def test_around_the_threshold_defaults_to_each_runs_own_threshold(staff_client, staff_user, campaign_inputs):
    from mining.models import MiningRun

    data = {**campaign_inputs, "sampler": "threshold", "sample_size": "2"}
    # a run with no threshold of any kind: the form and the API say so, and nothing is created
    page = staff_client.post(reverse("campaign-new"), data)
    api = APIClient()
    api.force_authenticate(staff_user)
    response = api.post("/api/review/campaigns/", data, format="json")
    expected = f"run {data['runs'][0]} has no threshold to sample around"
    assert page.status_code == 400 and expected in page.content.decode()
    assert response.status_code == 400 and expected in response.json()["detail"]
    assert not Campaign.objects.exists()
    # with a label-free default in its stats, the items are the two scores nearest it (scores 1.5, 1.4, 1.3, 1.2)
    MiningRun.objects.filter(pk=data["runs"][0]).update(stats={"default_threshold": {"threshold": 1.33}})
    response = api.post("/api/review/campaigns/", data, format="json")
    assert response.status_code == 201, response.content
    scores = sorted(CampaignItem.objects.values_list("sentence_pair__score", flat=True))
    assert scores == pytest.approx([1.3, 1.4])


@pytest.mark.django_db
def test_the_api_reports_bad_rows_and_bad_parameters_together(staff_user, campaign_inputs):
    api = APIClient()
    api.force_authenticate(staff_user)
    body = api.post("/api/review/campaigns/", {**campaign_inputs, "runs": [], "bands": 99}, format="json").json()
    assert sorted(body) == ["bands", "runs"]
    assert body["bands"] == ["must be at most 20 (got 99)"]
    missing = api.post("/api/review/campaigns/", {"runs": campaign_inputs["runs"], "reviewers": []}, format="json")
    assert missing.json() == {"name": ["is required"]}


@pytest.mark.django_db
def test_the_form_and_the_api_create_the_same_campaign(staff_client, staff_user, campaign_inputs):
    api = APIClient()
    api.force_authenticate(staff_user)
    assert staff_client.post(reverse("campaign-new"), campaign_inputs).status_code == 302
    assert api.post("/api/review/campaigns/", campaign_inputs, format="json").status_code == 201
    fields = ["name", "sample_size", "sampler", "threshold", "n_uncertain", "bands", "seed", "overlap"]
    fields += ["n_controls", "blind", "guidelines", "created_by"]
    by_form, by_api = (
        Campaign.objects.filter(pk=pk).values(*fields).get()
        for pk in sorted(Campaign.objects.values_list("pk", flat=True))
    )
    assert (
        by_form
        == by_api
        == {
            "name": "same",
            "sample_size": 3,
            "sampler": "uniform",
            "threshold": None,
            "n_uncertain": 0,
            "bands": 5,
            "seed": 2,
            "overlap": 1,
            "n_controls": 0,
            "blind": False,
            "guidelines": DEFAULT_GUIDELINES,
            "created_by": staff_user.pk,
        }
    )
    items = [
        list(CampaignItem.objects.filter(campaign=c).values_list("sentence_pair_id", flat=True))
        for c in Campaign.objects.order_by("pk")
    ]
    assert items[0] == items[1] and len(items[0]) == 3


@pytest.mark.django_db
def test_the_form_preselects_the_runs_a_results_page_links_with(staff_client):
    run, other = make_run(3), make_run(3)
    html = staff_client.get(reverse("campaign-new"), {"runs": [run.pk]}).content.decode()
    checked = re.findall(r'name="runs" value="(\d+)" id="id_runs_\d+" checked', html)
    assert checked == [str(run.pk)] and str(other.pk) not in checked
    assert re.search(r'name="sample_size" value="200"', html)  # the spec's default
