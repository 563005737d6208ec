"""memory.selectors: a session's memory as the API and the dashboard read it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from memory.models import SessionFeatures
from memory.selectors import latest_tail, session_memory
from sessionhub.models import Team
from tests.factories import (
    AgentFactory,
    ObservationFactory,
    PinFactory,
    SessionFactory,
    SummaryFactory,
    TailFactory,
)

pytestmark = pytest.mark.django_db


def remembered(team: Team, observations: int = 2) -> Any:
    """A session with two tails, a summary, features and some tool uses."""
    session = SessionFactory(agent=AgentFactory(team=team))
    now = timezone.now()
    TailFactory(session=session, final_message="first turn", captured_at=now - timedelta(minutes=5))
    TailFactory(session=session, final_message="last turn", captured_at=now)
    SummaryFactory(session=session, request="Rotate the signing keys")
    SessionFeatures.objects.create(team=team, session=session, hot_topics=["signing"])
    for i in range(observations):
        ObservationFactory(
            session=session, tool_name=f"tool-{i}", occurred_at=now - timedelta(seconds=i)
        )
    return session


def test_a_session_with_memory(team: Team) -> None:
    session = remembered(team, observations=3)
    memory = session_memory(session)
    assert memory.tail is not None and memory.tail.final_message == "last turn"
    assert memory.summary is not None and memory.summary.request == "Rotate the signing keys"
    assert memory.features is not None and memory.features.hot_topics == ["signing"]
    # Oldest first: tool-2 happened two seconds before tool-0.
    assert [o.tool_name for o in memory.observations] == ["tool-2", "tool-1", "tool-0"]
    assert memory.pins is None  # not asked for


def test_a_session_without_memory(team: Team) -> None:
    session = SessionFactory(agent=AgentFactory(team=team))
    memory = session_memory(session, pins=True)
    assert memory.tail is None and latest_tail(session) is None
    assert memory.summary is None and memory.features is None
    assert memory.observations == [] and memory.pins == []


def test_tails_captured_at_the_same_moment_the_last_written_wins(team: Team) -> None:
    session = SessionFactory(agent=AgentFactory(team=team))
    moment = timezone.now()
    TailFactory(session=session, final_message="one", captured_at=moment)
    second = TailFactory(session=session, final_message="two", captured_at=moment)
    assert latest_tail(session) == second == session_memory(session).tail


def test_observations_stop_at_the_limit(team: Team) -> None:
    session = remembered(team, observations=5)
    memory = session_memory(session, observation_limit=2)
    assert [o.tool_name for o in memory.observations] == ["tool-4", "tool-3"]


def test_pins_are_the_agents_active_ones(team: Team) -> None:
    session = remembered(team)
    kept = PinFactory(agent=session.agent, label="keep the API stable")
    PinFactory(agent=session.agent, label="old news", unpinned_at=timezone.now())
    PinFactory(agent=AgentFactory(team=team), label="another agent's")
    assert session_memory(session, pins=True).pins == [kept]


def test_another_teams_memory_is_not_visible(team: Team, other_team: Team) -> None:
    ours = SessionFactory(agent=AgentFactory(team=team))
    theirs = remembered(other_team)
    PinFactory(agent=theirs.agent)
    memory = session_memory(ours, pins=True)
    assert (memory.tail, memory.summary, memory.features) == (None, None, None)
    assert memory.observations == [] and memory.pins == []
    # A row hung on our session but filed under another team is not read with it either.
    TailFactory(session=ours, team=other_team)
    ObservationFactory(session=ours, team=other_team)
    SummaryFactory(session=ours, team=other_team)
    memory = session_memory(ours)
    assert memory.tail is None and memory.summary is None and memory.observations == []


def test_the_api_does_not_show_another_teams_session(
    api: APIClient, stranger: APIClient, team: Team
) -> None:
    session = remembered(team)
    assert api.get(f"/api/v1/sessions/{session.pk}/memory").json()["tail"]["final_message"] == (
        "last turn"
    )
    assert stranger.get(f"/api/v1/sessions/{session.pk}/memory").status_code == 404


@pytest.mark.parametrize(("pins", "queries"), [(False, 4), (True, 5)])
def test_memory_is_read_in_a_fixed_number_of_queries(
    team: Team, pins: bool, queries: int, django_assert_num_queries: Any
) -> None:
    small, large = remembered(team, observations=1), remembered(team, observations=30)
    for session in (small, large):
        PinFactory(agent=session.agent)
        with django_assert_num_queries(queries):
            memory = session_memory(session, pins=pins)
        assert memory.tail is not None and memory.observations
