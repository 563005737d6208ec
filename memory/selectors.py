"""Reads of a session's memory: its latest tail, summary, features, tool uses and pins.

The memory API and the dashboard's session page both show a session's memory, and the
pipeline compares a new tail with the latest one; all of them read it here. Every query
is held to the session's own team, so a row of another team is never shown with it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db.models import Q, QuerySet

from lifecycle.models import Agent, Session

from .models import Observation, Pin, SessionFeatures, StreamTail, Summary

OBSERVATION_LIMIT = 500


def active_pins(agent: Agent) -> QuerySet[Pin]:
    """An agent's active pins, oldest first."""
    return Pin.objects.filter(agent=agent, unpinned_at__isnull=True).order_by("pinned_at", "id")


def pins_held_q(session_pk: uuid.UUID) -> Q:
    """The pins a session held: pinned in it, or inherited into it."""
    return Q(origin_session_id=session_pk, inherited_into__isnull=True) | Q(
        inherited_into_id=session_pk
    )


def session_pins_q(session: Session) -> Q:
    """``pins_held_q`` of a session."""
    return pins_held_q(session.pk)


@dataclass(frozen=True)
class SessionMemory:
    """What SessionHub distilled from one session.

    ``observations`` are the first tool uses, oldest first, as many as were asked for;
    ``pins`` are the agent's active pins, or None when they were not asked for.
    """

    tail: StreamTail | None
    summary: Summary | None
    features: SessionFeatures | None
    observations: list[Observation]
    pins: list[Pin] | None = None


def latest_tail(session: Session) -> StreamTail | None:
    """The session's most recent tail (one query)."""
    return (
        StreamTail.objects.filter(session=session, team_id=session.team_id)
        .order_by("-captured_at", "-id")
        .first()
    )


def session_memory(
    session: Session, *, observation_limit: int = OBSERVATION_LIMIT, pins: bool = False
) -> SessionMemory:
    """A session's memory in four queries (five with its agent's active ``pins``)."""
    team_id = session.team_id
    return SessionMemory(
        tail=latest_tail(session),
        summary=Summary.objects.filter(session=session, team_id=team_id).first(),
        features=SessionFeatures.objects.filter(session=session, team_id=team_id).first(),
        observations=list(
            Observation.objects.filter(session=session, team_id=team_id).order_by(
                "occurred_at", "id"
            )[:observation_limit]
        ),
        pins=list(active_pins(session.agent).filter(team_id=team_id)) if pins else None,
    )
