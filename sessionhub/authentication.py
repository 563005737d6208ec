"""Bearer-token authentication: one indexed lookup by prefix, a constant-time compare."""

from __future__ import annotations

import time

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from . import revocations
from .models import TOKEN_PREFIX, ApiToken, hash_token


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
    # The prefix goes into a query: only what ApiToken.generate makes (8 hex digits), so
    # a NUL or other junk is a 401, never a database error.
    if not sep or not secret or len(prefix) != 8 or not prefix.isascii() or not prefix.isalnum():
        return None
    return prefix


# A few seconds of memory per process spares the database a lookup on every gateway
# request. A revocation (by the API, the admin or a command) stops the token at once in
# every process: each cached token carries the revocation generation it was read under
# (sessionhub.revocations), and a token read under an older one is read again.
_token_cache: dict[str, tuple[float, int, ApiToken]] = {}
_TOKEN_CACHE_MAX = 10_000


def _cached_token(raw: str) -> ApiToken | None:
    key = hash_token(raw)
    entry = _token_cache.get(key)
    if entry is None or entry[0] < time.monotonic():
        return None
    if entry[1] != revocations.generation():
        _token_cache.pop(key, None)
        return None
    return entry[2]


def _remember(raw: str, token: ApiToken, generation: int) -> None:
    ttl = settings.SESSIONHUB["TOKEN_CACHE_SECONDS"]
    if ttl <= 0:
        return
    if len(_token_cache) >= _TOKEN_CACHE_MAX:
        _token_cache.clear()
    _token_cache[hash_token(raw)] = (time.monotonic() + ttl, generation, token)


def forget_token(token: ApiToken) -> None:
    """Drop a token from this process's cache and every other's (on revocation)."""
    for key, (_, _, cached) in list(_token_cache.items()):
        if cached.pk == token.pk:
            _token_cache.pop(key, None)
    revocations.announce()


def _authorization_header(request: Request) -> bytes:
    """The ``Authorization`` header as bytes, read from the WSGI environ: DRF's helper
    goes through ``request.headers``, which builds a mapping of every header on each
    request to read this one."""
    value = request.META.get("HTTP_AUTHORIZATION", b"")
    return value.encode("iso-8859-1") if isinstance(value, str) else value


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer shub_<prefix>_<secret>``."""

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[TokenUser, ApiToken] | None:
        header = _authorization_header(request).split()
        if not header:
            return None
        if header[0].lower() != self.keyword.lower().encode():
            if any(word.startswith(TOKEN_PREFIX.encode()) for word in header):
                # The commonest slip: the token alone, as if the header took it bare.
                raise exceptions.AuthenticationFailed(
                    "The Authorization header needs 'Bearer ' before the token: "
                    "'Authorization: Bearer shub_...'"
                )
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
        token = _cached_token(raw)
        if token is None:
            # The generation before the read: a revocation announced meanwhile makes
            # the cached copy stale at once.
            generation = revocations.current()
            token = ApiToken.objects.select_related("team").filter(prefix=prefix).first()
            if token is None or not token.matches(raw):
                if token is not None:
                    # A token of ours with a wrong secret: its refusal is counted against
                    # it (sessionhub.refusals); an unknown prefix is nobody's.
                    request._refused_token_prefix = prefix  # type: ignore[attr-defined]
                raise exceptions.AuthenticationFailed("Invalid token")
            _remember(raw, token, generation)
        if not token.is_active:
            request._refused_token_prefix = token.prefix  # type: ignore[attr-defined]
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


def token_event_seen(token: ApiToken) -> None:
    """Record that a token's events were stored, at most once per resolution window (the
    token object is this process's cached one, so a busy token writes once a minute)."""
    now = timezone.now()
    resolution = settings.SESSIONHUB["TOKEN_LAST_USED_RESOLUTION"]
    if token.last_event_at is None or now - token.last_event_at > resolution:
        ApiToken.objects.filter(pk=token.pk).update(last_event_at=now)
        token.last_event_at = now


_AUTHENTICATION = ApiTokenAuthentication()
# What a 401 answers in ``WWW-Authenticate``.
AUTHENTICATE_HEADER = ApiTokenAuthentication.keyword


def authenticate(request: HttpRequest | Request) -> TokenUser | None:
    """The caller a request's ``Authorization`` header names, by the API's own rules: None
    when it carries no bearer token, ``AuthenticationFailed`` for a token that is
    malformed, unknown or revoked. DRF views reach the same code as their authentication
    class; plain Django views (the ingest endpoints) call this."""
    found = _AUTHENTICATION.authenticate(request)  # type: ignore[arg-type]
    return None if found is None else found[0]


def caller(request: Request) -> TokenUser:
    """The token behind an API request that ``HasTokenScope`` let through.

    Views read the caller's team and token through this rather than ``request.user``,
    whose declared type (a user or an anonymous user) knows neither.
    """
    user = request.user
    if not isinstance(user, TokenUser):
        raise exceptions.NotAuthenticated()
    return user
