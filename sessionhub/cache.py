"""The Redis cache, made harmless when Redis is hung or down.

The cache only saves work (dashboard lists, nothing the data depends on), so an outage
turns into misses: reads give their default, writes are skipped. The first failure opens
the server's circuit breaker (:mod:`sessionhub.resilience`); after it no call waits on
the network until a background probe finds Redis back.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient

from .resilience import breaker_for, throttled


def _guarded(name: str, on_outage: Callable[..., Any]) -> Callable[..., Any]:
    method = getattr(RedisCache, name)

    @functools.wraps(method)
    def call(self: ResilientRedisCache, *args: Any, **kwargs: Any) -> Any:
        breaker = self.breaker
        if breaker.available:
            try:
                return method(self, *args, **kwargs)
            except ValueError:
                raise  # incr/decr of a missing key: the caller's business
            except Exception as exc:  # noqa: BLE001 - any Redis failure is a miss
                breaker.failed(exc)
        throttled.warning("cache", "cache unavailable: Redis at %s; serving misses", breaker.name)
        return on_outage(*args, **kwargs)

    return call


def _default(key: Any, default: Any = None, *args: Any, **kwargs: Any) -> Any:
    return default


def _incr(key: Any, delta: int = 1, version: Any = None) -> int:
    raise ValueError(f"Key '{key}' not found (cache unavailable)")


class ReusedClientsRedisCacheClient(RedisCacheClient):
    """Django's Redis cache client, keeping one ``redis.Redis`` per connection pool.

    Django builds a new ``redis.Redis`` for every cache call, and building one fills its
    table of reply callbacks (a few hundred entries): on a gateway request, whose only
    cache call is one ``GET`` (the token revocation mark), that cost more than the round
    trip itself. A client over a pool is safe to share between threads, and its pool
    starts afresh in a forked process.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        # Both attributes are Django's own (as its get_client uses them), absent from
        # django-stubs.
        pool = self._get_connection_pool(write)  # type: ignore[attr-defined]
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)  # type: ignore[attr-defined]
        return client


class ResilientRedisCache(RedisCache):
    """Django's Redis cache; an outage costs a miss, never an exception or a wait."""

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = ReusedClientsRedisCacheClient
        # The first server is the one written to (Django's own split of the location).
        self.breaker = breaker_for(re.split("[;,]", server)[0])

    get = _guarded("get", _default)
    get_many = _guarded("get_many", lambda *a, **k: {})
    has_key = _guarded("has_key", lambda *a, **k: False)
    set = _guarded("set", lambda *a, **k: None)
    add = _guarded("add", lambda *a, **k: False)
    touch = _guarded("touch", lambda *a, **k: False)
    set_many = _guarded("set_many", lambda data, *a, **k: list(data))
    delete = _guarded("delete", lambda *a, **k: False)
    delete_many = _guarded("delete_many", lambda *a, **k: None)
    incr = _guarded("incr", _incr)
    decr = _guarded("decr", _incr)
    clear = _guarded("clear", lambda *a, **k: False)
