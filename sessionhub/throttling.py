"""Per-token rate limits: a fixed-window counter in Redis, which each process adds to in
steps, counted per process while Redis is away.

DRF's stock throttle keeps every request's timestamp in one cache value, which costs a
large read and write per request at gateway rates; a counter per window costs one
increment. Even that is a round trip per request on the hot path, so each process counts
a token's requests itself and adds them to the shared counter in one INCRBY now and then
(:class:`SyncedWindows`): at least every ``SYNC_SECONDS``, and the more often the closer
the shared count is to the limit, so that near it every request is counted in Redis
(the limit holds exactly there, whatever the number of processes). When Redis is hung
or down (or its circuit breaker is open) each process counts the window itself: a token
stays limited, to at most the limit per process.
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
    return str(settings.CACHES["default"].get("LOCATION") or settings.REDIS_URL)


def _count(key: str, ttl: int, step: int = 1) -> int:
    """Add ``step`` to a window's counter and return it: one round trip to Redis."""
    if settings.REDIS_URL:
        url = _redis_url()
        client = _redis_clients.get(url)
        if client is None:
            client = _redis_clients[url] = redis.Redis.from_url(url, **redis_timeouts())
        key = f"{settings.CACHES['default'].get('KEY_PREFIX', '')}:{key}"
        pipe = client.pipeline(transaction=False)
        pipe.incrby(key, step)
        pipe.expire(key, ttl, nx=True)
        return int(pipe.execute()[0])
    try:
        return cache.incr(key, step)
    except ValueError:
        cache.add(key, 0, timeout=ttl)
        return cache.incr(key, step)


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


# How long a process may keep requests to itself before adding them to the shared count.
SYNC_SECONDS = 0.25
# Near the limit a process adds its requests at once: it keeps at most this share of
# what is left of the window's limit.
_SHARE_OF_WHAT_IS_LEFT = 32


class SyncedWindows:
    """A token's count in this window as this process knows it: the shared count when it
    last added to it, plus its own requests since. ``count`` says when to add them now
    (the callable does the round trip and returns the new shared count)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._window: int | None = None
        self._known: dict[str, int] = {}
        self._pending: dict[str, int] = {}
        self._synced_at: dict[str, float] = {}

    def count(self, key: str, window: int, limit: int, add: Any) -> int:
        with self._lock:
            if window != self._window:
                self._window = window
                self._known.clear()
                self._pending.clear()
                self._synced_at.clear()
            known = self._known.get(key, 0)
            pending = self._pending.get(key, 0) + 1
            now = time.monotonic()
            keep = max(1, (limit - known) // _SHARE_OF_WHAT_IS_LEFT)
            if pending < keep and now - self._synced_at.get(key, now) < SYNC_SECONDS:
                self._pending[key] = pending
                self._synced_at.setdefault(key, now)
                return known + pending
            self._pending[key] = 0
            self._synced_at[key] = now
        total = int(add(pending))  # outside the lock: other threads go on counting
        with self._lock:
            if self._window == window:
                self._known[key] = max(self._known.get(key, 0), total)
        return total


_synced = SyncedWindows()


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
                return _synced.count(
                    key, window, self.limit, lambda step: _count(key, self.period + 1, step)
                )
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
