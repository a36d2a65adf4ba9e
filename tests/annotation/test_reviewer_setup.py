"""Setting up a reviewer on a fresh install: the group is there from the first migrate, the campaign form offers only
users who can review, the API refuses anyone else, and a user with no role is told what to do."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from pcapp.roles import REVIEWERS_GROUP, may_review, reviewers_group
from tests.factories.mining import make_run


@pytest.mark.django_db
def test_the_reviewers_group_exists_after_migrate_with_no_code_having_asked_for_it():
    assert list(Group.objects.values_list("name", flat=True)) == [REVIEWERS_GROUP]


@pytest.mark.django_db(transaction=True)
def test_the_group_comes_back_after_a_flush():
    Group.objects.all().delete()
    call_command("flush", "--noinput", verbosity=0)  # what a transactional test's teardown does
    assert Group.objects.filter(name=REVIEWERS_GROUP).count() == 1


@pytest.mark.django_db
def test_the_campaign_form_offers_only_staff_and_reviewers(staff_client, staff_user, django_user_model):
    rita = django_user_model.objects.create_user("rita", password="pw-rita-1234")
    rita.groups.add(reviewers_group())
    django_user_model.objects.create_user("plain", password="pw-plain-1234")
    django_user_model.objects.create_user("gone", password="pw-gone-1234", is_active=False, is_staff=True)
    assert [u.username for u in may_review()] == ["rita", "staff"]
    html = staff_client.get(reverse("campaign-new")).content.decode()
    assert "rita" in html and "plain" not in html and "gone" not in html
    assert "Groups → reviewers" in html  # how to add someone


@pytest.mark.django_db
def test_a_campaign_for_a_user_who_cannot_review_is_refused_by_form_and_api(staff_user, django_user_model):
    run = make_run(4)
    plain = django_user_model.objects.create_user("plain", password="pw-plain-1234")
    api = APIClient()
    api.force_authenticate(staff_user)
    answer = api.post("/api/review/campaigns/", {"name": "c", "runs": [run.pk], "reviewers": [plain.pk]}, format="json")
    assert answer.status_code == 400
    assert answer.json()["reviewers"] == ["not staff and not in the reviewers group, so they cannot review: plain"]
    from django.test import Client

    web = Client()
    web.force_login(staff_user)
    form = {"name": "c", "runs": [run.pk], "reviewers": [plain.pk], "sample_size": 2, "sampler": "uniform"}
    response = web.post(reverse("campaign-new"), form)
    assert response.status_code == 400
    assert "is not one of the available choices" in response.content.decode()


@pytest.mark.django_db
def test_a_user_with_no_role_is_told_whom_to_ask(client, other_user):
    client.force_login(other_user)
    response = client.get(reverse("campaign-list"))
    html = response.content.decode()
    assert response.status_code == 403
    assert "Your account (nobody) has no role yet" in html
    assert "Admin → Users → nobody → Groups → reviewers" in html
    assert 'href="/"' in html  # a way back


@pytest.mark.django_db
def test_a_reviewer_refused_a_staff_page_is_told_it_is_staff(reviewer_client):
    response = reviewer_client.get(reverse("campaign-new"))
    assert response.status_code == 403
    assert "This page is for staff" in response.content.decode()
