"""The test suite's rows (factory_boy): teams, members, agents, sessions, events and what
memory makes of them, written straight to the tables (no ingestion, no redaction).

Two flavours of agent and session: by default a Claude Code project and a session that
ended a while ago (what the dashboard lists); ``GenericAgentFactory`` and
``LiveSessionFactory`` give a generic-API agent and a session just started, with nothing
counted yet (what the memory tests build on)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from lifecycle.models import Agent, EventKind, LifecycleEvent, Session, SessionStatus, Source
from memory.models import ContinuityRecord, Observation, Pin, StreamTail, Summary
from sessionhub.models import Membership, Team
from sessionhub.text.redaction import RULES_VERSION


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"team-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.PostGenerationMethodCall("set_password", "pw-for-tests")

    @factory.post_generation
    def saved(obj: Any, create: bool, extracted: Any, **kw: Any) -> None:
        if create:
            obj.save()


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    team = factory.SubFactory(TeamFactory)
    user = factory.SubFactory(UserFactory)


class AgentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Agent

    team = factory.SubFactory(TeamFactory)
    source = Source.CLAUDE_CODE
    external_id = factory.Sequence(lambda n: f"gw:/home/dev/src/project-{n}")
    name = factory.Sequence(lambda n: f"project-{n} (gw)")
    project = factory.Sequence(lambda n: f"/home/dev/src/project-{n}")
    last_seen_at = factory.LazyFunction(timezone.now)


class SessionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Session

    agent = factory.SubFactory(AgentFactory)
    team = factory.SelfAttribute("agent.team")
    source = factory.SelfAttribute("agent.source")
    external_id = factory.Sequence(lambda n: f"sess-{n:05d}")
    channel = "cli"
    project = factory.SelfAttribute("agent.project")
    cwd = factory.SelfAttribute("agent.project")
    status = SessionStatus.ENDED
    started_at = factory.LazyFunction(lambda: timezone.now() - timedelta(hours=2))
    ended_at = factory.LazyAttribute(
        lambda o: o.started_at + timedelta(minutes=12) if o.status in ("ended", "crashed") else None
    )
    last_event_at = factory.LazyAttribute(lambda o: o.ended_at or o.started_at)
    end_reason = factory.LazyAttribute(
        lambda o: {"ended": "prompt_input_exit", "crashed": "crashed"}.get(o.status, "")
    )
    has_start = True
    event_count = 4
    prompt_count = 1
    turn_count = 1
    tool_use_count = 1


class GenericAgentFactory(AgentFactory):
    """An agent of the generic API, named by its id."""

    source = Source.GENERIC
    external_id = factory.Sequence(lambda n: f"agent-{n}")
    name = factory.LazyAttribute(lambda o: o.external_id)
    project = ""


class LiveSessionFactory(SessionFactory):
    """A session just started: active, nothing counted yet, no channel or project."""

    agent = factory.SubFactory(GenericAgentFactory)
    external_id = factory.Sequence(lambda n: f"session-{n}")
    channel = ""
    project = ""
    cwd = ""
    status = SessionStatus.ACTIVE
    started_at = factory.LazyFunction(timezone.now)
    ended_at = None
    last_event_at = None
    end_reason = ""
    event_count = 0
    prompt_count = 0
    turn_count = 0
    tool_use_count = 0


class EventFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = LifecycleEvent

    session = factory.SubFactory(SessionFactory)
    team = factory.SelfAttribute("session.team")
    source = factory.SelfAttribute("session.source")
    event_id = factory.Sequence(lambda n: f"evt-{n}")
    kind = EventKind.PROMPT
    occurred_at = factory.LazyAttribute(lambda o: o.session.started_at)
    received_at = factory.LazyFunction(timezone.now)
    facts = factory.LazyFunction(dict)
    payload = factory.LazyFunction(dict)
    redaction_version = RULES_VERSION


class SummaryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Summary

    session = factory.SubFactory(SessionFactory)
    team = factory.SelfAttribute("session.team")
    request = "Tidy the billing module"
    completed = "Moved the invoices to the new schema"
    next_steps = "Write the release notes"


class TailFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = StreamTail

    session = factory.SubFactory(SessionFactory)
    team = factory.SelfAttribute("session.team")
    event = factory.SubFactory(
        EventFactory, session=factory.SelfAttribute("..session"), kind=EventKind.TURN_END
    )
    text = "so the index on customer and date is what the planner needs"
    final_message = "All done."
    token_count = 12
    captured_at = factory.LazyFunction(timezone.now)


class ObservationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Observation

    session = factory.SubFactory(SessionFactory)
    team = factory.SelfAttribute("session.team")
    event = factory.SubFactory(
        EventFactory, session=factory.SelfAttribute("..session"), kind=EventKind.TOOL_USE
    )
    tool_name = "Read"
    input_digest = "/home/dev/src/app/settings.py"
    output_digest = "147 lines"
    occurred_at = factory.LazyFunction(timezone.now)


class PinFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Pin

    agent = factory.SubFactory(AgentFactory)
    team = factory.SelfAttribute("agent.team")
    label = factory.Sequence(lambda n: f"pin {n}")
    content = "remember this"
    pinned_at = factory.LazyFunction(timezone.now)
    redaction_version = RULES_VERSION


class ContinuityRecordFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ContinuityRecord

    session = factory.SubFactory(SessionFactory)
    team = factory.SelfAttribute("session.team")
    trigger = ContinuityRecord.Trigger.AUTOMATIC
    preamble = "[SESSION CONTINUITY — inherited from 1 prior session(s)]"


def session_with_story(team: Team, agent: Agent | None = None, **kw: Any) -> Session:
    """An ended session with a start, a prompt, a tool use, a turn end and an end, and
    its tail, observation and summary."""
    session = SessionFactory(team=team, agent=agent or AgentFactory(team=team), **kw)
    at = session.started_at
    kinds = [
        (EventKind.SESSION_START, {"start_source": "startup"}, "SessionStart"),
        (EventKind.PROMPT, {"text": "Fix the flaky invoice export"}, "UserPromptSubmit"),
        (EventKind.TOOL_USE, {"tool_name": "Bash"}, "PostToolUse"),
        (EventKind.TURN_END, {"final_message": "Fixed it; next: update the changelog"}, "Stop"),
        (EventKind.SESSION_END, {"reason": "prompt_input_exit"}, "SessionEnd"),
    ]
    events = [
        EventFactory(
            session=session,
            kind=kind,
            facts=facts,
            hook=hook,
            occurred_at=at + timedelta(seconds=30 * i),
        )
        for i, (kind, facts, hook) in enumerate(kinds)
    ]
    TailFactory(session=session, event=events[3], final_message=kinds[3][1]["final_message"])
    ObservationFactory(session=session, event=events[2], tool_name="Bash")
    SummaryFactory(session=session)
    return session


def plain_sessions_seed(team: Team, request: str, count: int = 400) -> None:
    """``count`` sessions of one agent with the same ordinary words in their prompts,
    summaries (``request`` and a number) and final messages: enough rows for PostgreSQL to
    plan the full-text searches over them as it would over a large team."""
    import uuid

    agent = AgentFactory(team=team)
    now = timezone.now()
    sessions = Session.objects.bulk_create(
        Session(team=team, agent=agent, external_id=f"s{i}", started_at=now, id=uuid.uuid4())
        for i in range(count)
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
    Summary.objects.bulk_create(
        Summary(team=team, session=s, request=f"{request} {i}") for i, s in enumerate(sessions)
    )
    StreamTail.objects.bulk_create(
        StreamTail(team=team, session=e.session, event=e, final_message="done", captured_at=now)
        for e in events
        if e.kind == EventKind.TURN_END
    )
