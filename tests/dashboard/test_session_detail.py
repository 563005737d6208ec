"""The session page: timeline (kinds, gaps, sleeps), tail, summary, observations, pins,
the chain and the continuity records; and the live endpoint that feeds its poller."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from lifecycle.models import EventKind, SessionStatus, Source
from sessionhub.models import Team
from tests.factories import (
    AgentFactory,
    ContinuityRecordFactory,
    EventFactory,
    PinFactory,
    SessionFactory,
    session_with_story,
)

pytestmark = pytest.mark.django_db


def page(client: Client, session: Any) -> tuple[str, Any]:
    response = client.get(reverse("dashboard:session", args=[session.pk]))
    assert response.status_code == 200
    return response.content.decode(), response.context["d"]


def test_timeline_marks_kinds_gaps_sleeps_and_compactions(member_client: Client, team: Team):
    session = SessionFactory(
        team=team, agent=AgentFactory(team=team, source=Source.OPENCLAW), suspend_count=1
    )
    t = session.started_at
    steps = [
        (0, EventKind.SESSION_START, {}),
        (30, EventKind.PROMPT, {"text": "Summarise the incident"}),
        (60, EventKind.SESSION_SUSPEND, {"reason": "restart"}),
        (60 + 1800, EventKind.SESSION_RESUME, {}),
        (1900, EventKind.COMPACTION_BEFORE, {"trigger": "auto"}),
        (1910, EventKind.COMPACTION_AFTER, {}),
        (1910 + 3600, EventKind.TURN_END, {"final_message": "Incident summary posted"}),
        (5600, EventKind.SESSION_END, {"reason": "new"}),
    ]
    for seconds, kind, facts in steps:
        EventFactory(
            session=session, kind=kind, facts=facts, occurred_at=t + timedelta(seconds=seconds)
        )
    body, d = page(member_client, session)

    assert [i.event.kind for i in d.items] == [kind for _, kind, _ in steps]
    resume = d.items[3]
    assert resume.slept_seconds == 1800 and resume.gap_seconds is None
    turn = d.items[6]
    assert turn.gap_seconds == 3600 and turn.css == "k-turn"
    assert [s.seconds for s in d.spans] == [1800]
    assert "slept 30 min" in body
    assert "1 h 00 min later" in body
    assert body.count('class="ev k-compaction') == 2
    assert "Incident summary posted" in body
    assert "#i-suspend" in body and "#i-turn" in body
    assert d.strip is not None and "strip-asleep" in d.strip


def test_memory_pins_and_features_are_shown(member_client: Client, team: Team) -> None:
    session = session_with_story(team)
    PinFactory(agent=session.agent, label="use the staging cluster", priority="critical")
    body, d = page(member_client, session)
    assert "Fixed it; next: update the changelog" in body  # the tail's final message
    assert "Tidy the billing module" in body  # the summary's request
    assert "Write the release notes" in body
    assert d.observations[0].tool_name == "Bash"
    assert "use the staging cluster" in body and "critical" in body


def test_chain_and_continuity_records(member_client: Client, team: Team) -> None:
    agent = AgentFactory(team=team)
    first = SessionFactory(agent=agent, external_id="chain-1")
    second = SessionFactory(agent=agent, external_id="chain-2", previous_session=first)
    third = SessionFactory(
        agent=agent, external_id="chain-3", previous_session=second, status=SessionStatus.ACTIVE
    )
    helper = SessionFactory(agent=agent, external_id="helper", continued_by=second)
    ContinuityRecordFactory(
        session=second,
        trigger="manual",
        candidates=[
            {
                "session_id": str(first.pk),
                "external_id": "chain-1",
                "score": 0.41,
                "recency": 0.9,
                "topic_overlap": 0.1,
                "pending": 0.0,
                "used": False,
            },
            {
                "session_id": str(helper.pk),
                "external_id": "helper",
                "score": 0.82,
                "recency": 0.95,
                "topic_overlap": 0.6,
                "pending": 0.5,
                "used": True,
            },
        ],
        inherited_pins=[{"uid": "x", "label": "db password rotation", "priority": "critical"}],
        keywords=["billing", "invoice"],
        preamble="[SESSION CONTINUITY — inherited from 1 prior session(s)]\nLAST SESSION",
    ).sources.add(helper)
    body, d = page(member_client, second)

    assert [s.external_id for s in d.chain] == ["chain-1", "chain-2", "chain-3"]
    assert [s.external_id for s in d.following] == ["chain-3"]
    assert [s.external_id for s in d.continued_from] == ["helper"]
    record = d.records[0]
    assert [c.data["external_id"] for c in record.candidates] == ["helper", "chain-1"]
    assert record.candidates[0].session == helper
    assert record.sources == [helper]
    for text in (
        "Manual continue",
        "0.82",
        "0.41",
        "db password rotation",
        "LAST SESSION",
        "billing, invoice",
    ):
        assert text in body, text
    assert reverse("dashboard:session", args=[third.pk]) in body


def test_live_session_sends_state_and_only_new_events(member_client: Client, team: Team) -> None:
    session = SessionFactory(team=team, agent=AgentFactory(team=team), status=SessionStatus.ACTIVE)
    old = EventFactory(session=session, kind=EventKind.SESSION_START)
    new = EventFactory(
        session=session, kind=EventKind.PROMPT, facts={"text": "and one more <script>thing"}
    )
    url = reverse("dashboard:live-session", args=[session.pk])
    body = member_client.get(url, {"after": old.pk}).json()
    assert body["session"]["status"] == "active" and body["session"]["open"] is True
    assert body["last_event_id"] == new.pk
    assert f'data-event-id="{new.pk}"' in body["events_html"]
    assert f'data-event-id="{old.pk}"' not in body["events_html"]
    assert "&lt;script&gt;thing" in body["events_html"]
    idle = member_client.get(url, {"after": new.pk}).json()
    assert idle["events_html"] == "" and idle["last_event_id"] == new.pk
    assert member_client.get(url, {"after": "x"}).status_code == 200
    missing = reverse("dashboard:live-session", args=["5b7a64b4-0000-4000-8000-000000000000"])
    assert member_client.get(missing).status_code == 404


def test_live_sessions_and_new_session_notice(member_client: Client, team: Team) -> None:
    agent = AgentFactory(team=team)
    shown = SessionFactory(agent=agent, status=SessionStatus.ACTIVE, event_count=3)
    since = shown.started_at.isoformat()
    SessionFactory(agent=agent, started_at=shown.started_at + timedelta(minutes=1))
    body = member_client.get(
        reverse("dashboard:live-sessions"), {"ids": f"{shown.pk},garbage", "since": since}
    ).json()
    assert body["sessions"][0]["event_count"] == 3
    assert body["new_sessions"] == 1


def test_mcp_calls_show_on_the_page_of_the_session_that_asked_and_of_those_it_named(
    member_client: Client, stranger_client: Client, team: Team
) -> None:
    from django.utils import timezone

    from memory.mcp.audit import mcp_call_record
    from sessionhub.models import ApiToken
    from sessionhub.services import api_token_create

    api_token_create(team=team, name="gw", scopes=["read"])
    token = ApiToken.objects.get(team=team)
    asking = SessionFactory(team=team, agent=AgentFactory(team=team))
    named = SessionFactory(team=team, agent=AgentFactory(team=team), external_id="named-one")
    mcp_call_record(
        token=token,
        session=asking,
        client="claude-code 2.1.330",
        tool="get_session",
        arguments={"session_id": "named-one"},
        tool_use_id="toolu_1",
        returned=[named.pk],
        returned_pins=[],
        answer='{"session_id": "' + str(named.pk) + '"}',
        is_error=False,
        duration_ms=3.5,
        created_at=timezone.now(),
    )
    body, d = page(member_client, asking)
    [view] = d.mcp.made
    assert view.call.tool == "get_session" and view.returned == [named]
    assert "Asked from this session" in body and "claude-code 2.1.330" in body
    assert "named-one" in body and f"token:{token.prefix}" in body
    body, d = page(member_client, named)
    assert [c.tool for c in d.mcp.handed_out] == ["get_session"]
    assert "memory handed out" in body
    # Another team's member sees neither page.
    assert stranger_client.get(reverse("dashboard:session", args=[asking.pk])).status_code == 404
