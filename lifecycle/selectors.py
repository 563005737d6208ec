"""Reads of sessions and events, always within one team."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL

from sessionhub.models import Team

from .models import EventKind, LifecycleEvent, Session


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


def newest_first(sessions: Iterable[Session], field: str) -> list[Session]:
    """Sessions in the order ``order_by(f"-{field}")`` gives them in the database, for
    choices made in memory: an empty value sorts as the largest on PostgreSQL (first) and
    the smallest on SQLite (last)."""
    sessions = list(sessions)
    present = [s for s in sessions if getattr(s, field) is not None]
    present.sort(key=lambda s: getattr(s, field), reverse=True)
    missing = [s for s in sessions if getattr(s, field) is None]
    return missing + present if connection.features.nulls_order_largest else present + missing


# Every session the walk in session_chain could look at, in one statement: from the
# session, backwards over previous_session and the sessions it continued (continued_by
# pointing at it), forwards over the sessions that name it as previous and its
# continued_by, each direction as deep as the walk can go (it takes fewer steps than its
# limit). Rows carry their depth, so a cycle of links ends at the limit too.
_CHAIN_SQL = """
WITH RECURSIVE linked (id, previous_session_id, continued_by_id, direction, depth) AS (
    SELECT id, previous_session_id, continued_by_id, 'before', 0 FROM {table} WHERE id = %s
    UNION
    SELECT id, previous_session_id, continued_by_id, 'after', 0 FROM {table} WHERE id = %s
    UNION
    SELECT s.id, s.previous_session_id, s.continued_by_id, l.direction, l.depth + 1
    FROM linked l JOIN {table} s ON (
        l.direction = 'before'
        AND (s.id = l.previous_session_id OR s.continued_by_id = l.id)
    ) OR (
        l.direction = 'after'
        AND (s.previous_session_id = l.id OR s.id = l.continued_by_id)
    )
    WHERE l.depth < %s
)
SELECT DISTINCT id FROM linked
"""


def session_chain(session: Session, *, limit: int = 50) -> list[Session]:
    """The sessions linked to this one, oldest first.

    Links run both ways: a session's predecessor is the one it replaced or resumed from
    (``previous_session``) or, failing that, one that it continued (``continued_by``).
    The neighbourhood the walk may visit is read in one query (a recursive CTE); the walk
    itself, one link at a time, runs in memory.
    """
    pk = Session._meta.pk.get_db_prep_value(session.pk, connection)
    sql = _CHAIN_SQL.format(table=connection.ops.quote_name(Session._meta.db_table))
    rows = Session.objects.filter(pk__in=RawSQL(sql, (pk, pk, limit)))  # noqa: S611 - constants only
    linked = {s.pk: s for s in rows}
    linked[session.pk] = session  # the caller's own object heads the walk, as before
    next_sessions: dict[uuid.UUID, list[Session]] = defaultdict(list)
    continued_from: dict[uuid.UUID, list[Session]] = defaultdict(list)
    for s in linked.values():
        if s.previous_session_id:
            next_sessions[s.previous_session_id].append(s)
        if s.continued_by_id:
            continued_from[s.continued_by_id].append(s)

    chain = [session]
    seen = {session.pk}

    def before(cursor: Session) -> Session | None:
        if cursor.previous_session_id and cursor.previous_session_id not in seen:
            return linked.get(cursor.previous_session_id)
        unseen = (s for s in continued_from[cursor.pk] if s.pk not in seen)
        return next(iter(newest_first(unseen, "ended_at")), None)

    def after(cursor: Session) -> Session | None:
        unseen = (s for s in next_sessions[cursor.pk] if s.pk not in seen)
        following = next(iter(newest_first(unseen, "started_at")), None)  # Session's ordering
        if following is None and cursor.continued_by_id and cursor.continued_by_id not in seen:
            following = linked.get(cursor.continued_by_id)
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
