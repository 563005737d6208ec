"""Pins across sessions: which pins a continuing session inherits (critical ones within
their window first, never past the active cap, no duplicate labels) and which go back
to the agent when a session closes."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from lifecycle.models import Agent, Session
from sessionhub.db.statements import Compiled, model_from_row

from .models import Pin
from .scoring import Prior, decayed_confidence, knobs
from .statements import row_lock

# --- pins --------------------------------------------------------------------------------


def _pins_q(session_pk: uuid.UUID) -> Q:
    return Q(origin_session_id=session_pk, inherited_into__isnull=True) | Q(
        inherited_into_id=session_pk
    )


def session_pins_q(session: Session) -> Q:
    """The pins a session held: pinned in it, or inherited into it."""
    return _pins_q(session.pk)


def _pins_read(agent_id: uuid.UUID, source_pk: uuid.UUID) -> QuerySet[Pin]:
    return (
        Pin.objects.filter(Q(agent_id=agent_id, unpinned_at__isnull=True) | _pins_q(source_pk))
        .select_related("inherited_from")
        .order_by("-pinned_at", "-id")
    )


_PINS_READ = Compiled(
    _pins_read,
    uuid.UUID("00000000-0000-4000-8000-0000000a9e17"),
    uuid.UUID("00000000-0000-4000-8000-00000005e551"),
)


def pins_with_originals(agent_id: uuid.UUID, source_pk: uuid.UUID) -> list[Pin]:
    """``_pins_read``'s pins (the agent's active pins and those the source held), each
    with the original it was copied from (or None); on PostgreSQL from its statement
    compiled once: the pin's columns, then the original's."""
    if connection.vendor != "postgresql":
        return list(_pins_read(agent_id, source_pk))
    width = len(Pin._meta.concrete_fields)
    original = Pin._meta.get_field("inherited_from")
    pins = []
    for row in _PINS_READ.rows(agent_id, source_pk):
        pin = model_from_row(Pin, row[:width])
        original.set_cached_value(
            pin, None if row[width] is None else model_from_row(Pin, row[width:])
        )
        pins.append(pin)
    return pins


def pins_inherit(
    *,
    target: Session,
    source: Session | Prior,
    now: datetime,
    read: list[Pin] | None = None,
) -> list[Pin]:
    """Copy the source's pins into the target's agent, within every cap; the new pins.
    ``read`` is ``pins_with_originals`` of the two when the caller has read it already,
    holding the agent's row lock since before the read."""
    k = knobs()
    cap = settings.SESSIONHUB["MAX_ACTIVE_PINS"]
    agent_id, source_pk = target.agent_id, source.pk
    if read is None:
        # The agent row serializes pin writes (the same lock as memory.pins.pin_create).
        row_lock(Agent, target.agent_id)
        # One read for both: the agent's active pins, and the pins the source held (with
        # the originals they were copied from: the copies point at those, and the record
        # names them).
        read = pins_with_originals(agent_id, source_pk)
    pins = read
    active = [p.label for p in pins if p.agent_id == agent_id and p.unpinned_at is None]
    held = [
        p
        for p in pins
        if p.inherited_into_id == source_pk
        or (p.origin_session_id == source_pk and p.inherited_into_id is None)
    ]
    room = cap - len(active)
    taken = set(active)
    critical_window = timedelta(days=k["CRITICAL_PIN_DAYS"])

    critical, normal = [], []
    for pin in held:
        if pin.label in taken:
            continue
        hours = max(0.0, (now - pin.pinned_at).total_seconds() / 3600)
        if pin.priority == Pin.Priority.CRITICAL and now - pin.pinned_at <= critical_window:
            critical.append(pin)
        elif decayed_confidence(hours) >= k["MIN_PIN_CONFIDENCE"]:
            normal.append(pin)
        taken.add(pin.label)

    # Critical pins override the inheritance limit but never the active cap.
    chosen = critical[:room]
    chosen += normal[: max(0, min(room - len(chosen), k["MAX_INHERITED_PINS"]))]
    # One INSERT for all of them (none when nothing is chosen).
    return Pin.objects.bulk_create(
        [
            Pin(
                team_id=target.team_id,
                agent_id=target.agent_id,
                label=pin.label,
                content=pin.content,
                priority=pin.priority,
                # The knowledge is as old as the original pin: inheriting it again and
                # again must not make it look fresh to the decay filter.
                pinned_at=pin.pinned_at,
                origin_session=None,
                inherited_from=pin.inherited_from or pin,
                inherited_into=target,
                redaction_version=pin.redaction_version,
            )
            for pin in chosen
        ]
    )


def pins_release(session: Session, at: datetime | None = None) -> int:
    """A session's working memory ends with it: its pins stop being active (kept for provenance)."""
    return (
        Pin.objects.filter(session_pins_q(session))
        .filter(unpinned_at__isnull=True)
        .update(unpinned_at=at or timezone.now())
    )
