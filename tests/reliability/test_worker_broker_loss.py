"""A Celery worker that survives its broker (issue 33).

A real worker (prefork, the deployed settings) runs against a private redis-server while
a slow local "LLM" keeps a summary in flight, with more tasks queued and unacknowledged.
Redis is stopped under it and started again (empty, as a restarted Redis without
persistence is). The worker must still be the same live process afterwards and keep
consuming: with the outbox sweep re-queueing what died with Redis, every session ends
with exactly one summary and every event stored once.

Without the guard of ``sessionhub/broker.py`` the worker dies in kombu's restore of the
unacknowledged messages (``AttributeError: 'NoneType' object has no attribute
'hostname'``: the restore builds a new Redis pool from a connection already closed).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path

import kombu
import pytest
import requests

from lifecycle.models import Session
from memory.models import Summary
from sessionhub import broker
from sessionhub.models import Team

from .helpers import RedisServer, current_database_url, service_env, stop_process, wait_until
from .test_faults import (
    SlowLlm,
    assert_background_done,
    assert_stored_once,
    private_redis,  # noqa: F401  (fixture)
    sessions_like,
    sweep_outbox,
    web_server,
)
from .test_faults import start as start_process

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("real_services"),
]

SESSIONS = 8
STOPS = 3


def test_closing_a_channel_after_its_connection_was_collected_does_not_raise(
    private_redis: RedisServer,  # noqa: F811
) -> None:
    """The sequence that killed the worker, step by step: two channels each holding an
    unacknowledged message, Redis gone, the connection collected as Celery's consumer
    collects it (it stops closing channels at the first that raises), then the channel
    left open closed as the task consumer's bootstep closes it."""
    broker.install()
    connection = kombu.Connection(
        private_redis.url,
        transport_options={"socket_timeout": 1, "socket_connect_timeout": 1, "max_retries": 0},
    )
    channels = []
    for name in ("first", "second"):
        channel = connection.channel()
        queue = kombu.Queue(name, routing_key=name)(channel)
        queue.declare()
        kombu.Producer(channel).publish({"task": name}, routing_key=name)
        assert queue.get(no_ack=False) is not None  # delivered, not acknowledged
        channels.append(channel)
    private_redis.stop()
    with contextlib.suppress(Exception):  # what collect raises is not the point
        connection.collect(socket_timeout=1)
    left_open = [channel for channel in channels if not channel.closed]
    assert left_open, "the connection closed every channel: the sequence did not happen"
    for channel in left_open:
        channel.close()  # AttributeError ('hostname') without the guard


def compose_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """The worker as docker-compose.yml runs it: default bootsteps (gossip, mingle,
    heartbeat: more channels on the connection), two pool processes."""
    process = start_process(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "sessionhub",
            "worker",
            "--loglevel=INFO",
            "--concurrency=2",
        ],
        env,
        log,
    )
    wait_until(lambda: "ready" in log.read_text(errors="replace"), 60, 0.3)
    return process


def connections(log: Path) -> int:
    return log.read_text(errors="replace").count("Connected to redis://")


def test_worker_survives_redis_stopped_under_load_with_tasks_in_flight(
    team: Team,
    token: str,
    private_redis: RedisServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    llm = SlowLlm(first_delay=6)
    env = service_env(
        DATABASE_URL=current_database_url(),
        REDIS_URL=private_redis.url,
        SESSIONHUB_LLM_URL=llm.url,
        SESSIONHUB_LLM_MODEL="slow-test-model",
        SESSIONHUB_LLM_TIMEOUT="60",
        SESSIONHUB_OUTBOX_GRACE_SECONDS="1",
        LOG_LEVEL="INFO",
    )
    worker_log = tmp_path / "worker.log"
    web, url = web_server(env, tmp_path / "web.log", workers=1)
    worker = compose_worker(env, worker_log)
    try:
        http = requests.Session()
        http.headers["Authorization"] = f"Bearer {token}"
        sessions = sessions_like("basic", SESSIONS, "broker")
        events = 0
        for stop in range(STOPS):
            # Load: whole sessions, each queueing its summary; the first summary is slow,
            # so tasks are in flight and unacknowledged when Redis goes.
            for session in sessions[stop::STOPS]:
                response = http.post(url + "/api/v1/hooks/claude-code", json=session, timeout=30)
                assert response.status_code == 200, response.text
                events += len(session)
            if stop == 0:
                assert llm.arrived.wait(60), worker_log.read_text()
            else:
                time.sleep(1)
            connected = connections(worker_log)
            private_redis.stop()
            time.sleep(3)  # the worker notices, restores what it held, retries
            private_redis.start()

            # Back: the worker reconnects (its retries back off, up to a few seconds).
            def back(before: int = connected) -> bool:
                return worker.poll() is not None or connections(worker_log) > before

            wait_until(back, 60, 0.3)
            assert worker.poll() is None, worker_log.read_text(errors="replace")[-4000:]

        # Everything queued before a stop died with Redis; the outbox has it.
        def caught_up() -> bool:
            return not Session.objects.filter(memory_dirty_at__isnull=False).exists() and (
                Summary.objects.count() == SESSIONS
            )

        for _ in range(4):
            sweep_outbox(env)  # as beat runs it, periodically
            try:
                wait_until(caught_up, 45, 0.5)
                break
            except AssertionError:
                continue
        log = worker_log.read_text(errors="replace")
        assert worker.poll() is None, log[-4000:]
        assert "Unrecoverable error" not in log, log[-4000:]
        assert "Connection to broker lost" in log  # the stops did reach the worker
        assert caught_up(), log[-4000:]
        assert_stored_once(events)
        assert_background_done()  # one summary per session, nothing doubled
    finally:
        stop_process(worker)
        stop_process(web)
        llm.close()
