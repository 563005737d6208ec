"""Token revocations, heard by every process as they happen, without a round trip per
request.

Each process caches the tokens it has read for a few seconds (sessionhub.authentication),
and a revocation must stop a token at once in all of them. An announcement does two
things: it changes a shared mark in the cache (Redis) and publishes on a channel. Each
process keeps one connection subscribed to that channel, and before it trusts a cached
token it looks at that connection's socket without waiting: one non-blocking read, where
reading the shared mark cost a round trip to Redis on every gateway request. Redis
writes a published message to its subscribers in the same turn of its loop as it answers
the publisher, so a process has heard it before the revocation's own answer is back.

Whenever the watch is not up (no Redis, a lost connection, the circuit breaker open, a
retry not yet due) a request reads the shared mark instead, as every request used to;
a watch that (re)connects tells the process to forget its cached tokens, since what was
announced while nobody listened is unknown. Without Redis (the embedded default: one
process) the mark is the process's own cache.

What the rest of the project reads is :func:`generation`: a number that grows whenever
cached tokens may be stale. A token cached under an older number is read again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import ssl
import threading
import time
import uuid
from typing import Any

import redis
from django.conf import settings
from django.core.cache import cache

from .resilience import breaker_for, redis_timeouts

logger = logging.getLogger(__name__)

MARK = "sessionhub:token-revocation"
# A watch that could not subscribe tries again after this long; meanwhile requests read
# the shared mark.
RETRY_SECONDS = 1.0


def _redis_url() -> str | None:
    """The cache's Redis (where the mark lives), or None without one."""
    if not settings.REDIS_URL:
        return None
    return str(settings.CACHES["default"].get("LOCATION") or settings.REDIS_URL)


def channel() -> str:
    """The channel, under the cache's key prefix: deployments that share a Redis do not
    hear each other's revocations."""
    return f"{settings.CACHES['default'].get('KEY_PREFIX', '')}:sessionhub:token-revocations"


class Watch:
    """One subscribed connection per process, read without blocking. Not thread-safe on
    its own: :func:`generation` calls it under a lock."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._pid = 0
        self._client: Any = None  # kept: a collected client disconnects its pool
        self._pubsub: Any = None
        self._sock: Any = None
        self._retry_at = 0.0

    @property
    def up(self) -> bool:
        return self._sock is not None and self._pid == os.getpid()

    def news(self) -> bool | None:
        """True when a revocation may have been announced since the last call, False when
        none was, None when the watch is down (ask the shared mark)."""
        if self._pid != os.getpid():  # forked: the parent's socket is not ours to read
            self._drop(close=False)
            self._pid = os.getpid()
        if self._sock is None:
            now = time.monotonic()
            if now < self._retry_at or not breaker_for(self.url).available:
                return None
            self._retry_at = now + RETRY_SECONDS
            return True if self._subscribe() else None
        try:
            data = self._sock.recv(65536)
        except (BlockingIOError, ssl.SSLWantReadError):
            return False  # nothing announced
        except OSError:
            self._drop()
            return None
        if not data:  # Redis closed the connection
            self._drop()
            return None
        self._drain()
        return True

    def _subscribe(self) -> bool:
        try:
            client: Any = redis.Redis.from_url(self.url, **redis_timeouts())
            pubsub = client.pubsub()
            pubsub.subscribe(channel())
            confirmed = pubsub.get_message(timeout=settings.REDIS_SOCKET_TIMEOUT)
            if not confirmed or confirmed.get("type") != "subscribe":
                pubsub.close()
                return False
        except (redis.RedisError, OSError) as exc:
            breaker_for(self.url).failed(exc)
            return False
        # From here the socket is read here only, never through redis-py again: any bytes
        # on it are a message on the channel, and a message is news.
        sock = pubsub.connection._sock
        sock.setblocking(False)
        self._client, self._pubsub, self._sock = client, pubsub, sock
        return True

    def _drain(self) -> None:
        try:
            while self._sock.recv(65536):
                pass
        except (BlockingIOError, ssl.SSLWantReadError):
            return
        except OSError:
            pass
        self._drop()  # closed or broken while draining: the next call subscribes again

    def _drop(self, *, close: bool = True) -> None:
        sock, self._sock, self._pubsub, self._client = self._sock, None, None, None
        if sock is not None and close:
            with contextlib.suppress(OSError):
                sock.close()


_lock = threading.Lock()
_generation = 0
_seen_mark: object = None
_watch: Watch | None = None
_watch_url: str | None = None


def _current_watch() -> Watch | None:
    global _watch, _watch_url
    url = _redis_url()
    if url != _watch_url:  # first use, or the settings changed (tests)
        if _watch is not None:
            _watch._drop()
        _watch, _watch_url = (Watch(url) if url else None), url
    return _watch


def generation() -> int:
    """A number that grows whenever a token cached in this process may have been revoked
    since; compare it before trusting a cached token."""
    global _generation, _seen_mark
    with _lock:
        watch = _current_watch()
        news = watch.news() if watch is not None else None
        if news is not None:
            if news:
                _generation += 1
            return _generation
    # No watch: the shared mark, read outside the lock (a round trip). Two threads that
    # read it at different moments may both count a change: an extra read of the tokens,
    # never a missed revocation.
    mark = cache.get(MARK)
    with _lock:
        if mark != _seen_mark:
            _seen_mark = mark
            _generation += 1
        return _generation


def current() -> int:
    """The generation as this process last knew it, without looking for news: what a
    token read from the database now is cached under. A revocation announced after this
    call is news to the next :func:`generation`, so that copy is not trusted again."""
    return _generation


def announce() -> None:
    """Tell every process that a token was revoked: the shared mark changes and the
    channel carries the news to every watch."""
    global _generation
    with _lock:
        _generation += 1  # this process at once, whatever Redis does
    cache.set(MARK, uuid.uuid4().hex, timeout=None)
    url = _redis_url()
    if url is None:
        return
    client = redis.Redis.from_url(url, **redis_timeouts())
    try:
        client.publish(channel(), "revoked")
    except redis.RedisError as exc:
        # The mark has changed (unless Redis is away for every process alike): a process
        # whose watch is down reads it; one whose watch is up keeps its cached tokens
        # until they expire (TOKEN_CACHE_SECONDS), as before the mark existed.
        logger.warning("could not publish a token revocation: %s", exc)
    finally:
        client.close()
