"""Task discipline: the memory tasks are idempotent, acknowledged late, retried on
database hiccups and recorded when they fail; and the whole pipeline runs through a real
Celery worker consuming from Redis, not only in eager mode."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock
from urllib.parse import urlsplit, urlunsplit

import kombu.pools
import pytest
import requests
from celery.contrib.testing.worker import start_worker
from celery.signals import task_failure, task_postrun
from django.conf import settings
from django.db import InterfaceError, OperationalError, connections
from django.utils import timezone
from rest_framework.test import APIClient

from lifecycle.models import EventKind, LifecycleEvent, Session, SessionStatus
from memory import pipeline, tasks
from memory.models import (
    LlmUsage,
    Observation,
    SessionFeatures,
    StreamTail,
    Summary,
    TaskFailure,
)
from sessionhub.celery import app
from sessionhub.text.redaction import RULES_VERSION
from tests.conftest import openclaw_hooks
from tests.factories import EventFactory, LiveSessionFactory
from tests.memory.payloads import claude_code_as_sent

DERIVED = (Observation, StreamTail, Summary, SessionFeatures)


def snapshot(session: Session) -> dict[str, Any]:
    """Every column of every row derived from the session, its outbox columns, the LLM
    ledger and the failure log: what "the same rows" means."""
    rows: dict[str, Any] = {
        model.__name__: list(model.objects.filter(session=session).order_by("pk").values())
        for model in DERIVED
    }
    rows["session"] = list(
        Session.objects.filter(pk=session.pk).values(
            "memory_cursor", "memory_dirty_at", "updated_at"
        )
    )
    rows["llm_usage"] = list(LlmUsage.objects.order_by("pk").values())
    rows["failures"] = TaskFailure.objects.count()
    return rows


@pytest.fixture
def replay(
    api: APIClient, django_capture_on_commit_callbacks: Any
) -> Callable[[str, list[dict[str, Any]]], None]:
    def run(path: str, lines: list[dict[str, Any]]) -> None:
        for line in lines:
            with django_capture_on_commit_callbacks(execute=True):
                response = api.post(f"/api/v1/{path}", line, format="json")
            assert response.status_code == 200, response.content

    return run


# --- task options ---------------------------------------------------------------------------

MEMORY_TASKS = [
    tasks.process_session,
    tasks.summarize_session,
    tasks.reredact_all,
    tasks.apply_retention,
]


@pytest.mark.parametrize("task", MEMORY_TASKS, ids=lambda t: t.name)
def test_tasks_ack_late_and_retry_database_hiccups(task: Any) -> None:
    assert task.acks_late is True
    assert set(task.autoretry_for) == {OperationalError, InterfaceError}
    assert task.retry_backoff and task.retry_jitter
    assert task.max_retries and task.max_retries >= 3
    # A worker killed mid-task gives the message back instead of losing it.
    assert app.conf.task_reject_on_worker_lost is True
    assert app.conf.worker_prefetch_multiplier == 1


# --- idempotency ----------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "scenario"),
    [
        ("hooks/claude-code", "compact"),
        ("hooks/claude-code", "crash"),
        ("hooks/openclaw", "restart"),
    ],
)
def test_process_session_twice_changes_nothing(replay: Any, path: str, scenario: str) -> None:
    if path == "hooks/openclaw":
        lines = openclaw_hooks(scenario)
        external_id = lines[0]["event"]["sessionId"]
    else:
        lines = claude_code_as_sent(scenario)
        external_id = lines[0]["session_id"]
    replay(path, lines)
    session = Session.objects.get(external_id=external_id)
    before = snapshot(session)
    assert before["Summary"] and before["Observation"] and before["StreamTail"]

    for _ in range(2):
        assert tasks.process_session.delay(str(session.pk)).get() is True
        assert snapshot(session) == before


@pytest.mark.django_db
def test_summarize_session_twice_gives_the_same_summary(replay: Any) -> None:
    lines = claude_code_as_sent("basic")
    replay("hooks/claude-code", lines)
    session = Session.objects.get(external_id=lines[0]["session_id"])
    content = ("request", "investigated", "learned", "completed", "next_steps", "final_message")
    before = Summary.objects.filter(session=session).values(*content, "method").get()
    for _ in range(2):
        assert tasks.summarize_session.delay(str(session.pk)).get() is True
        assert Summary.objects.filter(session=session).values(*content, "method").get() == before
    assert Summary.objects.filter(session=session).count() == 1


@pytest.mark.django_db
def test_reredact_all_rewrites_old_rows_once() -> None:
    """Rows stored under older rules are redacted again; a second run finds nothing."""
    key = "ghp_76dEyTzAeKOmXRrvftva9AW7hipTgadDZFlR"
    old = EventFactory(
        kind=EventKind.PROMPT,
        facts={"text": f"push with {key}"},
        payload={"prompt": f"push with {key}"},
        redaction_version=0,
    )
    current = EventFactory(facts={"text": "nothing to hide"}, redaction_version=RULES_VERSION)
    assert tasks.reredact_all.delay().get() >= 1
    old.refresh_from_db()
    assert key not in str(old.facts) + str(old.payload)
    assert "[REDACTED:" in old.facts["text"]
    assert old.redaction_version == RULES_VERSION
    after = list(LifecycleEvent.objects.order_by("pk").values())
    assert tasks.reredact_all.delay().get() == 0
    assert list(LifecycleEvent.objects.order_by("pk").values()) == after
    assert LifecycleEvent.objects.get(pk=current.pk).facts == {"text": "nothing to hide"}


def _marked_session(**fields: Any) -> Session:
    """A session with one prompt, marked for memory work."""
    session = LiveSessionFactory(**fields)
    EventFactory(session=session, kind=EventKind.PROMPT, facts={"text": "hello"})
    Session.objects.filter(pk=session.pk).update(memory_dirty_at=session.started_at)
    return session


def _arrivals_every_round(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What a burst of hooks does: a new outbox mark lands during every round, before the
    round records that it caught up. Only this stands in for the concurrent requests; the
    pipeline itself runs for real. Returns the list of rounds run, filled as they run."""
    real = pipeline._tails_record
    runs: list[str] = []

    def tails_then_an_arrival(session: Session, events: Any) -> None:
        runs.append(str(session.pk))
        real(session, events)
        Session.objects.filter(pk=session.pk).update(memory_dirty_at=timezone.now())

    monkeypatch.setattr(pipeline, "_tails_record", tails_then_an_arrival)
    return runs


def _queued_by_a_worker(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, Any]]:
    """Run tasks as a worker does (not eagerly) and keep what they queue."""
    queued: list[tuple[Any, Any]] = []
    monkeypatch.setattr(
        tasks.process_session, "apply_async", lambda *a, **kw: queued.append((a, kw))
    )
    monkeypatch.setitem(app.conf, "task_always_eager", False)
    return queued


@pytest.mark.django_db
@pytest.mark.parametrize("busy", [True, False], ids=["events-keep-coming", "quiet"])
def test_a_run_that_ends_dirty_hands_over_to_a_new_one(
    monkeypatch: pytest.MonkeyPatch, busy: bool
) -> None:
    """Ingestion queues work only when a session turns dirty; a run whose every round saw
    new events must queue the next run itself, not leave it to the outbox sweep."""
    session = _marked_session()
    if busy:
        _arrivals_every_round(monkeypatch)
    queued = _queued_by_a_worker(monkeypatch)

    assert tasks.process_session(str(session.pk)) is True
    assert Observation.objects.count() == 0 and StreamTail.objects.count() == 0
    assert Session.objects.get(pk=session.pk).memory_cursor > 0
    if busy:
        busy_seconds = settings.SESSIONHUB["MEMORY_BUSY_SECONDS"]
        assert queued == [(((str(session.pk),),), {"countdown": busy_seconds})]
    else:
        assert queued == []
        assert Session.objects.get(pk=session.pk).memory_dirty_at is None


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("status", "rounds", "wait"),
    [(SessionStatus.ACTIVE, 1, "busy"), (SessionStatus.ENDED, 10, "requeue")],
    ids=["open: one round, then a later run", "closed: round after round"],
)
def test_a_busy_open_session_is_paced_a_closed_one_is_not(
    monkeypatch: pytest.MonkeyPatch, settings: Any, status: str, rounds: int, wait: str
) -> None:
    """While an agent is busy its events keep coming; a worker that went round at once
    would spend a core on a few events a round. An open session gets one round and a
    run MEMORY_BUSY_SECONDS later takes in the rest; a closed one goes on, and is queued
    again a second later if events still wait, since its summary is wanted now."""
    settings.SESSIONHUB = {**settings.SESSIONHUB, "MEMORY_BUSY_SECONDS": 7.5}
    session = _marked_session(status=status)
    runs = _arrivals_every_round(monkeypatch)
    queued = _queued_by_a_worker(monkeypatch)

    assert tasks.process_session(str(session.pk)) is True
    assert len(runs) == rounds
    countdown = 7.5 if wait == "busy" else tasks.REQUEUE_SECONDS
    assert queued == [(((str(session.pk),),), {"countdown": countdown})]


def test_the_worker_runs_at_a_lower_priority_than_the_web_processes() -> None:
    """What the worker's start does to its process: it lowers its own priority to
    SESSIONHUB_WORKER_NICE (in a child process: a process cannot raise it back)."""
    code = (
        "import os, django; django.setup(); "
        "from celery.signals import worker_init; import sessionhub.celery; "
        "before = os.nice(0); worker_init.send(sender=None); print(before, os.nice(0))"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "sessionhub.settings", "DEBUG": "1"}
    for wanted in ("10", "3"):
        env["SESSIONHUB_WORKER_NICE"] = wanted
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        before, after = map(int, done.stdout.split())
        assert after == max(before, int(wanted)), done.stdout


_AUTOGROUP_PROBE = (
    "import os, django; django.setup(); "
    "from celery.signals import worker_init; import sessionhub.celery; "
    "worker_init.send(sender=None); print(open('/proc/self/autogroup').read().split()[-1])"
)


def _in_an_autogroup() -> bool:
    """The file exists on every kernel built with autogroup, but reads empty where the
    scheduling is off or the process sits in a cgroup's own task group (a container, a CI
    runner's slice)."""
    try:
        with open("/proc/self/autogroup") as handle:
            return "nice" in handle.read()
    except OSError:
        return False


@pytest.mark.skipif(
    not _in_an_autogroup(), reason="this process is in no autogroup (off, or a cgroup's group)"
)
@pytest.mark.parametrize("own_session", [True, False])
def test_a_worker_in_a_session_of_its_own_lowers_its_scheduling_group(own_session: bool) -> None:
    """Under autogroup scheduling the kernel shares the cores between sessions before nice
    values count, so a worker started in its own session (as a service manager or a
    container starts it) lowers its group as well; one started inside another session
    (a terminal's) leaves that group alone."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "sessionhub.settings", "DEBUG": "1"}
    env["SESSIONHUB_WORKER_NICE"] = "12"
    with open("/proc/self/autogroup") as handle:
        ours = handle.read().split()[-1]
    done = subprocess.run(
        [sys.executable, "-c", _AUTOGROUP_PROBE],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=own_session,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == ("12" if own_session else ours)
    with open("/proc/self/autogroup") as handle:
        assert handle.read().split()[-1] == ours  # the test run's own group is untouched


def test_no_autogroup_leaves_the_nice_value_to_do_the_work(tmp_path: Any) -> None:
    """A kernel without autogroup (or a file that cannot be written) is no error."""
    from sessionhub.celery import _autogroup_lower

    with mock.patch("os.getsid", return_value=os.getpid()):
        assert _autogroup_lower(10, path=str(tmp_path / "missing")) is False
        unreadable = tmp_path / "garbled"
        unreadable.write_text("no nice here\n")
        assert _autogroup_lower(10, path=str(unreadable)) is False
        empty = tmp_path / "empty"  # the file as a process in a cgroup's task group reads it
        empty.write_text("")
        assert _autogroup_lower(10, path=str(empty)) is False
        assert empty.read_text() == ""
        lowered = tmp_path / "autogroup"
        lowered.write_text("/autogroup-7 nice 0\n")
        assert _autogroup_lower(10, path=str(lowered)) is True
        assert lowered.read_text() == "10"
        lowered.write_text("/autogroup-7 nice 15\n")
        assert _autogroup_lower(10, path=str(lowered)) is False  # never raised back


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    os.environ.get("DATABASE_URL", "").startswith("sqlite") or not os.environ.get("DATABASE_URL"),
    reason="a PostgreSQL backend per connection is what is kept",
)
def test_a_worker_keeps_its_database_connection_between_tasks() -> None:
    """Celery's own fixup closed the connection around every task; with DB_REUSE_MAX it
    keeps it, and Django's rule (an old or broken connection) decides between tasks."""
    from celery.fixups.django import DjangoWorkerFixup
    from django.db import connection

    from sessionhub.celery import recycle_connections

    class Request:
        is_eager = False

    class Task:
        request = Request()

    fixup = DjangoWorkerFixup(app)
    assert fixup.db_reuse_max

    def backend() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return int(cursor.fetchone()[0])

    def run_task() -> int:
        fixup.on_task_prerun(sender=Task())
        recycle_connections(sender=Task())
        pid = backend()
        fixup.on_task_postrun(sender=Task())
        recycle_connections(sender=Task())
        return pid

    saved = connection.settings_dict["CONN_MAX_AGE"]
    connection.settings_dict["CONN_MAX_AGE"] = 60  # production's (the tests' is 0)
    connection.close()
    try:
        assert len({run_task() for _ in range(5)}) == 1
        first = run_task()
        connection.close_at = time.monotonic() - 1  # past CONN_MAX_AGE: Django closes it
        assert run_task() != first
    finally:
        connection.settings_dict["CONN_MAX_AGE"] = saved
        connection.close()


# --- failures -----------------------------------------------------------------------------------


def broken_session() -> Session:
    """A session whose log holds a row no adapter writes: a tool use whose facts are a
    JSON list instead of an object (as a hand edit or an old bug could leave)."""
    session = LiveSessionFactory(status=SessionStatus.ACTIVE)
    EventFactory(session=session, kind=EventKind.PROMPT, facts={"text": "hello"})
    EventFactory(session=session, kind=EventKind.TOOL_USE, phase="post", facts=["not", "a", "dict"])
    Session.objects.filter(pk=session.pk).update(memory_dirty_at=session.started_at)
    return session


@pytest.mark.django_db
def test_failure_is_recorded_in_embedded_mode() -> None:
    """Without a broker tasks run in-process and their errors do not propagate (the
    production setting): the failure must still land in TaskFailure."""
    session = broken_session()
    app.conf.task_eager_propagates = False
    try:
        result = tasks.process_session.delay(str(session.pk))
    finally:
        app.conf.task_eager_propagates = True
    assert result.failed()
    failure = TaskFailure.objects.get()
    assert failure.task_name == "memory.tasks.process_session"
    assert failure.args == [str(session.pk)]
    assert failure.exception.startswith("AttributeError")
    assert "pipeline.py" in failure.traceback
    # The work stays marked for the outbox sweep, nothing half-done is acknowledged.
    session.refresh_from_db()
    assert session.memory_dirty_at is not None
    assert session.memory_cursor == 0


# --- a real worker ----------------------------------------------------------------------------


class WorkerProbe:
    """Finished and failed task ids, as the worker thread reports them."""

    def __init__(self) -> None:
        self.finished: dict[str, str] = {}
        self.failed: set[str] = set()
        self.threads: set[str] = set()
        self.lock = threading.Condition()

    def on_postrun(self, task_id: str = "", state: str = "", **_: Any) -> None:
        # The worker thread's own database connection is closed after each task, so the
        # test database can be dropped at the end of the run.
        connections.close_all()
        with self.lock:
            self.finished[task_id] = state
            self.threads.add(threading.current_thread().name)
            self.lock.notify_all()

    def on_failure(self, task_id: str = "", **_: Any) -> None:
        with self.lock:
            self.failed.add(task_id)

    def wait_for(self, ids: list[str], timeout: float = 60) -> None:
        with self.lock:
            ok = self.lock.wait_for(lambda: all(i in self.finished for i in ids), timeout)
        assert ok, f"tasks {ids} not finished after {timeout}s; finished: {self.finished}"


def _broker_url(redis_url: str) -> str:
    """The Redis URL with a neighbouring database number.

    The tests' cache lives on REDIS_URL's database and every test clears it with
    FLUSHDB, so any test run on this machine would wipe the worker's queue there. The
    broker of the worker test uses the database next to it, which nothing flushes.
    """
    parts = urlsplit(redis_url)
    db = int(parts.path.strip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{db - 1 if db > 0 else 1}"))


# Celery caches these on app.amqp from the settings of the moment they are first used; a
# worker on a queue of its own must not leave them behind for the rest of the run.
_AMQP_CACHED = ("queues", "default_queue", "router")


def _amqp_saved() -> tuple[dict[str, Any], Any]:
    cached = {name: app.amqp.__dict__.get(name) for name in _AMQP_CACHED}
    queues = cached["queues"]
    return cached, (queues._consume_from if queues is not None else None)


def _amqp_restore(cached: dict[str, Any], consume_from: Any) -> None:
    for name, value in cached.items():
        if value is None:
            app.amqp.__dict__.pop(name, None)
        else:
            app.amqp.__dict__[name] = value
    if cached["queues"] is not None:
        cached["queues"]._consume_from = consume_from


def _reset_connection_pools() -> None:
    """Close pooled broker connections so the next publish uses the current broker_url."""
    kombu.pools.reset()
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def celery_worker(settings: Any) -> Iterator[WorkerProbe]:
    """A Celery worker thread consuming from Redis on a queue of this test's own, with
    eager mode off."""
    if not settings.REDIS_URL:
        pytest.skip("!!! REDIS_URL is unset: the real Celery worker test needs Redis !!!")
    queue = f"sessionhub-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    names = ("task_always_eager", "task_default_queue", "broker_url")
    saved = {name: app.conf[name] for name in names}
    amqp_cached, consume_from = _amqp_saved()
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.task_always_eager = False
    app.conf.task_default_queue = queue
    app.conf.broker_url = _broker_url(settings.REDIS_URL)
    _reset_connection_pools()
    probe = WorkerProbe()
    task_postrun.connect(probe.on_postrun, weak=False)
    task_failure.connect(probe.on_failure, weak=False)
    try:
        with start_worker(
            app, pool="solo", queues=[queue], perform_ping_check=False, shutdown_timeout=30
        ):
            yield probe
    finally:
        task_postrun.disconnect(probe.on_postrun)
        task_failure.disconnect(probe.on_failure)
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(queue)
        for name, value in saved.items():
            app.conf[name] = value
        _amqp_restore(amqp_cached, consume_from)
        _reset_connection_pools()


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.mark.django_db(transaction=True)
def test_fixture_through_a_real_worker(
    live_server: Any, token: str, celery_worker: WorkerProbe
) -> None:
    lines = claude_code_as_sent("compact", prefix="worker-")
    for line in lines:
        response = requests.post(
            f"{live_server.url}/api/v1/hooks/claude-code",
            json=line,
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
    session = Session.objects.get(external_id=lines[0]["session_id"])
    last_event = LifecycleEvent.objects.filter(session=session).order_by("-id").first()

    def done() -> bool:
        current = Session.objects.get(pk=session.pk)
        summary = Summary.objects.filter(session=session).first()
        return (
            summary is not None
            and summary.events_seen == current.event_count == len(lines)
            and current.memory_cursor == last_event.id
            and current.memory_dirty_at is None
        )

    wait_until(done, "the worker to distil the session")
    # The work really went through the broker to the worker thread.
    assert celery_worker.finished
    assert threading.current_thread().name not in celery_worker.threads
    assert not celery_worker.failed

    posts = [x for x in lines if x["hook_event_name"] == "PostToolUse"]
    stops = [x for x in lines if x["hook_event_name"] == "Stop"]
    assert Observation.objects.filter(session=session).count() == len(posts)
    assert StreamTail.objects.filter(session=session).count() == len(stops)
    summary = Summary.objects.get(session=session)
    assert summary.final_message == stops[-1]["last_assistant_message"]
    assert stops[-1]["last_assistant_message"] in summary.completed
    features = SessionFeatures.objects.get(session=session)
    # The fixture's TODO (task-1862) is in the model's thinking: no pending task (issue 32).
    # What is: the item its task list left open (the step its first answer handed on, the
    # second turn did).
    assert "task-1862" not in [t["id"] for t in features.pending_tasks]
    assert [(t["text"], t["source"]) for t in features.pending_tasks] == [
        ("Purge device tokens unregistered for 30 days", "task_list")
    ]
    assert "apns" in features.hot_topics
    assert lines[0]["cwd"] in features.active_projects

    before = snapshot(session)
    ids = [tasks.process_session.delay(str(session.pk)).id for _ in range(2)]
    celery_worker.wait_for(ids)
    assert all(celery_worker.finished[i] == "SUCCESS" for i in ids), celery_worker.finished
    assert snapshot(session) == before


@pytest.mark.django_db(transaction=True)
def test_failure_in_a_real_worker_is_recorded(celery_worker: WorkerProbe) -> None:
    session = broken_session()
    task_id = tasks.process_session.delay(str(session.pk)).id
    celery_worker.wait_for([task_id])
    assert celery_worker.finished[task_id] == "FAILURE"
    failure = TaskFailure.objects.get(task_id=task_id)
    assert failure.task_name == "memory.tasks.process_session"
    assert failure.args == [str(session.pk)]
    assert failure.exception.startswith("AttributeError")
    session.refresh_from_db()
    assert session.memory_dirty_at is not None  # left for the outbox sweep
