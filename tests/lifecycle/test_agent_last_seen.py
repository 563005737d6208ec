"""An agent's "last seen" follows its events (issue 36, item 6), written at most once a
minute per agent and process: the usual request costs no query for it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from lifecycle.ingest import identity
from lifecycle.models import Agent

pytestmark = pytest.mark.django_db


def _event(n: int, kind: str = "prompt") -> dict[str, Any]:
    return {"event_id": f"e{n}", "kind": kind, "agent_id": "research", "session_id": "s1"}


def _agent_updates(queries: CaptureQueriesContext) -> list[str]:
    table = Agent._meta.db_table
    return [q["sql"] for q in queries if q["sql"].startswith(f'UPDATE "{table}"')]


def test_last_seen_follows_events_at_most_once_a_minute(api: Any) -> None:
    identity._agents_seen.clear()
    assert api.post("/api/v1/events", _event(0, "session_start"), format="json").status_code == 200
    agent = Agent.objects.get()
    created = agent.last_seen_at
    assert created is not None

    # Within the minute: no write, not even a query.
    with CaptureQueriesContext(connection) as queries:
        assert api.post("/api/v1/events", _event(1), format="json").status_code == 200
    assert _agent_updates(queries) == []

    # An hour later (as if): the next event moves it.
    old = timezone.now() - timedelta(hours=1)
    Agent.objects.filter(pk=agent.pk).update(last_seen_at=old)
    for key in list(identity._agents_seen):
        identity._agents_seen[key] -= 3600
    with CaptureQueriesContext(connection) as queries:
        assert api.post("/api/v1/events", _event(2), format="json").status_code == 200
    assert len(_agent_updates(queries)) == 1
    agent.refresh_from_db()
    assert agent.last_seen_at is not None and agent.last_seen_at > old + timedelta(minutes=59)
    assert agent.last_seen_at >= created
