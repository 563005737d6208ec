"""Per-token rate limits: a fixed-window counter in the cache, failing open on outage.

DRF's stock throttle keeps every request's timestamp in one cache value, which costs a
large read and write per request at gateway rates; a counter per window costs one
increment.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from django.core.cache import cache
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from .authentication import TokenUser

logger = logging.getLogger(__name__)

_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """``"600/min"`` → (600, 60)."""
    count, _, period = rate.partition("/")
    return int(count), _PERIODS[period.strip()[0]]


_redis_client: Any = None


def _count(key: str, ttl: int) -> int:
    """Add one to a window's counter and return it: one round trip to Redis."""
    global _redis_client
    if settings.REDIS_URL:
        if _redis_client is None:
            import redis

            _redis_client = redis.Redis.from_url(
                settings.CACHES["default"].get("LOCATION") or settings.REDIS_URL,
                socket_connect_timeout=1,
                socket_timeout=1,
            )
        key = f"{settings.CACHES['default'].get('KEY_PREFIX', '')}:{key}"
        pipe = _redis_client.pipeline(transaction=False)
        pipe.incr(key)
        pipe.expire(key, ttl, nx=True)
        return int(pipe.execute()[0])
    try:
        return cache.incr(key)
    except ValueError:
        cache.add(key, 0, timeout=ttl)
        return cache.incr(key)


class TokenRateThrottle(BaseThrottle):
    """``API_RATE_LIMIT`` requests per token and window; DRF adds ``Retry-After``."""

    scope = "token"

    def __init__(self) -> None:
        rates = settings.REST_FRAMEWORK.get("DEFAULT_THROTTLE_RATES", {})
        self.limit, self.period = parse_rate(rates.get(self.scope, "6000/min"))
        self._wait: float | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        user = request.user
        ident = user.token.pk if isinstance(user, TokenUser) else self.get_ident(request)
        now = time.time()
        window = int(now // self.period)
        key = f"throttle:{self.scope}:{ident}:{window}"
        try:
            count = _count(key, self.period + 1)
        except Exception:  # noqa: BLE001 - a cache outage must not turn into a 500
            logger.warning("rate-limit cache unavailable; allowing the request")
            return True
        if count > self.limit:
            self._wait = max(1.0, (window + 1) * self.period - now)
            return False
        return True

    def wait(self) -> float | None:
        return self._wait
