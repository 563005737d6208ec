"""Folding events into a session's state, and closing sessions (an end event that
lifecycle writes itself: a reset's predecessor, the crash sweep)."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from sessionhub.text.redaction import RULES_VERSION

from .. import signals, state
from ..models import EndReason, EventKind, LifecycleEvent, Session, SessionStatus, Source
from .outbox import enqueue_session_work

logger = logging.getLogger(__name__)


def advance(session: Session, new_events: list[state.FoldEvent]) -> None:
    """Apply new events; refold from the log when one lands before the latest seen."""
    new_events.sort(key=lambda e: (e.occurred_at, e.order))
    if session.last_event_at is not None and new_events[0].occurred_at < session.last_event_at:
        session_refold(session)
        return
    for event in new_events:
        state.apply(session, event)


def session_refold(session: Session) -> None:
    """Recompute a session's state from every stored event (the new rows included)."""
    rows = LifecycleEvent.objects.filter(session=session).values_list(
        "kind", "occurred_at", "phase", "facts", "id"
    )
    state.fold(
        session,
        [
            state.FoldEvent(kind=k, occurred_at=t, phase=p, facts=f or {}, order=i)
            for k, t, p, f, i in rows
        ],
    )


def session_close(
    *,
    session: Session,
    reason: str,
    at: datetime,
    event_id: str,
    facts: dict[str, Any] | None = None,
) -> bool:
    """End a session on SessionHub's own authority (replaced, crashed, pruned).

    The end is an event in the log like any other, so the timeline shows it; the event
    id makes closing twice a no-op. Returns whether this call closed it.
    """
    facts = {"reason": reason, "reason_detail": "sessionhub", **(facts or {})}
    if LifecycleEvent.objects.filter(team_id=session.team_id, event_id=event_id).exists():
        return False
    LifecycleEvent.objects.create(
        team_id=session.team_id,
        session=session,
        event_id=event_id,
        kind=EventKind.SESSION_END,
        source=Source.SESSIONHUB,
        hook="",
        occurred_at=at,
        received_at=timezone.now(),
        facts=facts,
        payload={},
        redaction_version=RULES_VERSION,
    )
    was_open = session.is_open
    advance(session, [state.FoldEvent(kind=EventKind.SESSION_END, occurred_at=at, facts=facts)])
    if was_open and not session.is_open:
        signals.session_closed.send(Session, session=session, ended_at=session.ended_at)
    session.memory_dirty_at = timezone.now()
    session.save()
    pk = str(session.pk)
    transaction.on_commit(lambda: enqueue_session_work([pk]))
    return True


def crashed_sessions_close(*, now: datetime | None = None, limit: int = 1000) -> int:
    """Close sessions silent past the crash horizon as crashed, ended at their last event."""
    now = now or timezone.now()
    limits = settings.SESSIONHUB
    closed = 0
    candidates = list(
        Session.objects.filter(
            Q(status=SessionStatus.ACTIVE, last_event_at__lt=now - limits["CRASH_HORIZON"])
            | Q(status=SessionStatus.SUSPENDED, last_event_at__lt=now - limits["SUSPEND_HORIZON"])
            # A shell made for continuity whose start never came.
            | Q(
                status=SessionStatus.ACTIVE,
                last_event_at__isnull=True,
                created_at__lt=now - limits["CRASH_HORIZON"],
            )
        )
        .order_by("last_event_at")
        .values_list("pk", flat=True)[:limit]
    )
    for pk in candidates:
        with transaction.atomic():
            session = Session.objects.select_for_update().filter(pk=pk).first()
            if session is None or not session.is_open:
                continue
            suspended = session.status == SessionStatus.SUSPENDED
            reason = EndReason.PRUNED if suspended else EndReason.CRASHED
            at = (
                session.suspended_at if suspended else session.last_event_at
            ) or session.created_at
            closed += session_close(
                session=session,
                reason=reason,
                at=at,
                event_id=f"sessionhub:{reason}:{session.pk}",
                facts={"silent_since": session.last_event_at.isoformat()}
                if session.last_event_at
                else {},
            )
    return closed
