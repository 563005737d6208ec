"""Redis trouble must cost a request milliseconds, and the logs one line now and then.

Three parts, per process:

* :class:`ThrottledLog` says a recurring problem once per interval and cause, with the
  number of times it happened since the last line (no traceback per request).
* :class:`CircuitBreaker` remembers that a Redis server failed. After the first failure
  every caller skips the server at once (no connect, no timeout), while one background
  thread pings it every ``RETRY_SECONDS`` with short timeouts and closes the breaker when
  it answers. No request ever pays for a probe.
* :func:`breaker_for` gives one breaker per Redis server (host, port), shared by the
  cache, the rate limiter, the broker publish and the health check: when one of them
  finds Redis hung or down, the others stop trying too.

The socket timeouts of every client (``REDIS_CONNECT_TIMEOUT``, ``REDIS_SOCKET_TIMEOUT``)
bound what the first failure costs.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import redis
from django.conf import settings

logger = logging.getLogger("sessionhub.redis")

LOG_INTERVAL_SECONDS = 10.0
RETRY_SECONDS = 1.0


class ThrottledLog:
    """At most one line per ``interval`` seconds per cause, each with the count of the
    occurrences it stands for."""

    def __init__(self, log: logging.Logger, interval: float = LOG_INTERVAL_SECONDS) -> None:
        self.log = log
        self.interval = interval
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._silenced: dict[str, int] = {}

    def warning(self, cause: str, message: str, *args: Any) -> None:
        now = time.monotonic()
        with self._lock:
            last = self._last.get(cause)
            if last is not None and now - last < self.interval:
                self._silenced[cause] = self._silenced.get(cause, 0) + 1
                return
            self._last[cause] = now
            silenced = self._silenced.pop(cause, 0)
        if silenced:
            message += f" ({silenced} more since the last report)"
        self.log.warning(message, *args)


throttled = ThrottledLog(logger)


class CircuitBreaker:
    """Open after a failure, closed again by a background probe that got an answer."""

    def __init__(self, name: str, probe: Callable[[], Any]) -> None:
        self.name = name
        self.probe = probe
        self._lock = threading.Lock()
        self._open_since: float | None = None
        self._pid = os.getpid()

    @property
    def available(self) -> bool:
        """Whether callers should try the server now: a plain attribute read when closed."""
        if self._open_since is None:
            return True
        if self._pid != os.getpid():  # a forked child does not inherit the probe thread
            self._reset()
            return True
        return False

    def failed(self, exc: BaseException) -> None:
        """A call failed: skip the server from now on until a probe gets an answer."""
        with self._lock:
            if self._open_since is not None and self._pid == os.getpid():
                return
            self._pid = os.getpid()
            self._open_since = time.monotonic()
        throttled.warning(
            f"breaker-open:{self.name}",
            "Redis at %s unavailable (%s); skipping it until it answers again",
            self.name,
            exc.__class__.__name__,
        )
        threading.Thread(target=self._probe_until_closed, daemon=True, name="redis-probe").start()

    def _reset(self) -> None:
        with self._lock:
            self._open_since = None
            self._pid = os.getpid()

    def _probe_until_closed(self) -> None:
        while True:
            time.sleep(RETRY_SECONDS)
            try:
                self.probe()
            except Exception:  # noqa: BLE001, S112 - still away: try again later
                continue
            opened = self._open_since or time.monotonic()
            self._reset()
            throttled.warning(
                f"breaker-closed:{self.name}",
                "Redis at %s answers again after %.1f s",
                self.name,
                time.monotonic() - opened,
            )
            return


_breakers: dict[str, CircuitBreaker] = {}
_breakers_lock = threading.Lock()


def _address(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname or 'localhost'}:{parts.port or 6379}"


def redis_timeouts() -> dict[str, float]:
    """The socket timeouts every Redis client of the request path uses."""
    return {
        "socket_connect_timeout": settings.REDIS_CONNECT_TIMEOUT,
        "socket_timeout": settings.REDIS_SOCKET_TIMEOUT,
    }


_by_url: dict[str, CircuitBreaker] = {}


def breaker_for(url: str) -> CircuitBreaker:
    """The breaker of the Redis server that ``url`` names (one per host and port).

    On the request path: a dict lookup once the URL has been seen."""
    breaker = _by_url.get(url)
    if breaker is not None:
        return breaker
    name = _address(url)
    with _breakers_lock:
        breaker = _breakers.get(name)
        if breaker is None:
            breaker = _breakers[name] = CircuitBreaker(name, _pinger(url))
        _by_url[url] = breaker
    return breaker


def _pinger(url: str) -> Callable[[], Any]:
    def ping() -> Any:
        client = redis.Redis.from_url(url, **redis_timeouts())
        try:
            return client.ping()
        finally:
            client.close()

    return ping
