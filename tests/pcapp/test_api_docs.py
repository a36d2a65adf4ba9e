"""The API schema and its Swagger page are served to signed-in users only, from the app's own files (offline)."""

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_schema_and_docs_need_a_login(reviewer_client) -> None:
    anonymous = Client()
    assert anonymous.get("/api/schema/").status_code in (401, 403)
    assert anonymous.get("/api/docs/").status_code in (401, 403)
    schema = reviewer_client.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/runs/" in schema.content
    docs = reviewer_client.get("/api/docs/").content.decode()
    assert "swagger-ui" in docs and "cdn" not in docs.lower()


def test_the_api_pages_link_back_to_the_app_and_link_no_id_template(staff_client) -> None:
    import re

    root = staff_client.get("/api/", HTTP_ACCEPT="application/json").json()
    templates = root["endpoints_with_an_id"]
    assert templates["run"] == "/api/runs/{id}/" and all(t.startswith("/api/") for t in templates.values())
    assert root["endpoints"]["runs"]["url"] == "http://testserver/api/runs/"  # answers GET: a link
    assert root["endpoints"]["campaigns"]["url"] == "/api/review/campaigns/"  # POST only: text, not a link to a 405
    html = staff_client.get("/api/", HTTP_ACCEPT="text/html").content.decode()
    assert 'id="back-to-app" href="/"' in html
    hrefs = re.findall(r'href="([^"]*)"', html)
    assert not [h for h in hrefs if "{id}" in h or "%7Bid%7D" in h]  # a template is text, not a link to a 404
    assert "http://testserver/api/runs/" in hrefs or "/api/runs/" in " ".join(hrefs)  # real endpoints stay links
    docs = staff_client.get("/api/docs/").content.decode()
    assert 'id="back-to-app" href="/"' in docs
