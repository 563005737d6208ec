"""Reads of sessions and events, always within one team."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db.models import QuerySet

from sessionhub.models import Team

from .models import Agent, EventKind, LifecycleEvent, Session


def sessions_for_team(team: Team) -> QuerySet[Session]:
    """A team's sessions with what list views show alongside."""
    return Session.objects.filter(team=team).select_related("agent")


def session_get(*, team: Team, session_id: object) -> Session | None:
    """One of the team's sessions by its SessionHub id, or None (never another team's)."""
    try:
        session_uuid = uuid.UUID(str(session_id))
    except ValueError:
        return None
    return (
        sessions_for_team(team)
        .select_related("previous_session", "continued_by")
        .filter(pk=session_uuid)
        .first()
    )


def agents_for_team(team: Team) -> QuerySet[Agent]:
    return Agent.objects.filter(team=team)


def events_for_session(session: Session) -> QuerySet[LifecycleEvent]:
    return LifecycleEvent.objects.filter(session=session).order_by("occurred_at", "id")


@dataclass(frozen=True)
class SuspendSpan:
    """A stretch of time the session slept."""

    suspended_at: datetime
    resumed_at: datetime | None
    seconds: float | None


def suspend_spans(events: list[LifecycleEvent]) -> list[SuspendSpan]:
    """Suspend/resume pairs in time order, from a session's events."""
    spans: list[SuspendSpan] = []
    asleep: datetime | None = None
    ended = False
    for event in events:
        if ended:
            break
        if event.kind == EventKind.SESSION_SUSPEND and asleep is None:
            asleep = event.occurred_at
        elif event.kind in (EventKind.SESSION_RESUME, EventKind.SESSION_START) and asleep:
            seconds = (event.occurred_at - asleep).total_seconds()
            spans.append(SuspendSpan(asleep, event.occurred_at, seconds))
            asleep = None
        elif event.kind == EventKind.SESSION_END:
            ended = True
    if asleep is not None:
        spans.append(SuspendSpan(asleep, None, None))
    return spans


def session_chain(session: Session, *, limit: int = 50) -> list[Session]:
    """The sessions linked to this one, oldest first.

    Links run both ways: a session's predecessor is the one it replaced or resumed from
    (``previous_session``) or, failing that, one that it continued (``continued_by``).
    """
    chain = [session]
    seen = {session.pk}

    def before(cursor: Session) -> Session | None:
        if cursor.previous_session_id and cursor.previous_session_id not in seen:
            return Session.objects.filter(pk=cursor.previous_session_id).first()
        return (
            Session.objects.filter(continued_by=cursor)
            .exclude(pk__in=seen)
            .order_by("-ended_at")
            .first()
        )

    def after(cursor: Session) -> Session | None:
        following = Session.objects.filter(previous_session=cursor).exclude(pk__in=seen).first()
        if following is None and cursor.continued_by_id and cursor.continued_by_id not in seen:
            following = Session.objects.filter(pk=cursor.continued_by_id).first()
        return following

    cursor: Session | None = session
    while cursor is not None and len(chain) < limit:
        cursor = before(cursor)
        if cursor is not None:
            chain.insert(0, cursor)
            seen.add(cursor.pk)
    cursor = session
    while cursor is not None and len(chain) < limit:
        cursor = after(cursor)
        if cursor is not None:
            chain.append(cursor)
            seen.add(cursor.pk)
    return chain
