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
            try:
                count = cache.incr(key)  # one round trip once the window's key exists
            except ValueError:
                cache.add(key, 0, timeout=self.period + 1)
                count = cache.incr(key)
        except Exception:  # noqa: BLE001 - a cache outage must not turn into a 500
            logger.warning("rate-limit cache unavailable; allowing the request")
            return True
        if count > self.limit:
            self._wait = max(1.0, (window + 1) * self.period - now)
            return False
        return True

    def wait(self) -> float | None:
        return self._wait
