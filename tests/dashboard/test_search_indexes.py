"""The full-text search reads the GIN indexes of dashboard/migrations/0001_search_indexes.py
(a change to the search expression that left them unused would make the search compute a
tsvector for every row of the team)."""

from __future__ import annotations

import pytest
from django.db import connection

from dashboard import selectors
from sessionhub.models import Team
from tests.factories import plain_sessions_seed

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL indexes"),
]
ROWS = 400


def test_the_search_plan_uses_the_three_indexes(team: Team) -> None:
    plain_sessions_seed(team, "plain request", ROWS)
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
