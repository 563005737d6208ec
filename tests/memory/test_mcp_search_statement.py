"""The MCP search's own statement on PostgreSQL: planned as it runs (prepared, with the
planner's default settings), it reads the dashboard's full-text indexes for the older
sessions, and not at all when the newest sessions already answer; the indexes keep a
short pending list."""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from lifecycle.models import Session
from memory.continuity.decide import prompt_terms
from memory.search import (
    SearchFilters,
    _every_term_params,
    _filter_params,
    _search_sql,
    _Shape,
)
from sessionhub.models import Team
from tests.factories import AgentFactory, plain_sessions_seed

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="the statement and its indexes are PostgreSQL's"
    ),
]


def _seed(team: Team, request: str) -> None:
    plain_sessions_seed(team, request)
    with connection.cursor() as cursor:
        cursor.execute(
            "ANALYZE memory_summary, lifecycle_lifecycleevent, memory_streamtail, "
            "lifecycle_session, memory_sessionfeatures"
        )


def _plan(team: Team, query: str, *, analyze: bool = False) -> str:
    terms = prompt_terms(query)
    filters = SearchFilters()
    sql = _search_sql(_Shape.of(filters), 100, 30)
    params = [
        terms,
        team.pk,
        *_filter_params(filters),
        *_every_term_params(team.pk, terms, filters),
        len(terms),
        5,
        team.pk,
    ]
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {'(ANALYZE) ' if analyze else ''}{sql}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_the_statement_reads_the_full_text_indexes_with_default_settings(team: Team) -> None:
    _seed(team, "plain request")
    plan = _plan(team, "zeppelin airship")
    for index in ("dashboard_fts_summary", "dashboard_fts_prompt", "dashboard_fts_tail"):
        assert index in plan, plan


def test_the_indexes_are_not_read_when_the_newest_sessions_answer(team: Team) -> None:
    _seed(team, "zeppelin airship request")
    plan = _plan(team, "zeppelin airship", analyze=True)
    scans = [line for line in plan.splitlines() if "Bitmap Index Scan on dashboard_fts" in line]
    assert scans and all("never executed" in line for line in scans), plan


def test_the_search_indexes_keep_a_short_pending_list() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, reloptions FROM pg_class WHERE relname IN "
            "('dashboard_fts_summary', 'dashboard_fts_tail')"
        )
        options = dict(cursor.fetchall())
    assert options == {
        "dashboard_fts_summary": ["gin_pending_list_limit=256"],
        "dashboard_fts_tail": ["gin_pending_list_limit=256"],
    }


def test_the_prepared_caller_guess_is_the_querysets_row(team: Team, other_team: Team) -> None:
    from datetime import timedelta

    from lifecycle.models import SessionStatus
    from memory import recall, statements
    from tests.factories import SessionFactory

    gateway = "gw_1%"  # LIKE's own characters in the name are matched as themselves
    now = timezone.now()
    mine = AgentFactory(team=team, external_id=f"{gateway}:/src/api")
    slashed = AgentFactory(team=team, external_id=f"{gateway}/bot")
    lookalike = AgentFactory(team=team, external_id="gw_12:/src/api")
    theirs = AgentFactory(team=other_team, external_id=f"{gateway}:/src/api")
    for agent, status, minutes in (
        (mine, SessionStatus.ACTIVE, 30),
        (slashed, SessionStatus.SUSPENDED, 20),
        (mine, SessionStatus.ENDED, 1),
        (lookalike, SessionStatus.ACTIVE, 2),
        (theirs, SessionStatus.ACTIVE, 3),
    ):
        SessionFactory(agent=agent, status=status, last_event_at=now - timedelta(minutes=minutes))

    found = statements.caller_guess(team.pk, gateway)
    expected = recall.gateway_open_sessions(team.pk, gateway).first()
    assert found is not None and expected is not None
    assert found.agent.external_id == f"{gateway}/bot"
    fields = [f.attname for f in Session._meta.concrete_fields]
    assert [getattr(found, f) for f in fields] == [getattr(expected, f) for f in fields]
    assert found.agent == expected.agent and found.agent.name == expected.agent.name
    assert statements.caller_guess(team.pk, "nobody") is None
