"""The full-text search reads the GIN indexes of dashboard/migrations/0001_search_indexes.py
(a change to the search expression that left them unused would make the search compute a
tsvector for every row of the team)."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.utils import timezone

from dashboard import selectors
from lifecycle.models import EventKind, LifecycleEvent, Session
from memory.models import StreamTail, Summary
from sessionhub.models import Team
from tests.factories import AgentFactory

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL indexes"),
]
ROWS = 400


def test_the_search_plan_uses_the_three_indexes(team: Team) -> None:
    agent = AgentFactory(team=team)
    now = timezone.now()
    sessions = Session.objects.bulk_create(
        Session(team=team, agent=agent, external_id=f"s{i}", started_at=now, id=uuid.uuid4())
        for i in range(ROWS)
    )
    events = LifecycleEvent.objects.bulk_create(
        LifecycleEvent(
            team=team,
            session=s,
            event_id=f"e{i}-{kind}",
            kind=kind,
            occurred_at=now,
            received_at=now,
            facts={"text": f"ordinary words number {i}"},
        )
        for i, s in enumerate(sessions)
        for kind in (EventKind.PROMPT, EventKind.TURN_END)
    )
    turn_ends = [e for e in events if e.kind == EventKind.TURN_END]
    Summary.objects.bulk_create(
        Summary(team=team, session=s, request=f"plain request {i}") for i, s in enumerate(sessions)
    )
    StreamTail.objects.bulk_create(
        StreamTail(team=team, session=e.session, event=e, final_message="done", captured_at=now)
        for e in turn_ends
    )
    query = selectors.sessions_filter(team=team, q="zeppelin")[:51]
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(
            "ANALYZE lifecycle_lifecycleevent, memory_summary, memory_streamtail, lifecycle_session"
        )
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    for index in ("dashboard_fts_prompt", "dashboard_fts_summary", "dashboard_fts_tail"):
        assert index in plan, plan
