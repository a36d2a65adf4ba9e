"""What the OpenAPI schema says beyond each view's own annotations: the cursor-paginated envelope of list endpoints,
and the error answers every endpoint can give (issue 29: the schema must tell the truth)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

ERROR_SCHEMA = {
    "type": "object",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
    "description": "A refusal: not signed in, not allowed, not found, conflicting, too large, throttled, unavailable.",
}
VALIDATION_SCHEMA = {
    "type": "object",
    "additionalProperties": {
        "oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}, {"type": "object"}]
    },
    "description": "Bad input: each field named, with its messages ('non_field_errors' or 'detail' for the whole).",
}
# status -> (description, component): which errors which methods can give
ERRORS = {
    "400": ("Bad input (a field's message, a control character, a malformed body)", "ValidationError", None),
    "403": ("Not signed in, a token that expired, or not allowed for this role", "Error", None),
    "404": ("No such object (or a campaign that is not the user's)", "Error", None),
    "409": (
        "The object's state does not allow it (a stale or duplicate judgement, a run still running)",
        "Error",
        {"post", "delete"},
    ),  # fmt: skip
    "413": ("The request body is over the size allowed to this user on this path", "Error", {"post", "put", "patch"}),
    "429": ("Too many requests: the API's rate for this user or address is used up", "Error", None),
    "503": ("The job could not be handed to a worker (the broker is down); try again later", "Error", {"post"}),
}


def paginated(name: str, item: Any) -> serializers.Serializer:
    """The envelope CursorPagination answers with: next / previous page URLs and the page's `results`."""
    return inline_serializer(
        name=f"Paginated{name}List",
        fields={
            "next": serializers.URLField(allow_null=True, help_text="The next page (null on the last)."),
            "previous": serializers.URLField(allow_null=True, help_text="The previous page (null on the first)."),
            "results": item,
        },
    )


CONTROL_FREE = "^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f]*$"
"""The text the API accepts: no control character but tab, line feed and carriage return (pcapp.middleware)."""


def _control_free(schema: dict, schemas: dict, seen: set[str]) -> None:
    """Add CONTROL_FREE to every free-text string under `schema` (request side: *Request components)."""
    ref = schema.get("$ref", "")
    if ref:
        name = ref.rsplit("/", 1)[1]
        if name not in seen:
            seen.add(name)
            _control_free(schemas.get(name, {}), schemas, seen)
        return
    if schema.get("type") == "string" and "enum" not in schema and "format" not in schema:
        schema.setdefault("pattern", CONTROL_FREE)
    subs = [*schema.get("properties", {}).values(), *([schema["items"]] if "items" in schema else [])]
    for sub in subs:
        _control_free(sub, schemas, seen)
    for key in ("oneOf", "anyOf", "allOf"):
        for sub in schema.get(key, []):
            _control_free(sub, schemas, seen)


def document_errors(result: dict, generator: Any, request: Any, public: bool) -> dict:
    """drf-spectacular postprocessing hook: every operation lists the error answers it can give, as JSON, and the
    text it takes (query parameters, request bodies) says that control characters are refused."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["Error"], schemas["ValidationError"] = ERROR_SCHEMA, VALIDATION_SCHEMA
    seen: set[str] = set()
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                _control_free(parameter.get("schema", {}), schemas, seen)
            for media in operation.get("requestBody", {}).get("content", {}).values():
                _control_free(media.get("schema", {}), schemas, seen)
            responses = operation.setdefault("responses", {})
            for status, (description, component, methods) in ERRORS.items():
                if methods is not None and method not in methods:
                    continue
                content = {"application/json": {"schema": {"$ref": f"#/components/schemas/{component}"}}}
                current = responses.get(status)
                if current is None or not current.get("content"):
                    responses[status] = {
                        "description": (current or {}).get("description") or description,
                        "content": content,
                    }
    return result
