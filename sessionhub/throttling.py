"""Per-token rate limits: a fixed-window counter in Redis, counted per process while
Redis is away.

DRF's stock throttle keeps every request's timestamp in one cache value, which costs a
large read and write per request at gateway rates; a counter per window costs one
increment. When Redis is hung or down (or its circuit breaker is open) each process
counts the window itself: a token stays limited, to at most the limit per process.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, cast

import redis
from django.conf import settings
from django.core.cache import cache
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from .authentication import TokenUser
from .resilience import breaker_for, redis_timeouts, throttled

logger = logging.getLogger(__name__)

_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """``"600/min"`` → (600, 60)."""
    count, _, period = rate.partition("/")
    return int(count), _PERIODS[period.strip()[0]]


_redis_clients: dict[str, Any] = {}


def _redis_url() -> str:
    return settings.CACHES["default"].get("LOCATION") or settings.REDIS_URL


def _count(key: str, ttl: int) -> int:
    """Add one to a window's counter and return it: one round trip to Redis."""
    if settings.REDIS_URL:
        url = _redis_url()
        client = _redis_clients.get(url)
        if client is None:
            client = _redis_clients[url] = redis.Redis.from_url(url, **redis_timeouts())
        key = f"{settings.CACHES['default'].get('KEY_PREFIX', '')}:{key}"
        pipe = client.pipeline(transaction=False)
        pipe.incr(key)
        pipe.expire(key, ttl, nx=True)
        return int(pipe.execute()[0])
    try:
        return cache.incr(key)
    except ValueError:
        cache.add(key, 0, timeout=ttl)
        return cache.incr(key)


class LocalWindows:
    """The same fixed-window counters in this process's memory, for while Redis is away."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._window: int | None = None
        self._counts: dict[str, int] = {}

    def count(self, key: str, window: int) -> int:
        with self._lock:
            if window != self._window:  # a new window: the old counts are of no use
                self._window = window
                self._counts.clear()
            self._counts[key] = self._counts.get(key, 0) + 1
            return self._counts[key]


_local = LocalWindows()


class TokenRateThrottle(BaseThrottle):
    """``API_RATE_LIMIT`` requests per token and window; DRF adds ``Retry-After``."""

    scope = "token"

    def __init__(self) -> None:
        rates = cast(dict[str, str], settings.REST_FRAMEWORK.get("DEFAULT_THROTTLE_RATES", {}))
        self.limit, self.period = parse_rate(rates.get(self.scope, "6000/min"))
        self._wait: float | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        user = request.user
        ident = user.token.pk if isinstance(user, TokenUser) else self.get_ident(request)
        now = time.time()
        window = int(now // self.period)
        key = f"throttle:{self.scope}:{ident}:{window}"
        count = self._count(key, window)
        if count > self.limit:
            self._wait = max(1.0, (window + 1) * self.period - now)
            return False
        return True

    def _count(self, key: str, window: int) -> int:
        if not settings.REDIS_URL:
            return _count(key, self.period + 1)
        breaker = breaker_for(_redis_url())
        if breaker.available:
            try:
                return _count(key, self.period + 1)
            except Exception as exc:  # noqa: BLE001 - an outage must not turn into a 500
                breaker.failed(exc)
        throttled.warning(
            "rate-limit",
            "rate limiter: Redis at %s unavailable; counting per process",
            breaker.name,
        )
        return _local.count(key, window)

    def wait(self) -> float | None:
        return self._wait
