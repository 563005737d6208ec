"""Bearer-token authentication: one indexed lookup by prefix, a constant-time compare."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from .models import TOKEN_PREFIX, ApiToken


class TokenUser:
    """The caller of an API request made with a token: knows its team and scopes."""

    is_authenticated = True
    is_anonymous = False
    is_staff = False

    def __init__(self, token: ApiToken) -> None:
        self.token = token
        self.team = token.team

    def __str__(self) -> str:
        return f"token:{self.token.prefix}"

    @property
    def pk(self) -> None:  # DRF's throttles and logging look for it
        return None


def _prefix_of(raw: str) -> str | None:
    if not raw.startswith(TOKEN_PREFIX):
        return None
    rest = raw[len(TOKEN_PREFIX) :]
    prefix, sep, secret = rest.partition("_")
    if not sep or not secret or len(prefix) != 8:
        return None
    return prefix


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer shub_<prefix>_<secret>``."""

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[TokenUser, ApiToken] | None:
        header = authentication.get_authorization_header(request).split()
        if not header:
            return None
        if header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Malformed Authorization header")
        try:
            raw = header[1].decode("ascii")
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed("Invalid token") from exc
        prefix = _prefix_of(raw)
        if prefix is None:
            raise exceptions.AuthenticationFailed("Invalid token")
        token = ApiToken.objects.select_related("team").filter(prefix=prefix).first()
        if token is None or not token.matches(raw):
            raise exceptions.AuthenticationFailed("Invalid token")
        if not token.is_active:
            raise exceptions.AuthenticationFailed("Token revoked")
        self._touch(token)
        return TokenUser(token), token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword

    @staticmethod
    def _touch(token: ApiToken) -> None:
        """Record use at most once per resolution window: no write on every request."""
        now = timezone.now()
        resolution = settings.SESSIONHUB["TOKEN_LAST_USED_RESOLUTION"]
        if token.last_used_at is None or now - token.last_used_at > resolution:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
            token.last_used_at = now
