"""Requests refused for their token (401, 403), counted per token so that a broken install
shows on the dashboard's tokens page the same day.

A refused request costs one cache increment (Redis in production, this process's memory
in the embedded default), never a database write: a gateway with a wrong token may retry
many times a minute. ``refusals_fold`` moves the counts into the tokens' rows when the
tokens page or the admin reads them. Only a token SessionHub has can be counted (a known
prefix with a wrong secret, a revoked token, a token without the scope): a request with
no token, or with a prefix no token has, is nobody's refusal and leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.cache import cache
from django.db.models import F
from django.utils import timezone

from .models import ApiToken

_COUNT_KEY = "shub:refused:{}"
_LAST_KEY = "shub:refused-at:{}"
_KEEP_SECONDS = 7 * 86400  # a count nobody folded in a week is dropped


def _presented_prefix(request: Any) -> str | None:
    """The prefix of the token a refused request presented, when it is one of ours:
    authentication marks a known token with a wrong secret or revoked; a token refused
    for its scope is the request's user's. Never ``request.user`` of a request whose
    authentication failed (DRF would try to authenticate it again)."""
    marked = getattr(request, "_refused_token_prefix", None)
    if isinstance(marked, str):
        return marked
    user = getattr(request, "_user", None)
    token = getattr(user, "token", None)
    if isinstance(token, ApiToken):
        return token.prefix  # authenticated, refused for its scope
    return None


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
