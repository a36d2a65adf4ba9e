"""Malformed, missing and out-of-range fields on the review pages and the review API get a 4xx with a message, never a
500, and store nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Campaign, Label

BIG = 10**20  # beyond a 64-bit id


@pytest.fixture
def reviewer_api(reviewer_user) -> APIClient:
    api = APIClient()
    api.force_authenticate(reviewer_user)
    return api


@pytest.fixture
def staff_api(staff_user) -> APIClient:
    api = APIClient()
    api.force_authenticate(staff_user)
    return api


@pytest.mark.django_db
def test_pages_answer_out_of_range_ids_with_404_or_a_form_error(reviewer_client):
    assert reviewer_client.get(reverse("campaign-review", args=[BIG])).status_code == 404
    assert (
        reviewer_client.post(reverse("campaign-label", args=[BIG]), {"item": 1, "verdict": "GOOD"}).status_code == 404
    )
    assert reviewer_client.post(reverse("campaign-undo", args=[BIG])).status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field", "text"),
    [
        ({"campaign": BIG, "item": 1, "verdict": "GOOD"}, "campaign", "less than or equal to"),
        ({"campaign": 1, "verdict": "GOOD"}, "item", "a judgement in a campaign names its item"),
        ({"campaign": 1, "item": 1, "verdict": "MAYBE"}, "verdict", "not a valid choice"),
        ({"campaign": 1, "item": 1, "verdict": "GOOD", "seconds": -1}, "seconds", "greater than or equal to 0"),
        ({"campaign": 1, "item": 1, "verdict": "GOOD", "comment": "x" * 2001}, "comment", "no more than 2000"),
        ({"campaign": 1, "item": 1, "sentence_pair": 2, "verdict": "GOOD"}, "non_field_errors", "not a pair"),
    ],
)
def test_the_judgement_api_refuses_malformed_fields_with_a_message(reviewer_api, body, field, text):
    response = reviewer_api.post("/api/review/judgements/", body, format="json")
    assert response.status_code == 400
    assert text in response.json()[field][0]
    assert Label.objects.count() == 0


@pytest.mark.django_db
def test_staff_judgements_of_missing_pairs_and_non_objects_are_refused(staff_api):
    missing = staff_api.post("/api/review/judgements/", {"sentence_pair": 12345, "verdict": "GOOD"}, format="json")
    assert (missing.status_code, missing.json()) == (404, {"detail": "no such sentence pair: 12345"})
    both = staff_api.post("/api/review/judgements/", {"verdict": "GOOD"}, format="json")
    assert (both.status_code, both.json()) == (400, {"detail": "judge either a sentence pair or a document pair"})
    assert staff_api.post("/api/review/judgements/", [1, "verdict"], format="json").status_code == 400
    listed = staff_api.post("/api/review/campaigns/", ["name", "runs"], format="json")
    assert listed.status_code == 400 and "Expected a dictionary" in listed.json()["non_field_errors"][0]
    assert Label.objects.count() == 0 and Campaign.objects.count() == 0
