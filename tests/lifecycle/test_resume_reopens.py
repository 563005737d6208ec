"""A resume stamped after a session's end reopens it (``claude --resume`` / ``--continue``
keep the session id and fire ``SessionStart source=resume`` after the earlier
``SessionEnd``); a late event from before the end reopens nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from lifecycle import services, state
from lifecycle.adapters import claude_code
from lifecycle.models import EventKind, Session, SessionStatus
from sessionhub.models import Team

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def folded(*events: tuple[str, float]) -> Session:
    session = Session()
    state.fold(
        session,
        [
            state.FoldEvent(kind=k, occurred_at=at(m), facts={"reason": "other"}, order=i)
            for i, (k, m) in enumerate(events)
        ],
    )
    return session


START, RESUME, END, PROMPT = (
    EventKind.SESSION_START,
    EventKind.SESSION_RESUME,
    EventKind.SESSION_END,
    EventKind.PROMPT,
)


def test_resume_after_the_end_reopens_and_records_the_gap() -> None:
    session = folded((START, 0), (PROMPT, 1), (END, 10), (RESUME, 70), (PROMPT, 71))
    assert session.status == SessionStatus.ACTIVE
    assert session.ended_at is None
    assert session.end_reason == ""
    assert session.suspend_count == 1
    assert session.suspended_seconds == 60 * 60
    assert session.prompt_count == 2


def test_the_next_end_moves_ended_at_to_the_last_end() -> None:
    session = folded((START, 0), (END, 10), (RESUME, 70), (END, 80), (RESUME, 100), (END, 105))
    assert session.status == SessionStatus.ENDED
    assert session.ended_at == at(105)
    assert session.suspend_count == 2
    assert session.suspended_seconds == (60 + 20) * 60


@pytest.mark.parametrize("late", [PROMPT, EventKind.TOOL_USE, START, RESUME])
def test_a_late_event_from_before_the_end_reopens_nothing(late: str) -> None:
    session = folded((START, 0), (END, 10), (late, 5))
    assert session.status == SessionStatus.ENDED
    assert session.ended_at == at(10)
    assert session.suspend_count == 0


def test_an_event_after_the_end_that_is_no_resume_reopens_nothing() -> None:
    session = folded((START, 0), (END, 10), (PROMPT, 20))
    assert (session.status, session.ended_at) == (SessionStatus.ENDED, at(10))


def test_a_first_start_stamped_after_the_end_reopens_nothing() -> None:
    # A skewed clock: the end arrives first, then the session's only start.
    session = folded((PROMPT, 0), (END, 10), (START, 20))
    assert (session.status, session.ended_at, session.has_start) == (
        SessionStatus.ENDED,
        at(10),
        True,
    )


@pytest.mark.django_db
def test_ingested_in_order_and_refolded_the_same(team: Team) -> None:
    """The ingest path, step by step and then with a late event forcing a refold."""
    sid = "5b1e0c55-7d0e-4f43-9f0e-2d9c2b1f0a11"

    def hook(name: str, minutes: float, **extra: object) -> dict:
        return {
            "hook_event_name": name,
            "session_id": sid,
            "cwd": "/w/p",
            "sessionhub": {
                "event_id": f"{name}-{minutes}",
                "occurred_at": at(minutes).isoformat(),
            },
            **extra,
        }

    def send(*bodies: dict) -> None:
        results = services.events_ingest(
            team=team,
            bodies=list(bodies),
            adapter=lambda b, now: claude_code.adapt(b, gateway="t", now=now),
        )
        assert all(r.status == services.ACCEPTED for r in results), results

    send(hook("SessionStart", 0, source="startup"), hook("SessionEnd", 10, reason="other"))
    session = Session.objects.get(external_id=sid)
    assert (session.status, session.ended_at) == (SessionStatus.ENDED, at(10))
    send(hook("SessionStart", 40, source="resume"))
    session.refresh_from_db()
    assert (session.status, session.ended_at, session.suspend_count) == (
        SessionStatus.ACTIVE,
        None,
        1,
    )
    send(hook("SessionEnd", 50, reason="other"))
    session.refresh_from_db()
    assert (session.status, session.ended_at) == (SessionStatus.ENDED, at(50))
    assert session.suspended_seconds == 30 * 60
    # A late prompt from the first stretch: refolded, same ends.
    send(hook("UserPromptSubmit", 5, prompt="late words"))
    session.refresh_from_db()
    assert (session.status, session.ended_at, session.prompt_count) == (
        SessionStatus.ENDED,
        at(50),
        1,
    )


@pytest.mark.django_db
@pytest.mark.parametrize("origin_first", [True, False])
def test_a_fork_is_linked_when_its_turn_names_the_session_it_came_from(
    team: Team, origin_first: bool
) -> None:
    """``--fork-session`` (and the resumes of releases that minted new ids) starts a new
    session; its transcript, written at its first turn, names the earlier one, and the
    client sends that name with the Stop. Whichever arrives first, the two are linked, and
    a subagent's end is no turn of either."""

    def hook(sid: str, name: str, minutes: float, **extra: object) -> dict:
        meta = {"event_id": f"{sid}-{name}-{minutes}", "occurred_at": at(minutes).isoformat()}
        meta.update(extra.pop("sessionhub", {}))  # type: ignore[arg-type]
        return {
            "hook_event_name": name,
            "session_id": sid,
            "cwd": "/w/p",
            "sessionhub": meta,
            **extra,
        }

    def send(*bodies: dict) -> None:
        results = services.events_ingest(
            team=team,
            bodies=list(bodies),
            adapter=lambda b, now: claude_code.adapt(b, gateway="t", now=now),
        )
        assert all(r.status == services.ACCEPTED for r in results), results

    origin = [hook("origin", "SessionStart", 0, source="startup"), hook("origin", "SessionEnd", 10)]
    fork = [
        hook("fork", "SessionStart", 20, source="fork"),
        hook("fork", "UserPromptSubmit", 21, prompt="try another way"),
        hook("fork", "SubagentStop", 22, agent_id="a1", agent_type="explore"),
        hook("fork", "Stop", 23, sessionhub={"resumed_from": "origin"}),
        hook("fork", "SessionEnd", 24, sessionhub={"resumed_from": "origin"}),
    ]
    for batch in [origin, fork] if origin_first else [fork, origin]:
        for body in batch:
            send(body)
    earlier = Session.objects.get(external_id="origin")
    later = Session.objects.get(external_id="fork")
    assert later.previous_session_id == earlier.pk
    assert later.previous_external_id == "origin"
    assert later.turn_count == 1
