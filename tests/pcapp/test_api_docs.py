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
