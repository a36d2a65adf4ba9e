"""The API's JSON parser: DRF's, refusing control characters in any string (a NUL would reach Postgres as an error)
with a 400 that names the field, as the pages do (pcapp.middleware.ControlCharacterMiddleware)."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ValidationError
from rest_framework.parsers import JSONParser

from .middleware import control_message


def _find(value: Any, path: str) -> tuple[str, str] | None:
    """(field path, reason) of the first string under `value` that holds a control character, keys included."""
    if isinstance(value, str):
        why = control_message(value)
        return (path or "body", why) if why else None
    if isinstance(value, dict):
        for key, item in value.items():
            name = f"{path}.{key}" if path else str(key)
            found = _find(str(key), name) or _find(item, name)
            if found:
                return found
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = _find(item, f"{path}[{i}]" if path else f"[{i}]")
            if found:
                return found
    return None


class StrictJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
        found = _find(data, "")
        if found:
            raise ValidationError({found[0]: [found[1]]})
        return data
