"""API tokens that expire (DRF's tokens, refused once older than PCAPP_TOKEN_DAYS; a new one: `./run manage
drf_create_token -r USERNAME`, which replaces the old), and the client address the login lockout counts by."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed


class ExpiringTokenAuthentication(TokenAuthentication):
    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        user, token = super().authenticate_credentials(key)
        if token.created < timezone.now() - timedelta(days=settings.PCAPP_TOKEN_DAYS):
            raise AuthenticationFailed(
                f"token expired ({settings.PCAPP_TOKEN_DAYS} days); make a new one: manage.py drf_create_token -r "
                f"{user.get_username()}"
            )
        return user, token


def client_ip(request: HttpRequest) -> str:
    """The client's address, for the login lockout (AXES_CLIENT_IP_CALLABLE): with PCAPP_PROXY_COUNT proxies in front
    (1 under `./run app`, whose Caddy replaces any X-Forwarded-For the client sent with the client's address), the
    entry the outermost of them added to X-Forwarded-For, the N-th from the right, as DRF's throttles read it; else
    REMOTE_ADDR. Behind a proxy on a Unix socket REMOTE_ADDR is empty for everyone, which would lock a user out for
    all."""
    n = settings.PCAPP_PROXY_COUNT
    if n:
        hops = [h.strip() for h in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if h.strip()]
        if hops:
            return hops[-min(n, len(hops))]
    return request.META.get("REMOTE_ADDR") or ""
