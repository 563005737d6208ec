"""The Redis cache keeps one client per connection pool (Django builds one per call)."""

from __future__ import annotations

import pytest
from django.core.cache import caches

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
