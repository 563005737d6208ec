"""Memory work queued from a hook request goes through the process's publishing thread:
the answer does not wait on the broker, nothing handed over is dropped while the thread
lives, and in embedded mode (tasks in the process) the work still runs before the answer."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from lifecycle.ingest import outbox
from lifecycle.models import Session
from memory import tasks
from sessionhub.celery import app
from tests.conftest import claude_code_hooks

pytestmark = pytest.mark.django_db


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], float]]:
    """What the publishing threads publish, recorded in place of the broker."""
    done: list[tuple[list[str], float]] = []
    monkeypatch.setattr(outbox, "enqueue_session_work", lambda ids, c=0: done.append((ids, c)))
    return done


@pytest.fixture
def publisher() -> Any:
    own = outbox._Publisher()
    yield own
    own.stop()


def test_work_handed_over_is_published_in_order(
    publisher: Any, published: list[tuple[list[str], float]]
) -> None:
    for n in range(50):
        publisher.submit([f"s-{n}"], n / 10)
    assert publisher.flush(5.0)
    assert published == [([f"s-{n}"], n / 10) for n in range(50)]


def test_the_caller_does_not_wait_for_a_slow_broker(
    publisher: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    done: list[list[str]] = []

    def stuck(ids: list[str], countdown: float = 0) -> None:
        release.wait(10)
        done.append(ids)

    monkeypatch.setattr(outbox, "enqueue_session_work", stuck)
    started = time.monotonic()
    publisher.submit(["a"], 0)
    publisher.submit(["b"], 0)
    assert time.monotonic() - started < 1.0
    assert not publisher.flush(0.2)  # still held up by the broker
    release.set()
    assert publisher.flush(5.0)
    assert done == [["a"], ["b"]]


def test_a_failed_publish_leaves_the_thread_running(
    publisher: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    done: list[list[str]] = []

    def flaky(ids: list[str], countdown: float = 0) -> None:
        if ids == ["bad"]:
            raise RuntimeError("broker said no")
        done.append(ids)

    monkeypatch.setattr(outbox, "enqueue_session_work", flaky)
    publisher.submit(["bad"], 0)
    publisher.submit(["good"], 0)
    assert publisher.flush(5.0)
    assert done == [["good"]]


def test_past_the_limit_work_is_left_to_the_outbox_sweep(
    publisher: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    release = threading.Event()
    monkeypatch.setattr(outbox, "enqueue_session_work", lambda ids, c=0: release.wait(10))
    monkeypatch.setattr(publisher, "LIMIT", 3)
    publisher._queue = outbox.queue.Queue(3)
    publisher.submit(["held"], 0)  # the thread takes it and waits on the broker
    deadline = time.monotonic() + 5
    while not publisher._queue.empty() and time.monotonic() < deadline:
        time.sleep(0.01)
    for n in range(5):
        publisher.submit([f"s-{n}"], 0)
    assert publisher._queue.qsize() == 3
    assert "left to the outbox sweep" in caplog.text
    assert not publisher.flush(0.2)  # not even room for the flush's own marker
    release.set()
    assert publisher.flush(5.0)


def test_a_forked_child_starts_its_own_thread(
    publisher: Any, published: list[tuple[list[str], float]], monkeypatch: pytest.MonkeyPatch
) -> None:
    publisher.submit(["parent"], 0)
    assert publisher.flush(5.0)
    parents = publisher._thread
    # As a child after fork sees it: another pid, and its parent's thread object.
    pid = os.getpid()
    monkeypatch.setattr(os, "getpid", lambda: pid + 1)
    assert not publisher._running()
    publisher.submit(["child"], 0)
    assert publisher._thread is not parents
    assert publisher.flush(5.0)
    assert published == [(["parent"], 0), (["child"], 0)]


def test_stopping_publishes_what_waits(
    publisher: Any, published: list[tuple[list[str], float]]
) -> None:
    for n in range(20):
        publisher.submit([f"s-{n}"], 0)
    publisher.stop()
    assert len(published) == 20
    assert not publisher._running()


def test_a_hook_request_queues_through_the_thread(
    api: Any, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    """Not eager (a worker elsewhere): the request hands the work over and answers; the
    thread publishes the run for the session the event turned dirty."""
    queued: list[tuple[Any, Any]] = []
    caller: list[str] = []

    def apply_async(*args: Any, **kw: Any) -> None:
        caller.append(threading.current_thread().name)
        queued.append((args, kw))

    monkeypatch.setattr(tasks.process_session, "apply_async", apply_async)
    monkeypatch.setitem(app.conf, "task_always_eager", False)
    line = claude_code_hooks("basic")[0]
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post("/api/v1/hooks/claude-code", line, format="json")
    assert response.status_code == 200, response.content
    assert outbox.published(5.0)
    session = Session.objects.get(external_id=line["session_id"])
    assert [args for args, _ in queued] == [((str(session.pk),),)]
    # A lone tool use of a known session (PostgreSQL: the one-statement path), once its
    # memory has caught up, turns it dirty again.
    Session.objects.filter(pk=session.pk).update(memory_dirty_at=None)
    tool_use = next(h for h in claude_code_hooks("basic") if h["hook_event_name"] == "PostToolUse")
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post("/api/v1/hooks/claude-code", tool_use, format="json")
    assert response.status_code == 200, response.content
    assert outbox.published(5.0)
    assert [args for args, _ in queued] == [((str(session.pk),),)] * 2
    assert caller == ["sessionhub-publisher"] * 2


def test_in_embedded_mode_the_work_is_done_before_the_answer(
    api: Any, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    caller: list[str] = []
    monkeypatch.setattr(
        outbox,
        "enqueue_session_work",
        lambda ids, c=0: caller.append(threading.current_thread().name),
    )
    assert app.conf.task_always_eager
    line = claude_code_hooks("basic")[0]
    with django_capture_on_commit_callbacks(execute=True):
        assert api.post("/api/v1/hooks/claude-code", line, format="json").status_code == 200
    assert caller == [threading.current_thread().name]
