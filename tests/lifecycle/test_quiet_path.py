"""A lone event that moves no state is stored by one statement (lifecycle/ingest/quick.py);
whatever the events and their order, that gives the session and the log the general
path would give (Hypothesis), and the statement steps aside whenever it must."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lifecycle import services
from lifecycle.ingest import quick
from lifecycle.models import LifecycleEvent, Session, Source
from sessionhub.models import Team
from sessionhub.services import api_token_create

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="the one-statement path is PostgreSQL's"
    ),
]
# Within the crash horizon (the embedded sweep closes sessions silent for hours).
T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)

_SKIPPED = {"id", "team", "agent", "created_at", "updated_at", "memory_dirty_at"}
_KINDS = [
    "session_start",
    "prompt",
    "tool_use",
    "tool_use",
    "tool_use",
    "notification",
    "other",
    "turn_end",
    "session_suspend",
    "session_end",
    "compaction_before",
    "compaction_after",
]

canonical_event = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(_KINDS),
        "second": st.integers(min_value=0, max_value=40),
        "phase": st.sampled_from(["", "pre", "post"]),
        "model": st.sampled_from(["", "", "opus", "haiku"]),
        "token_count": st.one_of(st.none(), st.integers(min_value=0, max_value=10**6)),
        "message_count": st.one_of(st.none(), st.integers(min_value=0, max_value=500)),
        "cwd": st.sampled_from(["", "", "/src/app", "/src/other"]),
        "repeat": st.integers(min_value=0, max_value=9),
    }
)
openclaw_event = st.fixed_dictionaries(
    {
        "hook": st.sampled_from(
            [
                "session_start",
                "after_tool_call",
                "before_tool_call",
                "before_prompt_build",
                "agent_end",
                "session_suspend",
                "session_end",
            ]
        ),
        "second": st.integers(min_value=0, max_value=40),
        "trigger": st.sampled_from(["", "user", "heartbeat", "cron"]),
        "model": st.sampled_from(["", "gpt", "sonnet"]),
        "channel": st.sampled_from(["", "discord", "cli"]),
    }
)


def canonical_bodies(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    bodies = []
    for n, e in enumerate(events):
        body: dict[str, Any] = {
            # Now and then an event id again: a redelivery (same body) or a conflict.
            "event_id": f"e-{n - 1 if e['repeat'] == 0 and n else n}",
            "kind": e["kind"],
            "agent_id": "agent",
            "session_id": "the-session",
            "occurred_at": (T0 + timedelta(seconds=e["second"])).isoformat(),
            "phase": e["phase"] if e["kind"] == "tool_use" else "",
            "tool_name": "grep",
        }
        for key in ("model", "token_count", "message_count", "cwd"):
            if e[key] not in ("", None):
                body[key] = e[key]
        bodies.append(body)
    return bodies


def openclaw_bodies(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    bodies = []
    for n, e in enumerate(events):
        ctx: dict[str, Any] = {"sessionId": "oc-session", "agentId": "main"}
        for key, name in (("trigger", "trigger"), ("model", "modelId"), ("channel", "channelId")):
            if e[key]:
                ctx[name] = e[key]
        bodies.append(
            {
                "eventId": f"oc-{n}",
                "hook": e["hook"],
                "event": {"toolName": "read", "prompt": "go on", "messages": []},
                "ctx": ctx,
                "ts": int((T0 + timedelta(seconds=e["second"])).timestamp() * 1000),
            }
        )
    return bodies


def deliver(team: Team, source: str, bodies: list[dict[str, Any]]) -> list[Any]:
    """Each body in a request of its own: per request its outcome and the sessions after."""
    token, _ = api_token_create(team=team, name="gw", scopes=["ingest"])
    adapter = services.adapter_for(source, token)
    steps = []
    for body in bodies:
        [result] = services.events_ingest(team=team, bodies=[body], adapter=adapter)
        steps.append(((result.status, result.code or ""), stored(team)[0]))
    return steps


def stored(team: Team) -> tuple[list[dict[str, Any]], list[tuple[Any, ...]]]:
    sessions = [
        {
            f.name: getattr(s, f.attname)
            for f in Session._meta.concrete_fields
            if f.name not in _SKIPPED
        }
        | {"dirty": s.memory_dirty_at is not None}
        for s in Session.objects.filter(team=team).order_by("external_id")
    ]
    events = sorted(
        LifecycleEvent.objects.filter(team=team).values_list(
            "event_id", "kind", "phase", "occurred_at", "facts", "payload", "session__external_id"
        )
    )
    return sessions, events


def both_ways(
    monkeypatch: pytest.MonkeyPatch, source: str, bodies: list[dict[str, Any]]
) -> tuple[Any, Any, int]:
    quiet_calls = 0
    real_store = quick.event_store_quiet

    def counting(**kwargs: Any) -> Any:
        nonlocal quiet_calls
        answer = real_store(**kwargs)
        quiet_calls += answer is not None
        return answer

    quick_team = Team.objects.create(name="q", slug=f"q-{uuid.uuid4().hex[:10]}")
    general_team = Team.objects.create(name="g", slug=f"g-{uuid.uuid4().hex[:10]}")
    with monkeypatch.context() as patch:
        patch.setattr(services, "event_store_quiet", counting)
        fast = (deliver(quick_team, source, bodies), stored(quick_team))
    with monkeypatch.context() as patch:
        patch.setattr(services, "quiet", lambda event: False)
        general = (deliver(general_team, source, bodies), stored(general_team))
    return fast, general, quiet_calls


_HYPOTHESIS = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@_HYPOTHESIS
@given(events=st.lists(canonical_event, min_size=1, max_size=25))
def test_canonical_events_one_at_a_time_store_the_same_either_way(
    db: Any, monkeypatch: pytest.MonkeyPatch, events: list[dict[str, Any]]
) -> None:
    fast, general, _ = both_ways(monkeypatch, Source.GENERIC, canonical_bodies(events))
    assert fast == general


@_HYPOTHESIS
@given(events=st.lists(openclaw_event, min_size=1, max_size=25))
def test_openclaw_hooks_one_at_a_time_store_the_same_either_way(
    db: Any, monkeypatch: pytest.MonkeyPatch, events: list[dict[str, Any]]
) -> None:
    fast, general, _ = both_ways(monkeypatch, Source.OPENCLAW, openclaw_bodies(events))
    assert fast == general


def test_a_tool_session_takes_the_one_statement_path_and_steps_aside_where_it_must(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = [
        {"kind": kind, "second": second, "phase": phase, "model": "", "token_count": None}
        | {"message_count": None, "cwd": "", "repeat": 5}
        for kind, second, phase in [
            ("session_start", 0, ""),
            ("prompt", 1, ""),  # quiet
            ("tool_use", 2, "pre"),  # quiet
            ("tool_use", 3, "post"),  # quiet
            ("tool_use", 1, "post"),  # earlier than the latest: the general path refolds
            ("session_suspend", 5, ""),
            ("tool_use", 6, "post"),  # wakes the session: general path
            ("notification", 7, ""),  # quiet
            ("session_end", 8, ""),
            ("tool_use", 9, "post"),  # after the end: general path
        ]
    ]
    fast, general, quiet_calls = both_ways(monkeypatch, Source.GENERIC, canonical_bodies(events))
    assert fast == general
    assert quiet_calls == 4
    [session], _ = fast[1]
    assert (session["status"], session["event_count"], session["tool_use_count"]) == (
        "ended",
        10,
        4,
    )
    assert session["prompt_count"] == 1


def _prepared() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def test_the_quiet_statement_is_prepared_once_per_connection(db: Any) -> None:
    team = Team.objects.create(slug="prepared", name="prepared")
    events = [
        {"kind": kind, "second": second, "phase": "post", "model": "", "token_count": None}
        | {"message_count": None, "cwd": "", "repeat": 5}
        for kind, second in [("session_start", 0), ("tool_use", 1), ("tool_use", 2)]
    ]
    steps = deliver(team, Source.GENERIC, canonical_bodies(events))
    assert [status for (status, _), _ in steps] == ["accepted"] * 3
    # PostgreSQL shows it with $n for psycopg's named parameters.
    quiet_ones = [s for s in _prepared() if "FOR UPDATE" in s and "AS t SET" in s]
    assert len(quiet_ones) == 1  # prepared by the first tool use, run by the second
    assert "%(" not in quiet_ones[0] and "$1" in quiet_ones[0]


def test_prepared_statements_can_be_turned_off(
    db: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sessionhub.db.statements import server_bound_cursor

    probe = f"SELECT 1 AS probe_{uuid.uuid4().hex}"
    monkeypatch.setitem(settings.SESSIONHUB, "PREPARED_STATEMENTS", False)
    with server_bound_cursor(prepared=True) as cursor:
        cursor.execute(probe)
    assert probe not in _prepared()
    monkeypatch.setitem(settings.SESSIONHUB, "PREPARED_STATEMENTS", True)
    with server_bound_cursor(prepared=True) as cursor:
        cursor.execute(probe)
        assert cursor.fetchone() == (1,)
    assert probe in _prepared()


def test_the_quiet_statement_binds_its_choices_as_plain_strings(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """psycopg finds a parameter's dumper by its exact type: a choices member (an enum
    that is also a str) sends each new cursor down the slow lookup, so the statement
    binds the kind and the source as the plain strings they stand for."""
    bound: list[dict[str, Any]] = []
    real = quick.server_bound_cursor

    class Recording:
        def __init__(self, cursor: Any) -> None:
            self.cursor = cursor

        def execute(self, statement: str, params: dict[str, Any]) -> Any:
            bound.append(params)
            return self.cursor.execute(statement, params)

        def fetchone(self) -> Any:
            return self.cursor.fetchone()

    class Recorded:
        def __enter__(self) -> Recording:
            self.inner = real(prepared=True)
            return Recording(self.inner.__enter__())

        def __exit__(self, *exc: Any) -> Any:
            return self.inner.__exit__(*exc)

    monkeypatch.setattr(quick, "server_bound_cursor", lambda **_: Recorded())
    team = Team.objects.create(slug="plain-choices", name="plain")
    events = [
        {"kind": kind, "second": second, "phase": "post", "model": "", "token_count": None}
        | {"message_count": None, "cwd": "", "repeat": 5}
        for kind, second in [("session_start", 0), ("tool_use", 1)]
    ]
    steps = deliver(team, Source.GENERIC, canonical_bodies(events))
    assert [status for (status, _), _ in steps] == ["accepted"] * 2
    [params] = bound  # the tool use; the start took the general path
    assert (params["e_kind"], params["e_source"], params["source"]) == (
        "tool_use",
        "generic",
        "generic",
    )
    assert {type(params[name]) for name in ("e_kind", "e_source", "source")} == {str}
    stored = LifecycleEvent.objects.get(team=team, kind="tool_use")
    assert (stored.kind, stored.source) == ("tool_use", "generic")
