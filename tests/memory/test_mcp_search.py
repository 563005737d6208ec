"""memory.search at the unit level: which words a session's memory holds (lexemes or
stems), rarity and recency in the ranking, the newest sessions read whatever their words,
and an old session found when it holds every word."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory import relevance
from memory.models import SessionFeatures
from memory.search import SearchFilters, memory_search
from sessionhub.models import Team
from tests.factories import AgentFactory, SessionFactory, SummaryFactory, plain_sessions_seed

pytestmark = pytest.mark.django_db


def test_terms_matched_sees_a_word_in_its_other_forms() -> None:
    documents = {1: "Ran the checks and updated the caches", 2: "Nothing about it"}
    found = relevance.terms_matched(documents, ["update", "cache", "deploy"])
    assert found == {1: {"update", "cache"}, 2: set()}
    # Hot topics count as words of the document.
    assert relevance.terms_matched({3: ""}, ["deploy"], {3: {"deploy"}}) == {3: {"deploy"}}


def _session(team: Team, name: str, request: str, hours_ago: float, **kw: object) -> object:
    now = timezone.now()
    session = SessionFactory(
        agent=AgentFactory(team=team),
        external_id=name,
        started_at=now - timedelta(hours=hours_ago + 1),
        ended_at=now - timedelta(hours=hours_ago),
        last_event_at=now - timedelta(hours=hours_ago),
        **kw,
    )
    SummaryFactory(session=session, request=request, completed="", next_steps="")
    return session


def test_a_rare_word_weighs_more_than_a_common_one(team: Team) -> None:
    rare = _session(team, "rare", "Fix the flaky idempotency check", 5)
    for n in range(4):
        _session(team, f"common-{n}", "Fix the checkout page", 5)
    result = memory_search(
        team_id=team.pk,
        query="checkout idempotency",
        filters=SearchFilters(),
        limit=5,
        now=timezone.now(),
    )
    assert result.hits[0].line.pk == rare.pk
    assert result.hits[0].relevance > result.hits[1].relevance


def test_recency_breaks_a_tie_and_an_old_full_match_is_found(team: Team) -> None:
    old = _session(team, "old", "Tune the connection pool size", 24 * 60)
    new = _session(team, "new", "Tune the connection pool size", 2)
    result = memory_search(
        team_id=team.pk,
        query="connection pool",
        filters=SearchFilters(),
        limit=5,
        now=timezone.now(),
    )
    assert [h.line.pk for h in result.hits] == [new.pk, old.pk]
    assert result.hits[0].recency > 0.9 and result.hits[1].recency == 0.0
    assert result.hits[0].relevance == result.hits[1].relevance == 1.0


def test_the_newest_sessions_are_read_for_a_partial_match(team: Team) -> None:
    partial = _session(team, "partial", "Profile the export job", 1)
    SessionFeatures.objects.create(team=team, session=partial, hot_topics=["parquet"])
    result = memory_search(
        team_id=team.pk,
        query="parquet export latency",
        filters=SearchFilters(),
        limit=5,
        now=timezone.now(),
    )
    [hit] = result.hits
    assert hit.line.pk == partial.pk and hit.matched == ["parquet", "export"]
    assert 0 < hit.relevance < 1


def test_the_asking_session_is_left_out(team: Team) -> None:
    asking = _session(team, "asking", "Fix the webhook retries", 0.1)
    past = _session(team, "past", "Fix the webhook retries", 30)
    result = memory_search(
        team_id=team.pk,
        query="webhook retries",
        filters=SearchFilters(exclude=asking.pk),
        limit=5,
        now=timezone.now(),
    )
    assert [h.line.pk for h in result.hits] == [past.pk]


def test_the_every_term_statement_reads_the_three_full_text_indexes(team: Team) -> None:
    """On PostgreSQL the statement must read the dashboard's GIN indexes (the ones its
    expressions are written for), or a common word makes it read every row; and it must
    not sort the matches it reads."""
    from django.db import connection

    from memory.search import every_term_statement, with_index_scans

    if connection.vendor != "postgresql":
        pytest.skip("the full-text indexes are PostgreSQL's; elsewhere the search scans")
    plain_sessions_seed(team, "plain request")
    sql, params = every_term_statement(team.pk, ["zeppelin", "airship"], SearchFilters(), 10)
    with connection.cursor() as cursor:
        cursor.execute(
            "ANALYZE memory_summary, lifecycle_lifecycleevent, memory_streamtail, lifecycle_session"
        )
    plan = "\n".join(row[0] for row in with_index_scans(f"EXPLAIN {sql}", params))
    for index in ("dashboard_fts_summary", "dashboard_fts_prompt", "dashboard_fts_tail"):
        assert index in plan, plan
    # Each source's matches are read up to the scan's limit, then ordered: no sort below
    # the inner limit.
    assert "occurred_at, " not in plan and "captured_at DESC, " not in plan, plan


def test_the_index_settings_end_with_the_statement(team: Team) -> None:
    from django.db import connection

    from memory.search import with_index_scans

    assert with_index_scans("SELECT %s", [7]) == [(7,)]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('enable_seqscan')"
            if connection.vendor == "postgresql"
            else "SELECT 'on'"
        )
        assert cursor.fetchone()[0] == "on"
