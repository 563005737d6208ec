"""Redis hung (SIGSTOP) or down (killed) under the real web server: requests go on, the rate
limit is still enforced (counted per process), work is left to the outbox, and each cause
is logged at most once per 10 s with a count, never as a traceback per request.

The in-process tests pin down the parts: the circuit breaker skips a failed server
without touching the network, the cache serves misses, the limiter keeps counting, the
log is throttled. Timings are in bench/redis_trouble.py, not asserted here.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import signal
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import requests
from django.core.cache import cache
from rest_framework.test import APIClient

from lifecycle.models import LifecycleEvent, Session
from sessionhub import resilience, throttling
from sessionhub.resilience import CircuitBreaker, ThrottledLog
from sessionhub.services import api_token_create, team_get_or_create

from .helpers import (
    RedisServer,
    current_database_url,
    free_port,
    needs_postgres_and_redis,
    service_env,
    stop_process,
    wait_until,
    web_as_deployed,
)

LIMIT = 20  # per token and minute, in the web server test


def _away_url() -> str:
    return f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there


# --- the parts, in-process -----------------------------------------------------------------


def test_throttled_log_says_each_cause_once_per_interval_with_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = ThrottledLog(logging.getLogger("test.throttled"), interval=10)
    clock = [1000.0]
    with (
        mock.patch.object(resilience.time, "monotonic", lambda: clock[0]),
        caplog.at_level(logging.WARNING, "test.throttled"),
    ):
        for _ in range(500):
            log.warning("a", "cause a")
            log.warning("b", "cause b")
        clock[0] += 9.9
        log.warning("a", "cause a")
        clock[0] += 0.2
        log.warning("a", "cause a")
    assert [r.getMessage() for r in caplog.records] == [
        "cause a",
        "cause b",
        "cause a (500 more since the last report)",
    ]


def test_breaker_skips_a_failed_server_until_a_probe_gets_an_answer() -> None:
    answers = {"up": False}
    probes: list[float] = []

    def probe() -> bool:
        probes.append(time.monotonic())
        if not answers["up"]:
            raise ConnectionError("still away")
        return True

    breaker = CircuitBreaker("test:1", probe)
    assert breaker.available
    with mock.patch.object(resilience, "RETRY_SECONDS", 0.05):
        breaker.failed(ConnectionError("refused"))
        assert not breaker.available
        breaker.failed(ConnectionError("refused"))  # already open: no second probe thread
        wait_until(lambda: len(probes) >= 3, 10, 0.02)
        assert not breaker.available
        answers["up"] = True
        wait_until(lambda: breaker.available, 10, 0.02)


@pytest.mark.django_db
def test_rate_limit_is_enforced_per_process_when_redis_is_away(
    team: Any, make_token: Any, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: with the cache away every request was let through (and logged)."""
    if not settings.REDIS_URL:
        pytest.skip("!!! needs Redis (REDIS_URL) !!!")
    url = _away_url()
    settings.CACHES = {
        "default": {"BACKEND": "sessionhub.cache.ResilientRedisCache", "LOCATION": url}
    }
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"token": "5/min"},
    }
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token(team)[1]}")
    calls = []
    real_count = throttling._count
    with (
        mock.patch.object(throttling, "_count", lambda *a: calls.append(a) or real_count(*a)),
        mock.patch.object(throttling._local, "_window", None),
        caplog.at_level(logging.WARNING),
    ):
        statuses = [client.get("/api/v1/sessions").status_code for _ in range(12)]
    # A window boundary may fall in between: 5 per window, at most two windows.
    assert statuses.count(429) >= 2 and statuses[:5] == [200] * 5
    assert all(s in (200, 429) for s in statuses)
    assert 5 <= statuses.count(200) <= 10
    # Only the first request tried Redis; the breaker skipped it for the others.
    assert len(calls) == 1
    redis_lines = [r for r in caplog.records if r.name == "sessionhub.redis"]
    # The breaker, the limiter, and the cache (each request reads the tokens' revocation
    # mark): each says so once.
    assert len(redis_lines) <= 3, [r.getMessage() for r in redis_lines]
    assert not any(r.exc_info for r in caplog.records)


@pytest.mark.django_db
def test_cache_serves_misses_when_redis_is_away(settings: Any) -> None:
    settings.CACHES = {
        "default": {"BACKEND": "sessionhub.cache.ResilientRedisCache", "LOCATION": _away_url()}
    }
    assert cache.get("k", "fallback") == "fallback"
    assert cache.set("k", 1) is None
    assert cache.add("k", 1) is False
    assert cache.get_many(["a", "b"]) == {}
    assert cache.get_or_set("k", lambda: 7) == 7
    with pytest.raises(ValueError):
        cache.incr("k")
    assert not cache.breaker.available


# --- the web server with a private Redis that hangs, then dies -----------------------------


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[dict[str, Any]]:
    reason = needs_postgres_and_redis()
    if reason:
        pytest.skip(reason)
    redis = RedisServer()
    redis.start()
    log = tmp_path / "web.log"
    env = service_env(
        DATABASE_URL=current_database_url(),
        REDIS_URL=redis.url,
        API_RATE_LIMIT=f"{LIMIT}/min",
        LOG_LEVEL="WARNING",
    )
    web, port = web_as_deployed(env, log, workers=1)
    try:
        yield {"url": f"http://127.0.0.1:{port}", "redis": redis, "log": log}
    finally:
        stop_process(web)
        if redis.process is not None and redis.process.poll() is None:
            os.kill(redis.process.pid, signal.SIGCONT)
        redis.close()


def _event() -> dict[str, Any]:
    return {
        "event_id": f"rt-{uuid.uuid4().hex}",
        "kind": "prompt",
        "occurred_at": datetime.now(UTC).isoformat(),
        "agent_id": "redis-trouble",
        "session_id": f"rt-{uuid.uuid4().hex[:6]}",
        "text": "hello",
    }


class Load:
    """Single-event posts over many tokens (each far below its limit), and /healthz."""

    def __init__(self, url: str, tokens: list[str], log: Path) -> None:
        self.url = url
        self.tokens = tokens
        self.log = log
        self.sent = 0
        self.stored: list[str] = []
        self.http = requests.Session()

    def post(self, token: str, event: dict[str, Any]) -> requests.Response:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        try:
            return self.http.post(
                f"{self.url}/api/v1/events", data=json.dumps(event), headers=headers, timeout=30
            )
        except requests.ConnectionError as error:
            # Before: a 429 answered before its body arrived left the connection to be
            # closed without saying so, and the next event on it went unanswered.
            tail = self.log.read_text(errors="replace")[-3000:]
            raise AssertionError(
                f"{error!r} after {self.sent} events; the server said:\n{tail}"
            ) from error

    def run(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            event = _event()
            answer = self.post(self.tokens[self.sent % len(self.tokens)], event)
            self.sent += 1
            assert answer.status_code == 200, answer.text
            assert answer.json()["accepted"] == 1
            self.stored.append(event["event_id"])
            health = self.http.get(f"{self.url}/healthz", timeout=30)
            assert health.status_code in (200, 503)
            time.sleep(0.2)

    def limit_holds(self, token: str) -> None:
        statuses = [self.post(token, _event()).status_code for _ in range(3 * LIMIT + 10)]
        assert set(statuses) <= {200, 429}, statuses
        # At most LIMIT per window, and the run spans at most two windows.
        assert statuses.count(200) <= 2 * LIMIT, statuses
        assert statuses.count(429) >= LIMIT + 10, statuses


CAUSES = {
    "breaker": re.compile(r"unavailable \(\w+\); skipping it"),
    "recovered": re.compile(r"answers again after"),
    "rate-limit": re.compile(r"rate limiter: Redis at"),
    "broker": re.compile(r"broker at .* unavailable|could not queue work"),
    "cache": re.compile(r"cache unavailable"),
}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_redis_hung_then_down_under_load(stack: dict[str, Any]) -> None:
    team = team_get_or_create(slug="acme", name="Acme")
    tokens = [api_token_create(team=team, name=f"gw-{i}", scopes=["ingest"])[1] for i in range(30)]
    limited = [api_token_create(team=team, name=f"lim-{i}", scopes=["ingest"])[1] for i in range(2)]
    load = Load(stack["url"], tokens, stack["log"])
    redis: RedisServer = stack["redis"]
    assert redis.process is not None
    started = time.monotonic()

    load.run(2)  # Redis answering
    os.kill(redis.process.pid, signal.SIGSTOP)  # hung: connects, never answers
    load.run(12)
    load.limit_holds(limited[0])
    os.kill(redis.process.pid, signal.SIGCONT)
    redis.stop()  # down: connections refused
    load.run(12)
    load.limit_holds(limited[1])
    redis.start()  # back, empty
    wait_until(
        lambda: load.http.get(f"{stack['url']}/healthz", timeout=30).status_code == 200, 30, 0.5
    )
    elapsed = time.monotonic() - started

    # Every answered event stored once; their sessions wait in the outbox for the sweep.
    stored = LifecycleEvent.objects.filter(team=team, event_id__in=load.stored)
    assert stored.count() == len(load.stored) == load.sent
    assert Session.objects.filter(team=team, memory_dirty_at__isnull=False).exists()

    text = stack["log"].read_text(errors="replace")
    assert "Traceback" not in text
    assert "Unexpected exit" not in text, text  # the server's process never died
    lines = [line for line in text.splitlines() if "sessionhub.redis" in line]
    counts = {cause: sum(bool(p.search(line)) for line in lines) for cause, p in CAUSES.items()}
    allowed = math.ceil(elapsed / 10) + 1
    print(f"\n{elapsed:.0f} s, {load.sent} events, Redis log lines by cause: {counts}")
    print("\n".join(lines))
    for cause in ("rate-limit", "broker"):
        assert 1 <= counts[cause] <= allowed, (cause, counts, elapsed, lines)
    assert 1 <= counts["breaker"] <= 3, lines  # hung, down (and a reconnect at most)
    assert counts["recovered"] >= 1, lines
    assert sum(counts.values()) == len(lines), lines  # nothing else about Redis was said


@pytest.mark.django_db
def test_resummary_with_the_broker_away_is_a_503_not_a_500(
    api: APIClient, team: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """Before: the failed publish raised out of the view (a 500)."""
    from kombu import pools

    from sessionhub.celery import app
    from tests.factories import session_with_story

    session = session_with_story(team)
    saved = (app.conf.broker_url, app.conf.task_always_eager)

    def point(url: str) -> None:
        app.conf.broker_url = url
        app.pool.force_close_all()
        app._pool = None
        app.amqp._producer_pool = None
        pools.reset()

    app.conf.task_always_eager = False
    point(_away_url())
    try:
        with django_capture_on_commit_callbacks(execute=True):
            first = api.post(f"/api/v1/sessions/{session.pk}/summarize")
        assert first.status_code == 202  # accepted before the broker was known to be away
        second = api.post(f"/api/v1/sessions/{session.pk}/summarize")
    finally:
        point(saved[0])
        app.conf.task_always_eager = saved[1]
    assert second.status_code == 503
    assert second.json()["code"] == "service_unavailable"
    assert second["Retry-After"]
