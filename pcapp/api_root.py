"""The API's root (/api/): what lives under it, as links where an endpoint takes no id and as path templates where
it does, plus the schema and its browsable docs. The templates are paths, not absolute URLs, so that the browsable
API does not turn them into links (to `{id}`, a 404)."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .permissions import IsReviewer

# (name, URL name, description, answers GET); entries with an id are shown as templates below. An endpoint that
# answers GET is a full URL (the browsable API makes it a link); one that only takes POST is a path, shown as text,
# since following it as a link would end at "405 Method not allowed".
_LINKS = (
    ("corpora", "api-corpus-list", "corpora (GET)", True),
    ("corpus-import", "api-import-create", "import a corpus (POST, multipart)", False),
    ("runs", "api-run-list", "runs (GET) and start a run (POST)", True),
    ("judgements", "api-judgement-create", "judge an item or a pair (POST)", False),
    ("campaigns", "api-campaign-create", "create a campaign (POST)", False),
    ("schema", "api-schema", "OpenAPI schema", True),
    ("docs", "api-docs", "browsable docs (Swagger UI)", True),
)
_TEMPLATES = {
    "corpus": "corpora/{id}/",
    "import": "imports/{id}/",
    "run": "runs/{id}/",
    "run-cancel": "runs/{id}/cancel/",
    "run-retry": "runs/{id}/retry/",
    "run-histogram": "runs/{id}/histogram/",
    "run-candidates": "runs/{id}/candidates/",
    "run-export": "runs/{id}/export/",
    "run-exports": "runs/{id}/exports/",
    "campaign-results": "review/campaigns/{id}/results/",
    "campaign-labels": "review/campaigns/{id}/labels/",
}


class ApiRoot(APIView):
    """The endpoints of the pcapp API (reviewers and staff, like the schema)."""

    permission_classes = [IsReviewer]

    @extend_schema(exclude=True)
    def get(self, request: Request) -> Response:
        root = reverse("api-root")
        return Response(
            {
                "endpoints": {
                    name: {
                        "url": request.build_absolute_uri(reverse(url_name)) if get else reverse(url_name),
                        "what": what,
                    }
                    for name, url_name, what, get in _LINKS
                },
                "endpoints_with_an_id": {name: root + template for name, template in _TEMPLATES.items()},
                "ids": "replace {id} in a path above with an id from the lists (e.g. runs' `id`)",
                "authentication": "session, or 'Authorization: Token …' (./run manage drf_create_token USERNAME)",
            }
        )
