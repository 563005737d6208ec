"""Every gateway fixture replayed over real HTTP against a live server, and checked in the
database: status, end reason, counts, suspend/resume spans, chain links; sent twice and
stored once; shuffled and ending in the same state."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests
import time_machine
from django.utils import timezone

from lifecycle import services
from lifecycle.models import EventKind, LifecycleEvent, Session, SessionStatus
from tests.conftest import (
    CLAUDE_CODE_SCENARIOS,
    OPENCLAW_SCENARIOS,
    claude_code_hooks,
    openclaw_hooks,
)

pytestmark = pytest.mark.django_db(transaction=True)

BASE_TIME = datetime(2026, 11, 20, 18, 0, tzinfo=UTC)


def post(live_server: Any, token: str, path: str, body: Any) -> requests.Response:
    return requests.post(
        f"{live_server.url}/api/v1/{path}",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )


def with_client_fields(lines: list[dict[str, Any]], scenario: str) -> list[dict[str, Any]]:
    """Claude Code lines as the hook client sends them: with an event id and a time."""
    out = []
    for i, line in enumerate(lines):
        stamped = dict(line)
        stamped["sessionhub"] = {
            "event_id": f"{scenario}-{i}",
            "occurred_at": (BASE_TIME + timedelta(seconds=30 * i)).isoformat(),
        }
        out.append(stamped)
    return out


def replay(live_server: Any, token: str, path: str, lines: list[dict[str, Any]]) -> None:
    for line in lines:
        response = post(live_server, token, path, line)
        assert response.status_code == 200, response.text
        assert response.json()["results"][0]["status"] == "accepted", response.text


EXPECTED_CLAUDE_CODE = {
    # scenario: (status, end_reason, prompts, tool uses, turns, compactions)
    "basic": (SessionStatus.ENDED, "prompt_input_exit", 1, 5, 1, 0),
    "clear": (SessionStatus.ENDED, "clear", 1, 4, 1, 0),
    "compact": (SessionStatus.ENDED, "logout", 2, 8, 2, 1),
    "crash": (SessionStatus.ACTIVE, "", 1, 4, 1, 0),
    "secrets": (SessionStatus.ENDED, "prompt_input_exit", 2, 6, 2, 1),
}


@pytest.mark.parametrize("scenario", CLAUDE_CODE_SCENARIOS)
def test_claude_code_fixture_over_http(live_server: Any, token: str, scenario: str) -> None:
    lines = claude_code_hooks(scenario)
    replay(live_server, token, "hooks/claude-code", lines)

    session = Session.objects.get(external_id=lines[0]["session_id"])
    status, reason, prompts, tools, turns, compactions = EXPECTED_CLAUDE_CODE[scenario]
    assert session.status == status
    assert session.end_reason == reason
    assert (session.prompt_count, session.tool_use_count, session.turn_count) == (
        prompts,
        tools,
        turns,
    )
    assert session.compaction_count == compactions
    assert session.event_count == len(lines) == session.events.count()
    assert session.channel == "cli"
    assert session.cwd == lines[0]["cwd"]
    assert session.project == lines[0]["cwd"]
    assert session.agent.external_id.endswith(":" + lines[0]["cwd"])
    assert session.model == "claude-opus-4-1"
    kinds = list(session.events.order_by("occurred_at", "id").values_list("kind", flat=True))
    assert kinds[0] == EventKind.SESSION_START
    assert kinds.count(EventKind.SESSION_START) == 1
    if status == SessionStatus.ENDED:
        assert kinds[-1] == EventKind.SESSION_END
        assert session.ended_at is not None


def test_claude_code_crash_closed_by_the_sweep(live_server: Any, token: str) -> None:
    lines = claude_code_hooks("crash")
    replay(live_server, token, "hooks/claude-code", lines)
    session = Session.objects.get(external_id=lines[0]["session_id"])
    assert session.status == SessionStatus.ACTIVE
    last_event = session.last_event_at

    assert services.crashed_sessions_close() == 0  # not silent long enough yet

    with time_machine.travel(timezone.now() + timedelta(hours=5), tick=False):
        assert services.crashed_sessions_close() == 1
        assert services.crashed_sessions_close() == 0  # closing twice is a no-op
    session.refresh_from_db()
    assert session.status == SessionStatus.CRASHED
    assert session.end_reason == "crashed"
    assert session.recovered is True
    assert session.ended_at == last_event
    end = session.events.get(kind=EventKind.SESSION_END)
    assert end.source == "sessionhub"

    # A late event never reopens it.
    late = dict(lines[1], prompt="one more thing")
    assert post(live_server, token, "hooks/claude-code", late).status_code == 200
    session.refresh_from_db()
    assert session.status == SessionStatus.CRASHED
    assert session.prompt_count == EXPECTED_CLAUDE_CODE["crash"][2] + 1


EXPECTED_OPENCLAW = {
    # scenario: (status, end_reason, reported messages, suspends, compactions)
    "basic": (SessionStatus.ENDED, "new", 8, 0, 0),
    "compact": (SessionStatus.ENDED, "new", 14, 0, 1),
    "idle": (SessionStatus.ENDED, "idle_timeout", 6, 0, 0),
    "reset": (SessionStatus.ENDED, "reset", 4, 0, 0),
    "restart": (SessionStatus.ENDED, "new", 7, 1, 0),
}


@pytest.mark.parametrize("scenario", OPENCLAW_SCENARIOS)
def test_openclaw_fixture_over_http(live_server: Any, token: str, scenario: str) -> None:
    lines = openclaw_hooks(scenario)
    replay(live_server, token, "hooks/openclaw", lines)

    session_id = lines[0]["event"]["sessionId"]
    session = Session.objects.get(external_id=session_id)
    status, reason, messages, suspends, compactions = EXPECTED_OPENCLAW[scenario]
    assert session.status == status
    assert session.end_reason == reason
    assert session.message_count == messages
    assert session.suspend_count == suspends
    assert session.compaction_count == compactions
    # Every install calls its default agent "main": the token's gateway is part of it.
    assert session.agent.external_id == f"{session.team.slug}-gw:{lines[0]['ctx']['agentId']}"
    assert session.channel == "telegram"
    assert session.session_key == lines[0]["event"]["sessionKey"]
    # Every line belongs to the session, including message_received, which names only
    # the conversation.
    assert session.events.count() == len(lines) == session.event_count
    assert LifecycleEvent.objects.filter(session__isnull=True).count() == 0
    assert session.started_at == datetime.fromtimestamp(lines[0]["ts"] / 1000, tz=UTC)
    assert session.ended_at == datetime.fromtimestamp(lines[-1]["ts"] / 1000, tz=UTC)
    assert session.tool_use_count == 1
    assert session.turn_count == 1


def test_openclaw_restart_is_a_suspend_and_a_resume(live_server: Any, token: str) -> None:
    lines = openclaw_hooks("restart")
    replay(live_server, token, "hooks/openclaw", lines)
    session = Session.objects.get(external_id=lines[0]["event"]["sessionId"])
    kinds = list(session.events.order_by("occurred_at").values_list("kind", flat=True))
    assert kinds.count(EventKind.SESSION_START) == 1
    assert kinds.count(EventKind.SESSION_SUSPEND) == 1
    assert kinds.count(EventKind.SESSION_RESUME) == 1
    suspended = next(x for x in lines if x["hook"] == "session_end")["ts"]
    resumed = [x for x in lines if x["hook"] == "session_start"][1]["ts"]
    assert session.suspended_seconds == (resumed - suspended) / 1000

    detail = requests.get(
        f"{live_server.url}/api/v1/sessions/{session.pk}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    ).json()
    assert detail["suspend_spans"] == [
        {
            "suspended_at": datetime.fromtimestamp(suspended / 1000, tz=UTC)
            .isoformat()
            .replace("+00:00", "Z"),
            "resumed_at": datetime.fromtimestamp(resumed / 1000, tz=UTC)
            .isoformat()
            .replace("+00:00", "Z"),
            "seconds": (resumed - suspended) / 1000,
        }
    ]


def test_openclaw_chain_links(live_server: Any, token: str) -> None:
    """reset names the session it resumed from; basic names the one that follows it."""
    reset = openclaw_hooks("reset")
    replay(live_server, token, "hooks/openclaw", reset)
    session = Session.objects.get(external_id=reset[0]["event"]["sessionId"])
    assert session.previous_external_id == reset[0]["event"]["resumedFrom"]

    basic = openclaw_hooks("basic")
    replay(live_server, token, "hooks/openclaw", basic)
    first = Session.objects.get(external_id=basic[0]["event"]["sessionId"])
    next_id = basic[-1]["event"]["nextSessionId"]
    assert first.successor_external_id == next_id

    # The successor starts later: it is linked to its predecessor.
    start = {
        "hook": "session_start",
        "event": {"sessionId": next_id, "sessionKey": basic[0]["event"]["sessionKey"]},
        "ctx": {"agentId": "ops", "sessionId": next_id},
        "ts": basic[-1]["ts"] + 1000,
    }
    replay(live_server, token, "hooks/openclaw", [start])
    successor = Session.objects.get(external_id=next_id)
    assert successor.previous_session_id == first.pk


def test_batches_sent_twice_are_stored_once(live_server: Any, token: str) -> None:
    batches = [("hooks/openclaw", openclaw_hooks(s)) for s in OPENCLAW_SCENARIOS] + [
        ("hooks/claude-code", claude_code_hooks(s)) for s in CLAUDE_CODE_SCENARIOS
    ]
    for path, lines in batches:
        first = post(live_server, token, path, lines)
        assert first.status_code == 200, first.text
        assert first.json()["accepted"] == len(lines)
    snapshot = {
        s.external_id: (s.status, s.event_count, s.prompt_count, s.tool_use_count)
        for s in Session.objects.all()
    }
    total = LifecycleEvent.objects.count()

    for path, lines in batches:
        again = post(live_server, token, path, lines)
        assert again.status_code == 200
        body = again.json()
        assert body["accepted"] == 0
        assert body["duplicates"] == len(lines)
        assert {r["status"] for r in body["results"]} == {"duplicate"}

    assert LifecycleEvent.objects.count() == total == sum(len(lines) for _, lines in batches)
    assert {
        s.external_id: (s.status, s.event_count, s.prompt_count, s.tool_use_count)
        for s in Session.objects.all()
    } == snapshot


STATE_FIELDS = (
    "status",
    "end_reason",
    "started_at",
    "ended_at",
    "suspend_count",
    "suspended_seconds",
    "event_count",
    "prompt_count",
    "turn_count",
    "tool_use_count",
    "compaction_count",
    "reported_message_count",
)


def _state(session: Session) -> tuple[Any, ...]:
    return tuple(getattr(session, f) for f in STATE_FIELDS)


@pytest.mark.parametrize(
    ("path", "scenario"),
    [("hooks/openclaw", s) for s in OPENCLAW_SCENARIOS]
    + [("hooks/claude-code", s) for s in CLAUDE_CODE_SCENARIOS],
)
def test_shuffled_events_end_in_the_same_state(
    live_server: Any, make_token: Any, team: Any, path: str, scenario: str
) -> None:
    if path == "hooks/openclaw":
        lines = openclaw_hooks(scenario)
        session_id = lines[0]["event"]["sessionId"]
    else:
        lines = with_client_fields(claude_code_hooks(scenario), scenario)
        session_id = lines[0]["session_id"]

    in_order = make_token(team, name="in-order")[1]
    replay(live_server, in_order, path, lines)
    expected = _state(Session.objects.get(external_id=session_id))
    Session.objects.all().delete()
    LifecycleEvent.objects.all().delete()

    rng = random.Random(f"{path}-{scenario}")
    for attempt in range(3):
        shuffled = lines[:]
        rng.shuffle(shuffled)
        for line in shuffled:  # one request per event, in the shuffled order
            assert post(live_server, in_order, path, line).status_code == 200
        got = _state(Session.objects.get(external_id=session_id))
        assert got == expected, f"attempt {attempt}: order {[lines.index(x) for x in shuffled]}"
        Session.objects.all().delete()
        LifecycleEvent.objects.all().delete()
