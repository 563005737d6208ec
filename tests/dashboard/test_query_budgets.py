"""Every page renders in a fixed number of queries whatever the number of sessions: the
same count with 5 sessions as with 50, and within a budget."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.core.cache.backends.locmem import LocMemCache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from dashboard import selectors
from lifecycle.models import EventKind
from sessionhub.models import Team
from sessionhub.services import membership_add
from tests.factories import (
    AgentFactory,
    ContinuityRecordFactory,
    EventFactory,
    PinFactory,
    SessionFactory,
    session_with_story,
)

pytestmark = pytest.mark.django_db

# Page: (url builder, budget), the login's two queries (session and user rows) included.
# The session page's chain is read in one query however long it is (lifecycle.selectors.
# session_chain); the page shows at most dashboard.selectors.CHAIN_LIMIT links. The
# overview's tokens and cost are one aggregate and the summaries' ledger one read; its
# developer and project menus one DISTINCT (cached), as the session list's.
PAGES: dict[str, tuple[Callable[[dict[str, Any]], str], int]] = {
    # Two more for "did memory help" (the judged preambles' and MCP answers' sums).
    "overview": (lambda w: reverse("dashboard:overview"), 14),
    "sessions": (lambda w: reverse("dashboard:sessions"), 6),
    "sessions filtered": (
        lambda w: (
            reverse("dashboard:sessions")
            + f"?q=changelog&status=ended&agent={w['agent'].pk}&channel=cli&sort=events"
            "&started_from=2020-01-01"
        ),
        7,
    ),
    "session": (lambda w: reverse("dashboard:session", args=[w["session"].pk]), 16),
    "agents": (lambda w: reverse("dashboard:agents"), 4),
    "open work": (lambda w: reverse("dashboard:board"), 4),
    "agent": (lambda w: reverse("dashboard:agent", args=[w["agent"].pk]), 7),
    "live sessions": (
        lambda w: (
            reverse("dashboard:live-sessions")
            + "?ids="
            + ",".join(str(pk) for pk in w["ids"])
            + "&since=2020-01-01T00:00:00Z"
        ),
        5,
    ),
    "live session": (
        lambda w: reverse("dashboard:live-session", args=[w["session"].pk]) + "?after=0",
        5,
    ),
}


@pytest.fixture(autouse=True)
def _private_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    # The channel menu is cached; a cache of our own keeps the counts exact even when
    # another test run flushes the shared Redis database meanwhile.
    monkeypatch.setattr(selectors, "cache", LocMemCache("query-budgets", {}))


def build(team: Team, n: int) -> dict[str, Any]:
    agent = AgentFactory(team=team)
    session = session_with_story(team, agent=agent)
    for i in range(3):
        PinFactory(agent=agent, label=f"pin {i}")
    ContinuityRecordFactory(
        session=session,
        candidates=[{"session_id": str(session.pk), "score": 0.5, "used": True}],
    )
    others = []
    for i in range(n - 1):
        other = SessionFactory(agent=agent if i % 2 else AgentFactory(team=team))
        EventFactory(session=other, kind=EventKind.PROMPT, facts={"text": "changelog please"})
        others.append(other)
    return {"agent": agent, "session": session, "ids": [session.pk] + [o.pk for o in others]}


def count(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(queries)


@pytest.mark.parametrize("name", list(PAGES))
def test_pages_cost_the_same_with_5_and_50_sessions(
    name: str, member: Any, team: Team, other_team: Team, django_assert_max_num_queries: Any
) -> None:
    url_for, budget = PAGES[name]
    counts = []
    for n, owner in ((5, team), (50, other_team)):
        membership_add(team=owner, user=member)
        client = Client()
        client.force_login(member)
        world = build(owner, n)
        session = client.session
        session["dashboard_team"] = owner.slug
        session.save()
        count(client, url_for(world))  # warm: content types, session row
        counts.append(count(client, url_for(world)))
    assert counts[0] == counts[1], (
        f"{name}: {counts[0]} queries with 5 sessions, {counts[1]} with 50"
    )
    with django_assert_max_num_queries(budget):
        client.get(url_for(world))


def test_list_page_two_costs_the_same_at_120_and_240(member: Any, team: Team) -> None:
    client = Client()
    client.force_login(member)
    agent = AgentFactory(team=team)
    SessionFactory.create_batch(120, agent=agent)
    url = reverse("dashboard:sessions") + "?page=2"
    count(client, url)
    at_120 = count(client, url)
    SessionFactory.create_batch(120, agent=agent)
    assert count(client, url) == at_120 <= 7  # the capped count is one of them


def test_a_long_chain_is_walked_only_so_far(member_client: Client, team: Team) -> None:
    agent = AgentFactory(team=team)
    previous = None
    for _ in range(40):
        previous = SessionFactory(agent=agent, previous_session=previous)
    url = reverse("dashboard:session", args=[previous.pk])
    alone = reverse("dashboard:session", args=[SessionFactory(agent=agent).pk])
    member_client.get(url)
    member_client.get(alone)
    # The chain is one query whatever its length; the page caps the links it shows.
    assert count(member_client, url) == count(member_client, alone)
    chain = member_client.get(url).context["d"].chain
    assert len(chain) == selectors.CHAIN_LIMIT
