"""Issue 29's smaller list: control characters answer 400 naming the field, large bodies from anyone but staff 413
unread, failed logins lock out, API throttles, tokens expire, CSV cells cannot be formulas, a zip of too many files
is refused from its directory and unpacked by the import task, `check --deploy` is clean behind HTTPS."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.models import Campaign
from annotation.services import item_claim, label_submit
from annotation.spec import CampaignSpec
from pcapp.serve import SMALL_BODY_BYTES
from tests.factories.mining import make_run

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fresh_counters():
    cache.clear()  # throttle counts live in the cache
    yield
    cache.clear()


# --- control characters --------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_nul_in_the_campaign_form_is_a_400_naming_the_field(staff_client, staff_user):
    run = make_run(4)
    before = Campaign.objects.count()
    data = {"name": "A\x00B", "runs": [run.pk], "reviewers": [staff_user.pk], "sample_size": 2}
    response = staff_client.post(reverse("campaign-new"), data)
    assert response.status_code == 400
    assert response.content.decode() == "name: control character U+0000 is not allowed\n"
    data = {**data, "name": "fine", "guidelines": "judge\x07this"}
    response = staff_client.post(reverse("campaign-new"), data)
    assert (response.status_code, response.content.decode()) == (
        400,
        "guidelines: control character U+0007 is not allowed\n",
    )
    assert Campaign.objects.count() == before  # nothing stored


@pytest.mark.django_db
def test_nul_in_the_campaign_api_is_a_400_naming_the_field(staff_user, reviewer_user):
    api = APIClient()
    api.force_authenticate(staff_user)
    run = make_run(4)
    body = {"name": "ok", "runs": [run.pk], "reviewers": [reviewer_user.pk], "guidelines": "a\x00b"}
    response = api.post("/api/review/campaigns/", body, format="json")
    assert response.status_code == 400 and response.json() == {
        "guidelines": ["control character U+0000 is not allowed"]
    }
    nested = api.post("/api/review/judgements/", {"verdict": "GOOD", "reasons": ["partial\x00"]}, format="json")
    assert nested.status_code == 400 and nested.json() == {"reasons[0]": ["control character U+0000 is not allowed"]}
    assert Campaign.objects.count() == 0
    # Tabs and newlines are text, not control characters to refuse.
    ok = api.post("/api/review/campaigns/", {**body, "guidelines": "line one\n\tline two"}, format="json")
    assert ok.status_code == 201, ok.content


@pytest.mark.django_db
def test_nul_in_the_calibration_url_and_in_a_query_is_a_400(staff_client):
    response = staff_client.get("/calibration/en%00-fr/")
    assert (response.status_code, response.content.decode()) == (
        400,
        "URL path: control character U+0000 is not allowed\n",
    )
    response = staff_client.get(reverse("run-list"), {"q": "x\x00"})
    assert (response.status_code, response.content.decode()) == (400, "q: control character U+0000 is not allowed\n")
    api = staff_client.get("/api/runs/", {"cursor": "\x00"})
    assert api.status_code == 400 and api.json() == {"cursor": ["control character U+0000 is not allowed"]}


# --- bodies ----------------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_large_body_is_refused_unread_unless_staff_uploads(client, reviewer_client, staff_user):
    big = str(SMALL_BODY_BYTES + 1)
    anonymous = client.post("/accounts/login/", data=b"", content_type="text/plain", CONTENT_LENGTH=big)
    assert anonymous.status_code == 413
    reviewer = reviewer_client.post(reverse("import-start"), data=b"", content_type="text/plain", CONTENT_LENGTH=big)
    assert reviewer.status_code == 413
    staff = APIClient()
    staff.force_login(staff_user)
    allowed = staff.post(reverse("import-start"), data=b"", content_type="text/plain", CONTENT_LENGTH=big)
    assert allowed.status_code != 413  # staff may upload; the upload view answers (here: a form without files)
    too_big = staff.post(reverse("import-start"), data=b"", content_type="text/plain", CONTENT_LENGTH=str(2**40))
    assert too_big.status_code == 413
    elsewhere = staff.post(reverse("campaign-new"), data=b"", content_type="text/plain", CONTENT_LENGTH=big)
    assert elsewhere.status_code == 413  # staff too: only the upload paths take large bodies


# --- logins, throttles, tokens ---------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_failed_logins_lock_that_user_out_from_that_address(client, reviewer_user, settings):
    url = reverse("login")
    tries = [client.post(url, {"username": "reviewer", "password": "wrong"}).status_code for _ in range(5)]
    assert settings.AXES_FAILURE_LIMIT == 5 and tries == [200, 200, 200, 200, 429]  # the form again, then locked
    locked = client.post(url, {"username": "reviewer", "password": "pw-reviewer-123"})
    assert locked.status_code == 429  # the right password no longer gets in from here
    elsewhere = client.post(url, {"username": "reviewer", "password": "pw-reviewer-123"}, REMOTE_ADDR="10.9.8.7")
    assert elsewhere.status_code == 302  # from another address the user still logs in


@pytest.mark.django_db
def test_behind_the_proxy_the_lockout_counts_by_the_forwarded_address(client, reviewer_user, settings):
    """Under ./run app the app sits behind Caddy on a Unix socket: REMOTE_ADDR is empty for everyone, and the client
    is the address Caddy put in X-Forwarded-For. A locked-out attacker must not lock the user out for all."""
    settings.PCAPP_PROXY_COUNT = 1
    url, attacker = reverse("login"), {"REMOTE_ADDR": "", "HTTP_X_FORWARDED_FOR": "203.0.113.9"}
    for _ in range(5):
        client.post(url, {"username": "reviewer", "password": "wrong"}, **attacker)
    assert client.post(url, {"username": "reviewer", "password": "pw-reviewer-123"}, **attacker).status_code == 429
    user = {"REMOTE_ADDR": "", "HTTP_X_FORWARDED_FOR": "198.51.100.7"}
    assert client.post(url, {"username": "reviewer", "password": "pw-reviewer-123"}, **user).status_code == 302


@pytest.mark.django_db
def test_api_requests_are_throttled_per_user(reviewer_user, monkeypatch):
    from rest_framework.throttling import SimpleRateThrottle

    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", {"anon": "2/min", "user": "3/min"})
    api = APIClient()
    api.force_authenticate(reviewer_user)
    assert [api.get("/api/runs/").status_code for _ in range(4)] == [200, 200, 200, 429]


@pytest.mark.django_db
def test_api_tokens_expire(reviewer_user, settings):
    from rest_framework.authtoken.models import Token

    token = Token.objects.create(user=reviewer_user)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert api.get("/api/runs/").status_code == 200
    Token.objects.filter(pk=token.pk).update(created=timezone.now() - timedelta(days=settings.PCAPP_TOKEN_DAYS + 1))
    expired = api.get("/api/runs/")
    assert expired.status_code == 403 and "token expired" in expired.json()["detail"]


# --- exports and uploads ---------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_label_csv_cells_cannot_be_formulas(staff_client, staff_user):
    from annotation.services import campaign_create

    campaign = campaign_create(
        spec=CampaignSpec(name="csv", sample_size=3, seed=1), runs=[make_run(3)], reviewers=[staff_user]
    )
    comments = ['=HYPERLINK("http://x","y")', "+1+1", "-2", "@SUM(A1)", "plain"]
    for comment in comments[:3]:
        item, _ = item_claim(campaign=campaign, reviewer=staff_user)
        label_submit(campaign=campaign, reviewer=staff_user, item_id=item.pk, verdict="GOOD", comment=comment)
    body = b"".join(staff_client.get(reverse("campaign-labels", args=[campaign.pk, "csv"])).streaming_content)
    import csv

    rows = list(csv.DictReader(io.StringIO(body.decode())))
    assert sorted(r["comment"] for r in rows) == sorted("'" + c for c in comments[:3])
    jsonl = b"".join(staff_client.get(reverse("campaign-labels", args=[campaign.pk, "jsonl"])).streaming_content)
    assert '=HYPERLINK(\\"http://x\\",\\"y\\")' in jsonl.decode()  # the JSON export keeps the text as written


def _zip(members: int) -> io.BytesIO:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for i in range(members):
            zf.writestr(f"en/doc{i}.txt", f"Sentence number {i}.\n" if i < 3 else "")
    buf.seek(0)
    return buf


@pytest.mark.django_db
def test_a_zip_of_too_many_files_is_refused_from_its_directory(staff_client, settings):
    from mining.models import ImportJob

    settings.PCAPP_MAX_ZIP_MEMBERS = 50
    upload = _zip(51)
    upload.name = "many.zip"
    response = staff_client.post(reverse("import-start"), {"name": "many", "format": "folder", "files": upload})
    assert response.status_code == 400
    assert "holds 51 files, over the limit of 50 (PCAPP_MAX_ZIP_MEMBERS)" in response.content.decode(), response.content
    assert ImportJob.objects.count() == 0


@pytest.mark.django_db
def test_a_folder_zip_is_unpacked_by_the_import_task_not_the_request(staff_client, django_capture_on_commit_callbacks):
    from mining.models import ImportJob, Sentence

    upload = _zip(3)
    upload.name = "docs.zip"
    with django_capture_on_commit_callbacks(execute=False):  # the task is not run: see what the request left
        response = staff_client.post(reverse("import-start"), {"name": "docs", "format": "folder", "files": upload})
    assert response.status_code == 302
    job = ImportJob.objects.get()
    (path,) = job.paths
    assert zipfile.is_zipfile(path) and not (Path(path).parent / "folder").exists()  # still packed
    from mining.services.imports import import_execute

    import_execute(job=job)
    job.refresh_from_db()
    assert job.status == "succeeded", job.error
    assert Sentence.objects.filter(corpus__name="docs").count() == 3


# --- deployment --------------------------------------------------------------------------------------------------


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("PYTEST_VERSION", "SECRET_KEY", "DEBUG")}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, "DEBUG": "false", **env},
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_check_deploy_is_clean_behind_https():
    key = "k3y-" + "x7Qz" * 16
    result = _manage(
        "check", "--deploy", "--fail-level", "WARNING", SECRET_KEY=key, PCAPP_HTTPS="true", ALLOWED_HOSTS="a.example"
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert "System check identified no issues" in result.stdout


def test_a_short_secret_key_is_refused_with_debug_off():
    result = _manage("check", SECRET_KEY="short")
    assert result.returncode != 0 and "SECRET_KEY is 5 characters long" in result.stderr
