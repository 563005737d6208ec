"""The ingest path when its neighbours are away: the database (503 with Retry-After, over
real HTTP against a real server process) and the broker (2xx, events stored, the outbox
sweep queues the missed work once Redis is back, a real worker does it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from django.conf import settings
from django.utils import timezone
from kombu import pools as kombu_pools

from lifecycle import services
from lifecycle.models import LifecycleEvent, Session
from memory.models import Summary
from sessionhub.celery import app as celery_app
from tests.conftest import claude_code_hooks
from tests.reliability.helpers import free_port, wait_http

REPO = Path(__file__).resolve().parents[2]


def test_database_down_is_503_with_retry_after() -> None:
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "sessionhub.settings",
        "DEBUG": "1",
        "DATABASE_URL": "postgres://postgres@127.0.0.1:1/nowhere",
        "REDIS_URL": "",
        "SESSIONHUB_WEB_BIND": f"127.0.0.1:{port}",
        "SESSIONHUB_WEB_WORKERS": "1",
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "sessionhub.serve"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz")
        response = requests.post(
            f"http://127.0.0.1:{port}/api/v1/hooks/claude-code",
            json=claude_code_hooks("basic")[0],
            headers={"Authorization": "Bearer shub_0123abcd_" + "x" * 43},
            timeout=30,
        )
        assert response.status_code == 503
        assert int(response.headers["Retry-After"]) > 0
        assert response.json()["code"] == "database_unavailable"
        health = requests.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
        assert health.status_code == 503
        assert health.json()["checks"]["database"]["ok"] is False
    finally:
        server.terminate()
        server.wait(timeout=10)


def point_broker(url: str) -> None:
    """Make Celery publish to ``url`` from now on (its connection pools start afresh)."""
    celery_app.conf.broker_url = url
    celery_app.pool.force_close_all()
    celery_app._pool = None
    celery_app.amqp._producer_pool = None
    kombu_pools.reset()  # kombu keeps producer pools per connection in a global registry


@pytest.fixture
def broker_down(settings: Any) -> Any:
    """Real Celery publishing (not eager) to a Redis port where nothing listens."""
    if not settings.REDIS_URL:
        pytest.skip("!!! REDIS_URL is not set: the broker outage test needs a real Redis !!!")
    saved = (celery_app.conf.broker_url, celery_app.conf.task_always_eager)
    celery_app.conf.task_always_eager = False
    point_broker("redis://127.0.0.1:1/0")
    yield
    point_broker(saved[0])
    celery_app.conf.task_always_eager = saved[1]


@pytest.mark.django_db(transaction=True)
def test_broker_down_events_stored_and_the_outbox_catches_up(
    live_server: Any, token: str, broker_down: Any
) -> None:
    lines = claude_code_hooks("basic")
    started = time.monotonic()
    for line in lines:
        response = requests.post(
            f"{live_server.url}/api/v1/hooks/claude-code",
            json=line,
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
    elapsed = time.monotonic() - started
    session = Session.objects.get(external_id=lines[0]["session_id"])
    assert LifecycleEvent.objects.filter(session=session).count() == len(lines)
    assert session.memory_dirty_at is not None  # the work is remembered
    assert not Summary.objects.filter(session=session).exists()
    print(f"{len(lines)} requests with the broker down took {elapsed:.2f}s")

    # Redis is back: the sweep queues what was missed, a real worker does it.
    point_broker(settings.REDIS_URL)
    from celery.contrib.testing.worker import start_worker

    with start_worker(celery_app, perform_ping_check=False, pool="solo", loglevel="WARNING"):
        later = timezone.now() + settings.SESSIONHUB["OUTBOX_GRACE"] + timedelta(seconds=1)
        assert services.outbox_sweep(now=later) == 1
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            session.refresh_from_db()
            if session.memory_dirty_at is None:
                break
            time.sleep(0.2)
    assert session.memory_dirty_at is None
    summary = Summary.objects.get(session=session)
    assert "November exports" in summary.completed + summary.next_steps
    assert services.outbox_sweep(now=later) == 0  # nothing left to queue
