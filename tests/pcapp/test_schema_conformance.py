"""The live API schema against the API (schemathesis, a bounded number of generated requests per operation, as
staff with a token): no server error, and every answer is documented (status, content type, body schema)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks
from schemathesis.specs.openapi import checks as openapi_checks

from pcapp.wsgi import application

EXAMPLES = 8
"""Generated requests per operation: enough to try every operation's bad and odd inputs, small enough for a fast
suite (the whole schema in well under a minute)."""


def _served_schema() -> dict:
    """The schema /api/schema/ serves (the same generator; the endpoint itself wants a signed-in reviewer)."""
    import json

    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    return json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True)))


schema = schemathesis.openapi.from_dict(_served_schema())
schema.app = application
CHECKS = [
    checks.not_a_server_error,
    openapi_checks.status_code_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.response_schema_conformance,
]


@pytest.fixture
def token(django_user_model, monkeypatch) -> Iterator[str]:
    """A staff token; the app called through WSGI keeps the test's database connection (as Django's test client
    does: no closing of connections at each request's start and end), and the throttles are out of the way."""
    from django.core import signals
    from django.db import close_old_connections
    from rest_framework.authtoken.models import Token
    from rest_framework.throttling import SimpleRateThrottle

    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", {"anon": "100000/min", "user": "100000/min"})
    staff = django_user_model.objects.create_user("schema-staff", is_staff=True)
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield Token.objects.create(user=staff).key
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@pytest.mark.django_db
@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_the_api_answers_as_its_schema_says(case, token):
    case.call_and_validate(headers={"Authorization": f"Token {token}"}, checks=CHECKS)
