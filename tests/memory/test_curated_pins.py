"""Pins people set reach the agent: a critical pin is in every preamble of its agent until
it is unpinned, a normal pin when the session is about it, each line naming who pinned
it and when, within the preamble's budget."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from lifecycle.models import Agent, Session
from memory.models import ContinuityRecord, Pin, SessionFeatures
from memory.pipeline import _features_refresh
from memory.services.continuity import continuity_build
from memory.services.pins import pin_create, pin_unpin
from sessionhub.models import Team
from tests.factories import AgentFactory, LiveSessionFactory, SessionFactory, SummaryFactory

pytestmark = pytest.mark.django_db

RULE = "Never deploy billing-api on Fridays; staging first"


@pytest.fixture
def agent(team: Team) -> Agent:
    return AgentFactory(team=team)


def new_session(agent: Agent) -> Session:
    return LiveSessionFactory(agent=agent)


def prior(agent: Agent) -> Session:
    """An ended session of the agent, an hour ago, with a summary and a pending task."""
    session = SessionFactory(agent=agent, started_at=timezone.now() - timedelta(hours=1))
    SummaryFactory(session=session)
    SessionFeatures.objects.create(
        team=agent.team,
        session=session,
        hot_topics=["invoices", "schema"],
        pending_tasks=[{"id": "todo-1", "text": "TODO: backfill the invoice totals"}],
    )
    return session


def test_a_critical_pin_is_in_every_preamble_even_on_a_cold_start(agent: Agent) -> None:
    pin = pin_create(
        agent=agent, label="Billing deploys", content=RULE, priority="critical", pinned_by="lead"
    )
    cold = continuity_build(session=new_session(agent))
    when = timezone.localtime(pin.pinned_at).strftime("%Y-%m-%d")
    assert cold.preamble.splitlines() == [
        "[SESSION CONTINUITY — pinned by your team]",
        "",
        "PINNED BY YOUR TEAM (follow these):",
        f"- [critical] Billing deploys: {RULE} (pinned by lead on {when})",
    ]
    assert cold.curated_pins[0]["why"] == "critical"
    assert cold.delivered_at is not None

    prior(agent)
    warm = continuity_build(session=new_session(agent))
    lines = warm.preamble.splitlines()
    assert lines[0] == "[SESSION CONTINUITY — inherited from 1 prior session(s)]"
    assert f"- [critical] Billing deploys: {RULE} (pinned by lead on {when})" in lines
    assert "backfill the invoice totals" in warm.preamble  # the sessions keep their part

    pin_unpin(pin=pin)
    assert RULE not in continuity_build(session=new_session(agent)).preamble


def test_a_normal_pin_is_quoted_when_the_session_is_about_it(agent: Agent) -> None:
    prior(agent)
    pin_create(
        agent=agent,
        label="Invoice rounding",
        content="Round half to even, never up",
        pinned_by="lead",
    )
    session = new_session(agent)
    start = continuity_build(session=session)
    assert "Round half to even" not in start.preamble  # nothing says the session is about it
    about = continuity_build(session=session, prompt="Why are the invoice totals rounded up?")
    assert "Round half to even" in about.preamble
    assert [p["why"] for p in about.curated_pins] == ["relevant"]
    other = new_session(agent)
    continuity_build(session=other)
    unrelated = continuity_build(session=other, prompt="Rename the export job's log file")
    assert "Round half to even" not in unrelated.preamble


def test_pins_a_session_made_or_inherited_are_not_quoted_as_the_teams(agent: Agent) -> None:
    source = prior(agent)
    Pin.objects.create(
        team=agent.team,
        agent=agent,
        label="session note",
        content="from it",
        priority="critical",
        pinned_at=timezone.now(),
        inherited_into=source,
    )
    record = continuity_build(session=new_session(agent))
    assert "PINNED BY YOUR TEAM" not in record.preamble
    assert record.curated_pins == []


def test_many_long_critical_pins_stay_within_the_budget(agent: Agent) -> None:
    prior(agent)
    for n in range(10):
        pin_create(
            agent=agent,
            label=f"rule {n}",
            content="word " * 800,
            priority="critical",
            pinned_by="lead",
        )
    record = continuity_build(session=new_session(agent))
    assert len(record.preamble) <= 960  # ~240 tokens: the budget
    assert "- also pinned: rule" in record.preamble
    assert "LAST SESSION" in record.preamble  # the sessions keep their half


def test_the_first_prompt_adds_only_the_pins_the_start_did_not_quote(agent: Agent) -> None:
    prior(agent)
    pin_create(agent=agent, label="Billing deploys", content=RULE, priority="critical")
    pin_create(agent=agent, label="Invoice rounding", content="Round half to even")
    session = new_session(agent)
    start = continuity_build(session=session)
    assert RULE in start.preamble and "Round half" not in start.preamble
    # The first prompt agrees with the start's sources: only the newly relevant pin.
    prompt = continuity_build(session=session, prompt="backfill the invoice totals rounding")
    assert "Round half to even" in prompt.preamble
    assert RULE not in prompt.preamble
    assert [p["label"] for p in prompt.curated_pins] == ["Invoice rounding"]


def test_the_api_and_the_admin_name_who_pinned(api: Any, agent: Agent, admin_client: Any) -> None:
    response = api.post(
        f"/api/v1/agents/{agent.pk}/pins", {"label": "a", "priority": "critical"}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["pinned_by"] == "token acme-gw"
    response = admin_client.post(
        "/admin/memory/pin/add/",
        {
            "team": agent.team_id,
            "agent": agent.pk,
            "label": "from the admin",
            "content": "",
            "priority": "normal",
            "pinned_at_0": "2026-11-27",
            "pinned_at_1": "10:00:00",
            "redaction_version": 0,
        },
    )
    assert response.status_code == 302, response.content
    assert Pin.objects.get(label="from the admin").pinned_by == "admin"
    record = continuity_build(session=new_session(agent))
    assert isinstance(record, ContinuityRecord)
    assert "- [critical] a (pinned by token acme-gw on " in record.preamble


def test_a_team_pin_is_no_topic_of_each_session(agent: Agent) -> None:
    """A standing rule is quoted by every preamble on its own; its words would otherwise
    be a topic of every session of the agent and blur which session is about what."""
    pin_create(agent=agent, label="Billing deploys", content=RULE, priority="critical")
    session = SessionFactory(agent=agent)
    Pin.objects.create(
        team=agent.team,
        agent=agent,
        label="session note",
        content="cardinality estimates",
        pinned_at=timezone.now(),
        origin_session=session,
    )
    texts = {
        "prompts": ["Tune the invoice query planner"],
        "tools": [],
        "finals": [],
        "task_list": [],
        "reasoning": [],
        "steps": [],
    }
    topics = _features_refresh(session, texts).hot_topics
    assert "invoice" in topics and "cardinality" in topics
    assert not {"billing", "fridays", "staging"} & set(topics)
