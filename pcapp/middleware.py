"""Request guards that run before any view reads the request: the body size allowed to whom, and control characters
in the URL, the query string and form fields (a NUL reaches Postgres as an error, so it is refused here with a 400
that names the field); and the answer while the database cannot be reached (503, not 500)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from csp.middleware import CSPMiddleware as BaseCSPMiddleware
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse

from .roles import is_staff
from .serve import SMALL_BODY_BYTES, UPLOAD_PATHS, max_upload_body

CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
"""C0 control characters and DEL, except tab, line feed and carriage return (text fields may hold those)."""
UPLOAD_PREFIXES = tuple(p.rstrip("*") for p in UPLOAD_PATHS)


def control_message(text: str) -> str | None:
    """Why `text` is refused (its first control character), or None."""
    found = CONTROL.search(text)
    return f"control character U+{ord(found.group()):04X} is not allowed" if found else None


def _refuse(request: HttpRequest, field: str, why: str, status: int = 400) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse({field: [why]}, status=status)
    return HttpResponse(f"{field}: {why}\n", status=status, content_type="text/plain; charset=utf-8")


def _token_user(request: HttpRequest):
    """The user of an `Authorization: Token ...` header (DRF authenticates in the view, after this middleware)."""
    from rest_framework.exceptions import AuthenticationFailed

    from .auth import ExpiringTokenAuthentication

    header = request.META.get("HTTP_AUTHORIZATION", "")
    if not header.startswith("Token "):
        return None
    try:
        found = ExpiringTokenAuthentication().authenticate_credentials(header.split(" ", 1)[1].strip())
    except AuthenticationFailed:
        return None
    return found[0]


class BodyLimitMiddleware:
    """Refuse a request body larger than SMALL_BODY_BYTES (from its Content-Length, unread: 413) unless the sender is
    staff on the upload paths, and anything above the upload limit. The proxy in front (pcapp/serve.py) does the same
    per path; this holds for servers started without it, and is the only place that knows who is staff."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return _refuse(request, "Content-Length", "not a number")
        if length > SMALL_BODY_BYTES:
            upload = request.path.startswith(UPLOAD_PREFIXES)
            token_user = _token_user(request) if upload else None
            staff = upload and (is_staff(request.user) or (token_user is not None and is_staff(token_user)))
            if length > max_upload_body() or not staff:
                limit = max_upload_body() if staff else SMALL_BODY_BYTES
                return _refuse(request, "body", f"{length} bytes is over the limit of {limit} bytes", 413)
        return self.get_response(request)


def _fields(request: HttpRequest) -> Iterable[tuple[str, str]]:
    yield "URL path", request.path
    for key, values in request.GET.lists():
        yield key, key
        for v in values:
            yield key, v
    # Forms, but not on the upload paths: their views install their own upload handlers before the body is parsed,
    # and their text fields are Django form fields, which refuse NUL themselves.
    form = request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data")
    if request.method == "POST" and form and not request.path.startswith(UPLOAD_PREFIXES):
        for key, values in request.POST.lists():
            yield key, key
            for v in values:
                yield key, v


class ControlCharacterMiddleware:
    """400 naming the field when the URL path, a query parameter or a url-encoded form field holds a control
    character (JSON bodies: pcapp.parsers.StrictJSONParser)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        for field, value in _fields(request):
            why = control_message(value)
            if why:
                return _refuse(request, field, why)
        return self.get_response(request)


class CSPMiddleware(BaseCSPMiddleware):
    """django-csp's middleware, with one exception to the policy: the API's HTML pages (DRF's browsable API and
    Swagger UI, third-party templates that set inline styles) may apply inline styles. Scripts stay the app's own
    files everywhere; pcapp's own pages need no exception."""

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if request.path.startswith("/api/") and response.get("Content-Type", "").startswith("text/html"):
            response._csp_update = {"style-src": ["'unsafe-inline'"]}  # type: ignore[attr-defined]
        return super().process_response(request, response)


DATABASE_DOWN = "the database cannot be reached (it is restarting, or down): nothing was done; try again in a minute"


def database_unavailable(request: HttpRequest, exc: BaseException | None) -> HttpResponse | None:
    """503 with Retry-After when `exc` says the database cannot be reached (JSON under /api/, a short page
    elsewhere, rendered without the database); None for any other error (a deadlock is not an outage)."""
    # deadlock_detected, serialization_failure (pcapp.dbretry): the database answered; that is a 500
    if not isinstance(exc, OperationalError | InterfaceError) or getattr(exc.__cause__, "sqlstate", "") in (
        "40P01",
        "40001",
    ):
        return None
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse({"detail": DATABASE_DOWN}, status=503)
    else:
        response = HttpResponse(
            f"<!doctype html><title>Service unavailable</title><h1>Service unavailable</h1><p>The {DATABASE_DOWN}.</p>",
            status=503,
        )
    response["Retry-After"] = "30"
    return response


class DatabaseUnavailableMiddleware:
    """503, not 500, from a view (page or API) that found the database away; the handler500 of pcapp.urls does the
    same for errors raised outside views (another middleware's query)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return database_unavailable(request, exception)
