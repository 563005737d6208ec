"""The Redis cache keeps one client per connection pool (Django builds one per call), and
caches that close nothing are not closed after every request."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import caches, close_caches
from django.core.cache.backends.locmem import LocMemCache
from django.core.signals import request_finished

from sessionhub.apps import _close_caches_only_when_they_close
from sessionhub.cache import ResilientRedisCache


def test_cache_calls_share_one_redis_client_and_still_round_trip() -> None:
    default = caches["default"]
    if not isinstance(default, ResilientRedisCache):
        pytest.skip("the cache is Redis only when REDIS_URL is set (the PostgreSQL leg)")
    client = default._cache.get_client()
    assert default._cache.get_client() is client
    assert default._cache.get_client(write=True) is client  # one server: one pool
    default.set("shared-client-probe", {"n": 1}, 30)
    assert default.get("shared-client-probe") == {"n": 1}
    assert default._cache.get_client() is client
    default.delete("shared-client-probe")
    assert default.get("shared-client-probe") is None


class ClosingCache(LocMemCache):
    """A backend with a ``close`` of its own (a client that holds a connection per request)."""

    closed = 0

    def close(self, **kwargs: Any) -> None:
        ClosingCache.closed += 1


def _connected() -> bool:
    """Whether ``close_caches`` runs after each request (probed by taking it off)."""
    was = request_finished.disconnect(close_caches)
    if was:
        request_finished.connect(close_caches)
    return was


def test_caches_whose_close_does_nothing_are_not_closed_after_each_request(
    settings: Any, db: Any
) -> None:
    # The project's backends (Redis or, without it, local memory) close nothing.
    assert not _connected()
    try:
        request_finished.connect(close_caches)
        _close_caches_only_when_they_close()
        assert not _connected()
        # A backend that does close something keeps Django's receiver, and is closed.
        settings.CACHES = {
            **settings.CACHES,
            "closing": {"BACKEND": f"{__name__}.ClosingCache", "LOCATION": "closing"},
        }
        request_finished.connect(close_caches)
        _close_caches_only_when_they_close()
        assert _connected()
        caches["closing"].get("x")
        before = ClosingCache.closed
        # The end of a request, as the handler signals it (its receivers may touch the
        # database connection: hence the db fixture).
        request_finished.send(sender=None)
        assert ClosingCache.closed == before + 1
    finally:
        request_finished.disconnect(close_caches)
