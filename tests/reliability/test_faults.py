"""Faults with the real services, each ending with every event stored exactly once and
every background result present.

* Redis (a private redis-server) killed in the middle of a gateway's traffic to a real
  web server + Celery worker, then started again empty: every answer stays 2xx, every event
  is stored, and the outbox sweep gets all the missed work done.
* A Celery worker's pool process SIGKILLed in the middle of an LLM summary (a local
  "LLM" that takes its time): the task runs again and one summary exists.
* PostgreSQL "restarted" under the web server while the Claude Code hook client
  replays sessions: a TCP proxy between them cuts every connection and refuses new ones
  for a few seconds. The client gets 503s or connection errors, spools, sends later, and
  every event lands once.

The machine's own PostgreSQL and Redis are never stopped: the processes here talk to a
redis-server started for the test and to PostgreSQL through a proxy started for it.
Extends tests/lifecycle/test_outages.py (database refused outright, broker unreachable).
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
from django.db.models import Count

from lifecycle.models import EventKind, LifecycleEvent, Session
from memory.models import Observation, Summary
from sessionhub.models import Team
from tests.conftest import claude_code_hooks
from tests.integrations.test_hook_client_e2e import HookClient

from .helpers import (
    REPO,
    RedisServer,
    TcpProxy,
    current_database_url,
    free_port,
    redis_server,
    service_env,
    stop_process,
    wait_until,
    web_as_deployed,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("real_services"),
]


@pytest.fixture
def private_redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    handle = log.open("ab")
    return subprocess.Popen(
        args,
        cwd=REPO,
        env=env,
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: stopped as a whole, and only it
    )


def web_server(env: dict[str, str], log: Path, workers: int = 2) -> tuple[subprocess.Popen, str]:
    """The web server as deployed (``python -m sessionhub.serve``); its process and URL."""
    process, port = web_as_deployed(env, log, workers=workers)
    return process, f"http://127.0.0.1:{port}"


def celery_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    process = start(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "sessionhub",
            "worker",
            "-P",
            "prefork",
            "-c",
            "1",
            "-l",
            "INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        env,
        log,
    )
    wait_until(lambda: "ready" in log.read_text(errors="replace"), 60, 0.3)
    return process


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        found += [int(x) for x in task.read_text().split()]
    return found


def sessions_like(scenario: str, count: int, tag: str) -> list[list[dict[str, Any]]]:
    """``count`` copies of a fixture session, each with its own session id."""
    base = claude_code_hooks(scenario)
    result = []
    for n in range(count):
        sid = f"{tag}-{n:03d}-{base[0]['session_id'][9:]}"
        result.append([{**copy.deepcopy(line), "session_id": sid} for line in base])
    return result


def sweep_outbox(env: dict[str, str]) -> int:
    """The periodic outbox sweep, run once the way beat would: in a fresh process."""
    done = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "from lifecycle.services import outbox_sweep; print(outbox_sweep())",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return int(done.stdout.strip().splitlines()[-1])


def assert_stored_once(expected_events: int) -> None:
    assert LifecycleEvent.objects.count() == expected_events
    repeated = (
        LifecycleEvent.objects.values("team", "event_id").annotate(n=Count("id")).filter(n__gt=1)
    )
    assert not repeated.exists()
    for session in Session.objects.all():
        assert session.event_count == LifecycleEvent.objects.filter(session=session).count()


def assert_background_done() -> None:
    """Every session's work is done: outbox empty, one summary each, one observation per
    completed tool use."""
    for session in Session.objects.all():
        assert session.memory_dirty_at is None, session
        assert Summary.objects.filter(session=session).count() == 1, session
        tool_uses = LifecycleEvent.objects.filter(session=session, kind=EventKind.TOOL_USE).exclude(
            phase="pre"
        )
        assert Observation.objects.filter(session=session).count() == tool_uses.count()


# --- Redis stopped during ingest ---------------------------------------------------------


def test_redis_killed_during_ingest_answers_stay_2xx_and_the_outbox_catches_up(
    team: Team, token: str, private_redis: RedisServer, tmp_path: Path
) -> None:
    env = service_env(
        DATABASE_URL=current_database_url(),
        REDIS_URL=private_redis.url,
        SESSIONHUB_OUTBOX_GRACE_SECONDS="1",
    )
    web, url = web_server(env, tmp_path / "web.log")
    worker = celery_worker(env, tmp_path / "worker.log")
    try:
        sessions = sessions_like("basic", 6, "redis")
        lines = [line for session in sessions for line in session]
        http = requests.Session()
        http.headers["Authorization"] = f"Bearer {token}"
        took: dict[bool, list[float]] = {True: [], False: []}
        down = False
        for i, line in enumerate(lines):
            if i == len(lines) // 3:
                private_redis.stop()  # the broker and the cache vanish mid-traffic
                down = True
            if i == 2 * len(lines) // 3:
                private_redis.start()  # back, empty: what it held is gone
                down = False
            started = time.monotonic()
            response = http.post(url + "/api/v1/hooks/claude-code", json=line, timeout=30)
            took[down].append(time.monotonic() - started)
            assert response.status_code == 200, response.text
        print(
            f"{len(lines)} hook posts, Redis down for {len(took[True])} of them; slowest "
            f"{max(took[False]):.2f}s with Redis, {max(took[True]):.2f}s without"
        )
        assert_stored_once(len(lines))

        # Work queued before the kill died with Redis; work missed meanwhile waits in the
        # outbox. The sweep queues it all again and the worker (reconnected) does it.
        time.sleep(1.5)
        queued = sweep_outbox(env)
        print(f"outbox sweep queued {queued} session(s)")
        swept_at = time.monotonic()

        def caught_up() -> bool:
            return not Session.objects.filter(memory_dirty_at__isnull=False).exists() and (
                Summary.objects.count() == len(sessions)
            )

        try:
            wait_until(caught_up, 90, 0.5)
        except AssertionError:
            # A sweep is periodic: one more round, as beat would run it.
            print("second sweep queued", sweep_outbox(env))
            wait_until(caught_up, 60, 0.5)
        print(f"caught up {time.monotonic() - swept_at:.1f}s after the sweep")
        assert_stored_once(len(lines))
        assert_background_done()
        # Errors were logged while Redis was away; the token never was.
        for name in ("web.log", "worker.log"):
            assert token not in (tmp_path / name).read_text(errors="replace")
    finally:
        stop_process(worker)
        stop_process(web)


def test_publishing_with_the_broker_away_fails_fast(settings: Any) -> None:
    """Each ingest request queues its work after commit: with Redis away that must cost
    milliseconds (the outbox keeps the work), not seconds on the agent's hot path."""
    from kombu import pools

    from lifecycle.ingest.outbox import enqueue_session_work
    from sessionhub.celery import app

    saved = (app.conf.broker_url, app.conf.task_always_eager)

    def point(url: str) -> None:
        app.conf.broker_url = url
        app.pool.force_close_all()
        app._pool = None
        app.amqp._producer_pool = None
        pools.reset()

    app.conf.task_always_eager = False
    point(f"redis://127.0.0.1:{free_port()}/0")
    try:
        started = time.monotonic()
        assert enqueue_session_work(["00000000-0000-0000-0000-000000000000"]) == 0
        elapsed = time.monotonic() - started
    finally:
        point(saved[0])
        app.conf.task_always_eager = saved[1]
    assert elapsed < 0.5, f"queueing with the broker away took {elapsed:.2f}s"


# --- a worker killed in the middle of a summary --------------------------------------------


class SlowLlm:
    """An OpenAI-compatible endpoint that takes its time with the first request."""

    def __init__(self, first_delay: float) -> None:
        self.first_delay = first_delay
        self.requests = 0
        self.arrived = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                owner.requests += 1
                number = owner.requests
                owner.arrived.set()
                if number == 1:
                    time.sleep(owner.first_delay)
                sections = {
                    "request": "Migrate the session store",
                    "investigated": "cache settings",
                    "learned": "redis is already deployed",
                    "completed": f"answered by call {number}",
                    "next_steps": "update the changelog",
                }
                body = json.dumps(
                    {
                        "choices": [{"message": {"content": json.dumps(sections)}}],
                        "usage": {"total_tokens": 120},
                    }
                ).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the caller was killed meanwhile

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_worker_killed_mid_summary_the_task_runs_again_and_one_summary_exists(
    team: Team, token: str, private_redis: RedisServer, tmp_path: Path
) -> None:
    llm = SlowLlm(first_delay=30)
    env = service_env(
        DATABASE_URL=current_database_url(),
        REDIS_URL=private_redis.url,
        SESSIONHUB_LLM_URL=llm.url,
        SESSIONHUB_LLM_MODEL="slow-test-model",
        SESSIONHUB_LLM_TIMEOUT="60",
    )
    worker_log = tmp_path / "worker.log"
    web, url = web_server(env, tmp_path / "web.log", workers=1)
    worker = celery_worker(env, worker_log)
    try:
        lines = claude_code_hooks("basic")
        http = requests.Session()
        http.headers["Authorization"] = f"Bearer {token}"
        # The whole session in one batch: its end queues one process_session run.
        response = http.post(url + "/api/v1/hooks/claude-code", json=lines, timeout=30)
        assert response.status_code == 200 and response.json()["accepted"] == len(lines)
        session = Session.objects.get(external_id=lines[0]["session_id"])

        assert llm.arrived.wait(60), worker_log.read_text()
        # The summary is being written: kill the pool process that is writing it.
        pool = children(worker.pid)
        assert pool, "the worker has no pool process"
        for pid in pool:
            os.kill(pid, signal.SIGKILL)
        assert not Summary.objects.filter(session=session).exists()

        wait_until(lambda: Summary.objects.filter(session=session).exists(), 90, 0.5)
        wait_until(
            lambda: (
                not Session.objects.filter(pk=session.pk, memory_dirty_at__isnull=False).exists()
            ),
            60,
            0.5,
        )
        summary = Summary.objects.get(session=session)
        assert summary.method == "slow-test-model"
        assert summary.completed.startswith("answered by call ")
        assert summary.completed != "answered by call 1"  # call 1 died with its process
        assert llm.requests >= 2
        assert Summary.objects.filter(session=session).count() == 1
        log = worker_log.read_text(errors="replace")
        assert "WorkerLostError" in log or "exited" in log or "SIGKILL" in log, log[-3000:]
        assert_stored_once(len(lines))
        assert_background_done()
    finally:
        stop_process(worker)
        stop_process(web)
        llm.close()


# --- PostgreSQL restarted while the hook client replays -------------------------------------


def test_postgres_cut_mid_replay_the_hook_client_spools_and_every_event_lands_once(
    team: Team, token: str, tmp_path: Path
) -> None:
    from django.db import connection

    params = connection.settings_dict
    proxy = TcpProxy(params.get("HOST") or "127.0.0.1", int(params.get("PORT") or 5432))
    user = params.get("USER") or "postgres"
    password = f":{params['PASSWORD']}" if params.get("PASSWORD") else ""
    env = service_env(
        DATABASE_URL=f"postgres://{user}{password}@127.0.0.1:{proxy.port}/{params['NAME']}",
        REDIS_URL="",  # tasks in-process: the fault under test is the database alone
        SESSIONHUB_RETRY_AFTER_SECONDS="1",
    )
    web, url = web_server(env, tmp_path / "web.log")
    client = HookClient(tmp_path, url, token, timeout=4)
    try:
        sessions = sessions_like("compact", 2, "pg") + sessions_like("basic", 2, "pg")
        lines = [line for session in sessions for line in session]
        cut_at, restore_at = len(lines) // 3, len(lines) // 3 + 8
        spooled_during_cut = 0
        for i, line in enumerate(lines):
            if i == cut_at:
                proxy.cut()  # every connection dropped, new ones refused
                cut_started = time.monotonic()
            if i == restore_at:
                # Down for a few seconds in all, then PostgreSQL is "back".
                time.sleep(max(0.0, 4 - (time.monotonic() - cut_started)))
                spooled_during_cut = len(client.spooled())
                proxy.restore()
            done = client.run(line)
            assert done.stderr == ""
        assert spooled_during_cut >= 1, client.log()
        flushed = client.run(None, "flush")
        assert "waiting 0" in flushed.stdout, (flushed.stdout, client.log())
        assert client.spooled() == []
        log = client.log()
        assert "503" in log or "spool" in log, log
        print(
            f"{len(lines)} hooks; {spooled_during_cut} spooled while PostgreSQL was away; "
            f"proxy cuts: {proxy.cuts}"
        )
        assert_stored_once(len(lines))
        sent_ids = {json.dumps(x, sort_keys=True) for x in lines}
        assert len(sent_ids) == len(lines)
        for session in sessions:
            stored = Session.objects.get(external_id=session[0]["session_id"])
            assert stored.event_count == len(session)
            assert stored.status == "ended"
    finally:
        stop_process(web)
        proxy.close()
