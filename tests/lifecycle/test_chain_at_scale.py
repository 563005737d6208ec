"""The chain's reads and writes at a session's start and end find their sessions by index,
however many sessions the team has: the session that names a new one as its successor,
the stored sessions that name it as where they resumed from (``lifecycle/ingest/chain.py``;
the indexes ``session_successor_named`` and ``session_previous_named``). Before them each
start read every session of the team: 44 and 53 ms at 100,000 sessions, twice, on every
start the benchmark's summary probe made."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from lifecycle import services
from lifecycle.adapters import canonical
from lifecycle.models import Session, SessionStatus
from sessionhub.models import Team
from tests.conftest import claude_code_hooks, openclaw_hooks

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL query plans"),
]
STORED = 3000
T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=30)


def _deliver(team: Team, *events: dict[str, Any]) -> None:
    results = services.events_ingest(
        team=team,
        bodies=list(events),
        adapter=lambda body, now: canonical.adapt(body, now=now),
    )
    assert {r.status for r in results} == {services.ACCEPTED}, results


def _event(kind: str, minute: int, sid: str, **extra: Any) -> dict[str, Any]:
    return {
        "event_id": f"ev-{uuid.uuid4().hex}",
        "kind": kind,
        "occurred_at": (T0 + timedelta(minutes=minute)).isoformat(),
        "agent_id": "agent",
        "session_id": sid,
        "session_key": f"key-{sid}",
        **extra,
    }


def _seed(team: Team, source: str = "generic") -> None:
    """The team's past: thousands of ended sessions of one gateway, a few of them linked
    (of the gateway under test: another's sessions an index on the source skips)."""
    _deliver(team, _event("session_start", 0, "first"))
    agent_id = Session.objects.get(team=team, external_id="first").agent_id
    ended = T0 - timedelta(days=1)
    Session.objects.bulk_create(
        Session(
            team=team,
            agent_id=agent_id,
            source=source,
            external_id=f"old-{i}",
            session_key=f"key-old-{i}",
            status=SessionStatus.ENDED,
            started_at=ended - timedelta(hours=1),
            ended_at=ended,
            successor_external_id=f"old-{i + 1}" if i % 100 == 0 else "",
            previous_external_id=f"old-{i - 1}" if i % 100 == 1 else "",
        )
        for i in range(STORED)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE lifecycle_session")


def _scans_of_sessions(queries: list[dict[str, Any]]) -> list[str]:
    """The captured statements on the session table whose plan reads the whole table."""
    scanning = []
    with connection.cursor() as cursor:
        for query in queries:
            sql = query["sql"]
            if "lifecycle_session" not in sql or "$1" in sql:
                continue  # statements bound server-side carry no values to plan with here
            if not sql.lstrip().upper().startswith(("SELECT", "UPDATE", "WITH")):
                continue
            cursor.execute(f"EXPLAIN {sql}")
            plan = "\n".join(row[0] for row in cursor.fetchall())
            if "Seq Scan on lifecycle_session" in plan:
                scanning.append(f"{sql[:300]}\n{plan}")
    return scanning


def test_a_start_an_end_naming_a_successor_and_a_resume_read_no_whole_session_table(
    team: Team,
) -> None:
    _seed(team)
    with CaptureQueriesContext(connection) as captured:
        _deliver(team, _event("session_start", 1, "new"))
        _deliver(team, _event("session_end", 2, "new", next_session_id="next"))
        _deliver(team, _event("session_start", 3, "next"))
        _deliver(team, _event("session_start", 4, "later", previous_session_id="old-7"))
    assert len(captured.captured_queries) > 10
    assert _scans_of_sessions(captured.captured_queries) == []
    linked = Session.objects.get(team=team, external_id="next")
    assert linked.previous_session == Session.objects.get(team=team, external_id="new")
    resumed = Session.objects.get(team=team, external_id="later")
    assert resumed.previous_session == Session.objects.get(team=team, external_id="old-7")


@pytest.mark.parametrize(
    ("endpoint", "scenario"),
    [
        ("claude-code", "clear"),
        ("claude-code", "compact"),
        ("openclaw", "reset"),
        ("openclaw", "restart"),
    ],
)
def test_the_gateways_sessions_read_no_whole_session_table(
    team: Team, api: Any, endpoint: str, scenario: str
) -> None:
    """Each gateway's recorded sessions, replayed hook by hook through the API on top of
    a long past: starts, /clear, compaction, resets and restarts, with the preambles
    their starts are handed."""
    _seed(team, source=endpoint)
    hooks = claude_code_hooks(scenario) if endpoint == "claude-code" else openclaw_hooks(scenario)
    with CaptureQueriesContext(connection) as captured:
        for hook in hooks:
            answer = api.post(f"/api/v1/hooks/{endpoint}", hook, format="json")
            assert answer.status_code == 200, answer.content
    assert _scans_of_sessions(captured.captured_queries) == []
