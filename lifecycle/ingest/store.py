"""One transaction that stores a request's events and moves their sessions: the
idempotency key, conflicts, the state fold, the chain, one write per table."""

from __future__ import annotations

import functools
import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction

from sessionhub.models import Team

from .. import signals, state
from ..adapters import NormalizedEvent
from ..models import EventKind, Session
from .chain import sessions_link
from .fold import advance, session_refold
from .identity import orphans_adopt, session_of, sessions_by_key, sessions_resolve
from .outbox import enqueue_session_work_soon, settle_delay
from .results import ACCEPTED, CONFLICT, DUPLICATE
from .statements import event_row, insert_events, sessions_write

logger = logging.getLogger(__name__)

# --- storing ----------------------------------------------------------------------------


@transaction.atomic
def events_store(
    *, team: Team, events: Sequence[NormalizedEvent], received_at: datetime
) -> list[tuple[str, str | None]]:
    """Store events once each and move their sessions; (status, session id) per event.

    Round trips for the common case (known sessions): lock the sessions, insert the
    events, update the sessions — whatever the batch size or the number of sessions.
    """
    sessions, created = sessions_resolve(team, events)
    adopted = orphans_adopt(team, [sessions[key] for key in created])
    by_key = sessions_by_key(team, events, sessions)
    planned = _plan(team, events, sessions, by_key, received_at)
    inserted = insert_events(planned.rows)
    new_by_session = planned.accept(inserted)
    touched = {s.pk: s for s in sessions.values()} | {s.pk: s for s in by_key.values() if s}
    for session_pk in adopted - set(new_by_session):
        new_by_session[session_pk] = []
    # Each session first takes in its own events, then the sessions link to each other;
    # all of them are written at the end, in one statement.
    written = {session_pk: touched[session_pk] for session_pk in new_by_session}
    ending, settling = _fold(written, new_by_session, adopted, received_at)
    sessions_link(team, written, new_by_session)
    sessions_write(list(written.values()))
    _queue_after_commit(ending, settling)
    return planned.outcome


@dataclass
class _Plan:
    """What a batch comes to before the insert: the rows, and per event its outcome so
    far and what it will fold into its session if the insert takes it."""

    outcome: list[tuple[str, str | None]]
    rows: list[dict[str, Any]] = field(default_factory=list)
    pending: list[tuple[int, str, Session | None, state.FoldEvent | None]] = field(
        default_factory=list
    )

    def accept(self, inserted: set[str]) -> dict[Any, list[state.FoldEvent]]:
        """Mark the events the insert took; their folds by session."""
        new_by_session: dict[Any, list[state.FoldEvent]] = defaultdict(list)
        for i, event_id, session, fold in self.pending:
            if event_id not in inserted:
                continue  # stored by an earlier delivery
            self.outcome[i] = (ACCEPTED, self.outcome[i][1])
            if session is not None and fold is not None:
                new_by_session[session.pk].append(fold)
        return new_by_session


def _plan(
    team: Team,
    events: Sequence[NormalizedEvent],
    sessions: dict[Any, Session],
    by_key: dict[Any, Session | None],
    received_at: datetime,
) -> _Plan:
    plan = _Plan(outcome=[(DUPLICATE, None)] * len(events))
    in_batch: set[str] = set()
    started: set[Any] = {s.pk for s in sessions.values() if s.has_start}
    conflicting = _conflicting(events)
    # Time order, so "the second start is a resume" holds for a shuffled batch too.
    order = sorted(range(len(events)), key=lambda i: (events[i].occurred_at, i))
    # A batch is mostly one session's events: its id as answered, made once per session.
    answered: dict[Any, str] = {}
    for position, i in enumerate(order):
        event = events[i]
        if i in conflicting:
            plan.outcome[i] = (CONFLICT, None)
            continue
        session = session_of(event, sessions, by_key)
        if session is None:
            plan.outcome[i] = (DUPLICATE, None)
        else:
            pk = session.pk
            shown = answered.get(pk)
            if shown is None:
                shown = answered[pk] = str(pk)
            plan.outcome[i] = (DUPLICATE, shown)
        if event.event_id in in_batch:
            continue
        in_batch.add(event.event_id)
        kind = event.kind
        if session is not None and kind in (EventKind.SESSION_START, EventKind.SESSION_RESUME):
            if kind == EventKind.SESSION_START and session.pk in started:
                kind = EventKind.SESSION_RESUME
            started.add(session.pk)
        plan.rows.append(event_row(team, event, kind, session, received_at))
        fold = (
            state.FoldEvent(
                kind=kind,
                occurred_at=event.occurred_at,
                phase=event.phase,
                facts=event.facts,
                order=position,
            )
            if session is not None
            else None
        )
        plan.pending.append((i, event.event_id, session, fold))
    return plan


def _fold(
    written: dict[Any, Session],
    new_by_session: dict[Any, list[state.FoldEvent]],
    adopted: set[Any],
    received_at: datetime,
) -> tuple[list[str], dict[str, float]]:
    """Each session takes in its new events; the sessions whose memory work is due now
    (closed, or marked long ago) and those whose work waits a while (the burst to
    settle, a busy session its pace), with the seconds each waits."""
    ending: list[str] = []
    settling: dict[str, float] = {}
    stale = received_at - settings.SESSIONHUB["OUTBOX_GRACE"]
    for session_pk, new_events in new_by_session.items():
        session = written[session_pk]
        was_open = session.is_open
        if session_pk in adopted:
            session_refold(session)  # adopted events may lie anywhere in its past
        else:
            advance(session, new_events)
        for fold in new_events:  # the successor it names; sessions_link links the two
            if fold.kind == EventKind.SESSION_END and fold.facts.get("next_session_id"):
                session.successor_external_id = fold.facts["next_session_id"]
        if was_open and not session.is_open:
            signals.session_closed.send(Session, session=session, ended_at=session.ended_at)
            # Its summary is wanted now: queued at once, even when a run is already
            # waiting (a second run finds nothing new and costs little).
            ending.append(str(session_pk))
        elif session.memory_dirty_at is None or session.memory_dirty_at < stale:
            # Newly dirty; or marked long ago and never cleared (a failed run): queue it
            # again rather than leave it to a sweep that embedded mode does not have.
            if session.is_open:
                settling[str(session_pk)] = settle_delay(session.memory_run_at, received_at)
            else:
                ending.append(str(session_pk))
        # A newer mark tells a worker that is busy with the session to go round again.
        session.memory_dirty_at = received_at
    return ending, settling


def _queue_after_commit(ending: list[str], settling: dict[str, float]) -> None:
    if ending:
        transaction.on_commit(lambda: enqueue_session_work_soon(ending))
    # An open session's events come in bursts (a tool call, its result, the next):
    # waiting a moment lets one run take in the whole burst.
    for session_pk, delay in settling.items():
        transaction.on_commit(functools.partial(enqueue_session_work_soon, [session_pk], delay))


def _conflicting(events: Sequence[NormalizedEvent]) -> set[int]:
    """Indexes of events that repeat an earlier event id of the batch with a different
    body: the first one is stored, these are refused (an identical repeat is a
    duplicate, as it would be in a later request)."""
    first: dict[str, int] = {}
    conflicting: set[int] = set()
    for i, event in enumerate(events):
        j = first.setdefault(event.event_id, i)
        if j != i and event != events[j]:
            conflicting.add(i)
    return conflicting
