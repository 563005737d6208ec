"""The session list: every filter, full-text search over prompts, final messages and
summaries (PostgreSQL's and the plain fallback), sorting and pagination."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from dashboard import selectors
from lifecycle.models import EventKind, SessionStatus, Source
from sessionhub.models import Team
from tests.factories import (
    AgentFactory,
    EventFactory,
    SessionFactory,
    SummaryFactory,
    TailFactory,
)

pytestmark = pytest.mark.django_db
URL = reverse("dashboard:sessions")


def shown(client: Client, **params: Any) -> list[str]:
    response = client.get(URL, params)
    assert response.status_code == 200
    return [s.external_id for s in response.context["page"].rows]


def test_filters(member_client: Client, team: Team) -> None:
    cli = AgentFactory(team=team, name="cli-agent")
    bot = AgentFactory(team=team, name="discord-bot", source=Source.OPENCLAW)
    now = timezone.now()
    SessionFactory(agent=cli, external_id="a-ended", started_at=now - timedelta(days=3))
    SessionFactory(agent=cli, external_id="b-active", status=SessionStatus.ACTIVE)
    SessionFactory(
        agent=bot,
        external_id="c-crashed",
        status=SessionStatus.CRASHED,
        channel="discord",
        started_at=now - timedelta(days=10),
    )
    SessionFactory(
        agent=bot,
        external_id="d-idle",
        channel="discord",
        end_reason="idle_timeout",
        started_at=now - timedelta(days=1),
    )

    assert shown(member_client) == ["b-active", "d-idle", "a-ended", "c-crashed"]
    assert shown(member_client, agent=str(bot.pk)) == ["d-idle", "c-crashed"]
    assert shown(member_client, status="crashed") == ["c-crashed"]
    assert shown(member_client, channel="discord") == ["d-idle", "c-crashed"]
    assert shown(member_client, source="claude-code") == ["b-active", "a-ended"]
    assert shown(member_client, end_reason="idle_timeout") == ["d-idle"]
    today = timezone.localdate()
    assert shown(member_client, started_from=str(today - timedelta(days=4))) == [
        "b-active",
        "d-idle",
        "a-ended",
    ]
    assert shown(
        member_client,
        started_from=str(today - timedelta(days=11)),
        started_to=str(today - timedelta(days=2)),
    ) == ["a-ended", "c-crashed"]
    assert shown(member_client, channel="discord", status="ended") == ["d-idle"]


def test_invalid_filters_are_ignored_not_errors(member_client: Client, team: Team) -> None:
    SessionFactory(team=team, agent=AgentFactory(team=team), external_id="only")
    for params in (
        {"status": "bogus"},
        {"started_from": "yesterday"},
        {"page": "abc"},
        {"page": "9" * 40},
        {"page": "-3"},
        {"agent": "not-a-uuid"},
        {"sort": "drop table"},
        {"q": '"unbalanced -or AND ( !'},
    ):
        response = member_client.get(URL, params)
        assert response.status_code == 200, params


@pytest.fixture
def searchable(team: Team) -> dict[str, Any]:
    agent = AgentFactory(team=team)
    by_prompt = SessionFactory(agent=agent, external_id="by-prompt")
    EventFactory(
        session=by_prompt, kind=EventKind.PROMPT, facts={"text": "Rotate the kubernetes secrets"}
    )
    by_tail = SessionFactory(agent=agent, external_id="by-tail")
    TailFactory(session=by_tail, final_message="I bumped the changelog for 2.4")
    by_summary = SessionFactory(agent=agent, external_id="by-summary")
    SummaryFactory(session=by_summary, learned="The flaky tests came from timezone handling")
    # A tool use mentioning the word is not a prompt: it does not match.
    decoy = SessionFactory(agent=agent, external_id="decoy")
    EventFactory(session=decoy, kind=EventKind.TOOL_USE, facts={"text": "kubernetes changelog"})
    return {}


@pytest.mark.parametrize("search", ["native", "plain"])
def test_search_finds_prompts_final_messages_and_summaries(
    member_client: Client, searchable: dict[str, Any], monkeypatch: pytest.MonkeyPatch, search: str
) -> None:
    if search == "plain":
        # The icontains fallback that SQLite gets; it runs on any database.
        monkeypatch.setattr(selectors, "_search_postgres", selectors._search_plain)
    assert shown(member_client, q="kubernetes") == ["by-prompt"]
    assert shown(member_client, q="changelog") == ["by-tail"]
    assert shown(member_client, q="timezone") == ["by-summary"]
    assert shown(member_client, q="nothing-like-this") == []


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL full-text search")
def test_postgres_search_stems_and_takes_web_syntax(
    member_client: Client, searchable: dict[str, Any]
) -> None:
    assert shown(member_client, q="rotating secret") == ["by-prompt"]
    assert shown(member_client, q="changelogs") == ["by-tail"]
    assert sorted(shown(member_client, q="kubernetes or changelog")) == ["by-prompt", "by-tail"]
    assert shown(member_client, q="changelog -bumped") == []


def test_sorting(member_client: Client, team: Team) -> None:
    agent = AgentFactory(team=team)
    now = timezone.now()
    SessionFactory(
        agent=agent,
        external_id="old-busy",
        event_count=90,
        compaction_count=1,
        started_at=now - timedelta(days=2),
        last_event_at=now - timedelta(minutes=1),
    )
    SessionFactory(
        agent=agent,
        external_id="new-quiet",
        event_count=3,
        compaction_count=4,
        started_at=now - timedelta(hours=1),
        last_event_at=now - timedelta(hours=1),
    )
    assert shown(member_client, sort="newest") == ["new-quiet", "old-busy"]
    assert shown(member_client, sort="oldest") == ["old-busy", "new-quiet"]
    assert shown(member_client, sort="events") == ["old-busy", "new-quiet"]
    assert shown(member_client, sort="compactions") == ["new-quiet", "old-busy"]
    assert shown(member_client, sort="active") == ["old-busy", "new-quiet"]


def test_pagination_counts_only_up_to_a_cap(
    member_client: Client, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = AgentFactory(team=team)
    now = timezone.now()
    SessionFactory.create_batch(120, agent=agent, started_at=factory_time(now))
    first = member_client.get(URL).context["page"]
    assert (len(first.rows), first.total, first.pages, first.has_next) == (50, 120, 3, True)
    third = member_client.get(URL, {"page": 3}).context["page"]
    assert (len(third.rows), third.start, third.end, third.has_next) == (20, 101, 120, False)
    ids = {s.pk for s in first.rows} | {s.pk for s in third.rows}
    assert len(ids) == 70  # no row on two pages
    beyond = member_client.get(URL, {"page": 9})
    assert "No session matches" in beyond.content.decode()

    monkeypatch.setattr(selectors, "COUNT_CAP", 60)
    capped = member_client.get(URL, {"page": 2})
    assert capped.context["page"].total_capped
    assert "of more than 60 sessions" in capped.content.decode()


def factory_time(now: Any) -> Any:
    """Distinct start times, one minute apart, newest first."""
    import factory

    return factory.Sequence(lambda n: now - timedelta(minutes=n))
