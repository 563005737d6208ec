"""Reads of a session's memory: its latest tail, summary, features, tool uses and pins.

The memory API and the dashboard's session page both show a session's memory, and the
pipeline compares a new tail with the latest one; all of them read it here. Every query
is held to the session's own team, so a row of another team is never shown with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from lifecycle.models import Session

from .models import Observation, Pin, SessionFeatures, StreamTail, Summary
from .pins import active_pins

OBSERVATION_LIMIT = 500


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
