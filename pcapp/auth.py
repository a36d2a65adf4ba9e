"""API tokens that expire: DRF's tokens, refused once older than PCAPP_TOKEN_DAYS (a new one: `./run manage
drf_create_token -r USERNAME`, which replaces the old)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
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
