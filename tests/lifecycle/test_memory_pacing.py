"""A busy open session's memory runs at the pace MEMORY_BUSY_SECONDS sets: when its last
run found it clean, the run that ingestion queues for its next event waits out the rest
of that interval (both ingest paths); a quiet session's still comes after the short
settle; the worker records when it brought a session up to date."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from lifecycle.ingest import outbox, quick, store
from lifecycle.models import EventKind, Session
from memory import pipeline
from tests.conftest import claude_code_hooks
from tests.factories import EventFactory, LiveSessionFactory

pytestmark = pytest.mark.django_db(transaction=True)

SESSION = "c0ffee00-0000-4000-8000-000000000001"


@pytest.fixture
def pace(settings: Any) -> None:
    settings.SESSIONHUB = {
        **settings.SESSIONHUB,
        "MEMORY_SETTLE_SECONDS": 1.0,
        "MEMORY_BUSY_SECONDS": 6.0,
    }


def test_settle_delay(pace: None) -> None:
    now = timezone.now()
    assert outbox.settle_delay(None, now) == 1.0  # never ran: the burst settles
    assert outbox.settle_delay(now - timedelta(seconds=2), now) == pytest.approx(4.0)
    assert outbox.settle_delay(now - timedelta(seconds=5.5), now) == 1.0  # not less
    assert outbox.settle_delay(now - timedelta(minutes=5), now) == 1.0
    assert outbox.settle_delay(now + timedelta(seconds=3), now) == 6.0  # a clock ahead


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], float]]:
    """What both ingest paths queue, instead of running it."""
    calls: list[tuple[list[str], float]] = []

    def record(ids: Any, countdown: float = 0) -> int:
        calls.append((list(ids), countdown))
        return len(calls)

    monkeypatch.setattr(store, "enqueue_session_work_soon", record)
    monkeypatch.setattr(quick, "enqueue_session_work_soon", record)
    return calls


def tool_use(n: int) -> dict[str, Any]:
    return {
        "session_id": SESSION,
        "cwd": "/home/dev/src/pacing",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": f"ls {n}"},
        "tool_response": {"stdout": "ok", "stderr": ""},
        "tool_use_id": f"toolu_pacing{n}",
    }


def lifecycle_line(name: str, **fields: Any) -> dict[str, Any]:
    """A start or end of the session, on the fixture's own SessionStart line."""
    start = claude_code_hooks("basic")[0]
    return {**start, "session_id": SESSION, "hook_event_name": name, **fields}


def started(api: APIClient) -> Session:
    response = api.post(
        "/api/v1/hooks/claude-code", lifecycle_line("SessionStart", source="startup"), format="json"
    )
    assert response.status_code == 200, response.content
    return Session.objects.get(external_id=SESSION)


def run_finished(session: Session, seconds_ago: float | None) -> None:
    """As a worker leaves a session it found clean."""
    ran = None if seconds_ago is None else timezone.now() - timedelta(seconds=seconds_ago)
    Session.objects.filter(pk=session.pk).update(memory_dirty_at=None, memory_run_at=ran)


@pytest.mark.parametrize("batch", [False, True], ids=["one event", "a batch"])
def test_a_busy_session_waits_out_its_pace(
    api: APIClient, pace: None, queued: list[tuple[list[str], float]], batch: bool
) -> None:
    session = started(api)
    run_finished(session, seconds_ago=2)
    queued.clear()
    body: Any = [tool_use(1), tool_use(2)] if batch else tool_use(1)
    response = api.post("/api/v1/hooks/claude-code", body, format="json")
    assert response.status_code == 200, response.content
    assert [ids for ids, _ in queued] == [[str(session.pk)]]
    assert 3.5 < queued[0][1] <= 4.0  # six seconds after the run, not one after the event

    # Marked now: the next events queue nothing (the queued run takes them in).
    assert api.post("/api/v1/hooks/claude-code", tool_use(3), format="json").status_code == 200
    assert len(queued) == 1


@pytest.mark.parametrize("seconds_ago", [None, 60], ids=["never ran", "ran long ago"])
def test_a_quiet_session_settles_briefly(
    api: APIClient, pace: None, queued: list[tuple[list[str], float]], seconds_ago: float | None
) -> None:
    session = started(api)
    run_finished(session, seconds_ago)
    queued.clear()
    assert api.post("/api/v1/hooks/claude-code", tool_use(1), format="json").status_code == 200
    assert queued == [([str(session.pk)], 1.0)]


def test_an_ending_session_is_queued_at_once(
    api: APIClient, pace: None, queued: list[tuple[list[str], float]]
) -> None:
    session = started(api)
    run_finished(session, seconds_ago=1)
    queued.clear()
    end = lifecycle_line("SessionEnd", reason="other")
    assert api.post("/api/v1/hooks/claude-code", end, format="json").status_code == 200
    assert queued == [([str(session.pk)], 0)]


def test_the_worker_records_its_run_when_it_clears_the_mark() -> None:
    session = LiveSessionFactory()
    EventFactory(session=session, kind=EventKind.PROMPT, facts={"text": "hello"})
    Session.objects.filter(pk=session.pk).update(memory_dirty_at=timezone.now())
    before = timezone.now()
    assert pipeline.session_process(str(session.pk))
    session.refresh_from_db()
    assert session.memory_dirty_at is None
    assert session.memory_run_at is not None and session.memory_run_at >= before


def test_a_run_overtaken_by_new_events_leaves_its_time_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Events that came in during the run keep the mark set, and the run's time is not
    recorded: the session is not clean, and the run queued for it stands."""
    session = LiveSessionFactory()
    EventFactory(session=session, kind=EventKind.PROMPT, facts={"text": "hello"})
    Session.objects.filter(pk=session.pk).update(memory_dirty_at=timezone.now())
    real = pipeline._tails_record

    def meanwhile(*args: Any, **kwargs: Any) -> Any:
        Session.objects.filter(pk=session.pk).update(
            memory_dirty_at=timezone.now() + timedelta(seconds=1)
        )
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "_tails_record", meanwhile)
    assert pipeline.session_process(str(session.pk))
    session.refresh_from_db()
    assert session.memory_dirty_at is not None
    assert session.memory_run_at is None


# --- what a run records, in one statement --------------------------------------------------


def _marked(**fields: Any) -> Session:
    session = LiveSessionFactory()
    Session.objects.filter(pk=session.pk).update(**fields)
    session.refresh_from_db()
    return session


def test_a_clean_run_clears_the_mark_and_says_nothing_waits() -> None:
    session = _marked(memory_dirty_at=timezone.now(), memory_cursor=3)
    before = timezone.now()
    waiting = outbox.memory_caught_up(
        str(session.pk), dirty_mark=session.memory_dirty_at, cursor=12
    )
    assert waiting is None
    session.refresh_from_db()
    assert (session.memory_dirty_at, session.memory_cursor) == (None, 12)
    assert session.memory_run_at is not None and session.memory_run_at >= before


def test_an_overtaken_run_moves_its_cursor_and_says_the_session_waits() -> None:
    first = timezone.now()
    session = _marked(memory_dirty_at=first)
    newer = first + timedelta(seconds=1)
    Session.objects.filter(pk=session.pk).update(memory_dirty_at=newer)  # an event meanwhile
    waiting = outbox.memory_caught_up(str(session.pk), dirty_mark=first, cursor=40)
    assert waiting == session.status
    session.refresh_from_db()
    assert session.memory_dirty_at == newer  # the next run's mark stands
    assert session.memory_run_at is None  # and the run is not recorded as having caught up
    assert session.memory_cursor == 40


def test_a_run_never_moves_the_cursor_back() -> None:
    """Two runs of a session overlapped (the outbox sweep queued one beside ingestion's):
    the one that read fewer events finishes last and must not hand them out again."""
    session = _marked(memory_dirty_at=timezone.now(), memory_cursor=500)
    mark = session.memory_dirty_at
    assert outbox.memory_caught_up(str(session.pk), dirty_mark=mark, cursor=120) is None
    session.refresh_from_db()
    assert session.memory_cursor == 500
    assert session.memory_dirty_at is None


def test_a_run_of_a_session_nobody_marked_records_its_run() -> None:
    session = _marked(memory_dirty_at=None, memory_cursor=0)
    assert outbox.memory_caught_up(str(session.pk), dirty_mark=None, cursor=7) is None
    session.refresh_from_db()
    assert session.memory_cursor == 7
    assert session.memory_run_at is not None
    # A mark set since the run read the session (None then) is the next run's.
    Session.objects.filter(pk=session.pk).update(memory_dirty_at=timezone.now())
    assert outbox.memory_caught_up(str(session.pk), dirty_mark=None, cursor=9) == session.status


def test_a_run_of_a_session_since_deleted_finds_nothing() -> None:
    session = _marked(memory_dirty_at=timezone.now())
    mark = session.memory_dirty_at
    Session.objects.filter(pk=session.pk).delete()
    assert outbox.memory_caught_up(str(session.pk), dirty_mark=mark, cursor=1) is None
