"""Requests refused for their token (401, 403), counted per token so that a broken install
shows on the dashboard's tokens page the same day.

A refused request costs one cache increment (Redis in production, this process's memory
in the embedded default), never a database write: a gateway with a wrong token may retry
many times a minute. ``refusals_fold`` moves the counts into the tokens' rows when the
tokens page or the admin reads them. Only a token whose prefix is known can be counted:
a request with no token, or with a string that is no token of SessionHub's shape, is
nobody's refusal.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.cache import cache
from django.db.models import F
from django.utils import timezone

from .models import TOKEN_PREFIX, ApiToken

_COUNT_KEY = "shub:refused:{}"
_LAST_KEY = "shub:refused-at:{}"
_KEEP_SECONDS = 7 * 86400  # a count nobody folded in a week is dropped


def prefix_of(raw: str) -> str | None:
    """The display prefix of a token-shaped string (``shub_<8 hex>_<secret>``)."""
    if not raw.startswith(TOKEN_PREFIX):
        return None
    prefix, sep, secret = raw[len(TOKEN_PREFIX) :].partition("_")
    if not sep or not secret or len(prefix) != 8 or not prefix.isascii() or not prefix.isalnum():
        return None
    return prefix


def _presented_prefix(request: Any) -> str | None:
    user = getattr(request, "user", None)
    token = getattr(user, "token", None)
    if isinstance(token, ApiToken):
        return token.prefix  # authenticated, refused for its scope
    meta = getattr(request, "META", {})
    words = str(meta.get("HTTP_AUTHORIZATION", "")).split()
    return prefix_of(words[-1]) if words else None


def refusal_note(request: Any, status: int) -> None:
    """Count one refused request against the token it presented (if any)."""
    try:
        prefix = _presented_prefix(request)
    except Exception:  # noqa: BLE001 - an odd request must never turn a 401 into a 500
        return
    if prefix is None:
        return
    key = _COUNT_KEY.format(prefix)
    try:
        cache.add(key, 0, _KEEP_SECONDS)
        cache.incr(key)
        cache.set(_LAST_KEY.format(prefix), (timezone.now().isoformat(), status), _KEEP_SECONDS)
    except ValueError:  # the key expired between add and incr, or the cache is away
        pass


def refusals_fold(tokens: Iterable[ApiToken]) -> None:
    """Add the counts waiting in the cache to the tokens' rows (and to the objects given)."""
    tokens = list(tokens)
    if not tokens:
        return
    counts = cache.get_many([_COUNT_KEY.format(t.prefix) for t in tokens])
    lasts = cache.get_many([_LAST_KEY.format(t.prefix) for t in tokens])
    for token in tokens:
        key = _COUNT_KEY.format(token.prefix)
        waiting = int(counts.get(key) or 0)
        if waiting <= 0:
            continue
        try:
            cache.decr(key, waiting)  # what came in meanwhile stays for the next fold
        except ValueError:
            continue
        last = lasts.get(_LAST_KEY.format(token.prefix))
        changes: dict[str, Any] = {"refused_count": F("refused_count") + waiting}
        if last:
            changes["last_refused_at"] = last[0]
            changes["last_refused_status"] = int(last[1])
        ApiToken.objects.filter(pk=token.pk).update(**changes)
        token.refresh_from_db(fields=["refused_count", "last_refused_at", "last_refused_status"])
