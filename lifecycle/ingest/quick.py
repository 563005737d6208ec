"""One statement for the commonest request: a single event that moves no state.

Most of what a gateway sends is a tool call, its result or a notification on a session
that is already active. Such an event only adds to the session's counters and times, so
it needs none of the general path's work (a locked read, the fold in Python, the chain,
then an INSERT and an UPDATE in a transaction of five round trips): one statement
inserts the event and adds it to the session, in its own transaction, holding the
session's row lock only while it runs.

The statement checks, under that lock, what makes the event "quiet":

* the session exists, is active, and has taken events before (its times are set);
* the event is not earlier than the session's latest (else the session is refolded);
* its kind is one that never moves an active session (a prompt, a tool call, a
  notification, another hook), which the caller checks before.

When any of it does not hold, the statement changes nothing and the general path takes
the event, so both paths give the same session and the same log (a property test holds
them to it). PostgreSQL only: embedded mode (SQLite) always takes the general path.
"""

from __future__ import annotations

import functools
from datetime import datetime

import orjson
from django.conf import settings
from django.db import connection
from psycopg.types.json import Jsonb

from sessionhub.models import Team

from ..adapters import NormalizedEvent
from ..models import EventKind, LifecycleEvent, Session, SessionStatus
from ..state import USER_TRIGGER
from .outbox import enqueue_session_work, settle_delay
from .results import ACCEPTED, DUPLICATE
from .statements import (
    INSERT_COLUMNS,
    column_of,
    concrete_fields,
    event_row,
    server_bound_cursor,
)

# The kinds that never move an active session: they add to its counters and times only.
QUIET_KINDS = frozenset(
    {EventKind.PROMPT, EventKind.TOOL_USE, EventKind.NOTIFICATION, EventKind.OTHER}
)


def quiet(event: NormalizedEvent) -> bool:
    """Whether an event may take the one-statement path (the statement checks the rest)."""
    return (
        connection.vendor == "postgresql"
        and event.kind in QUIET_KINDS
        and bool(event.session_external_id)
        and not event.facts.get("opens_new_session")
    )


def event_store_quiet(
    *, team: Team, event: NormalizedEvent, received_at: datetime
) -> tuple[str, str] | None:
    """Store a quiet event and add it to its session: (status, session id); None when
    the session is not in a state that lets it (nothing was written)."""
    try:
        document = orjson.dumps([event_row(team, event, event.kind, None, received_at)])
    except TypeError:  # an integer past 64 bits: the general path's VALUES take it
        return None
    facts = event.facts
    params = {
        "team": team.pk,
        "source": event.source,
        "external_id": event.session_external_id,
        "at": event.occurred_at,
        "rows": Jsonb(document, dumps=bytes),
        "prompt": int(event.kind == EventKind.PROMPT),
        "tool": int(event.kind == EventKind.TOOL_USE and event.phase != "pre"),
        "ends_compaction": event.kind == EventKind.PROMPT,
        "model": str(facts.get("model") or "")[:200],
        "token_count": facts.get("token_count"),
        "message_count": facts.get("message_count"),
        "trigger": str(facts.get("run_trigger") or "")[:40],
        "session_key": event.session_key[:300],
        "channel": event.channel[:100],
        "cwd": event.cwd[:1000],
        "project": event.project[:500],
        "developer": event.developer[:200],
        "now": received_at,
    }
    with server_bound_cursor(prepared=True) as cursor:
        cursor.execute(_statement(), params)
        found = cursor.fetchone()
    if found is None:
        return None
    session_id, dirty_at, memory_run_at, inserted = found
    if not inserted:
        return DUPLICATE, str(session_id)
    stale = received_at - settings.SESSIONHUB["OUTBOX_GRACE"]
    if dirty_at is None or dirty_at < stale:
        # As the general path does for an open session: its memory work waits for the
        # burst to settle, or a busy session for its pace. A newer mark tells a busy
        # worker to go round again.
        enqueue_session_work([str(session_id)], settle_delay(memory_run_at, received_at))
    return ACCEPTED, str(session_id)


@functools.cache
def _statement() -> str:
    """The statement, built once per process from the models' tables and columns."""
    quote = connection.ops.quote_name
    sessions = quote(Session._meta.db_table)
    events = quote(LifecycleEvent._meta.db_table)
    fields = concrete_fields(LifecycleEvent, INSERT_COLUMNS)
    record = ", ".join(
        f"{quote(name)} {f.db_type(connection)}"
        for name, f in zip(INSERT_COLUMNS, fields, strict=True)
    )
    columns = ", ".join(quote(column_of(f)) for f in fields)
    # The row is the general path's; the session is the one the statement locked, and
    # the event is nobody's orphan.
    values = ", ".join(
        {"session_id": "s.id", "orphan_key": "''"}.get(name, f"r.{quote(name)}")
        for name in INSERT_COLUMNS
    )
    session_column = quote(column_of(concrete_fields(LifecycleEvent, ["session"])[0]))

    def keep_or_fill(column: str) -> str:
        return f"{column} = CASE WHEN t.{column} = '' THEN %({column})s ELSE t.{column} END"

    return f"""
        WITH s AS (
            SELECT id, memory_dirty_at, memory_run_at FROM {sessions}
            WHERE team_id = %(team)s AND source = %(source)s AND external_id = %(external_id)s
              AND status = '{SessionStatus.ACTIVE}'
              AND last_event_at <= %(at)s
              AND first_event_at IS NOT NULL AND started_at IS NOT NULL
            FOR UPDATE
        ), e AS (
            INSERT INTO {events} ({columns})
            SELECT {values} FROM s, jsonb_to_recordset(%(rows)s) AS r({record})
            ON CONFLICT (team_id, event_id) DO NOTHING
            RETURNING {session_column} AS session_id
        ), u AS (
            UPDATE {sessions} AS t SET
                event_count = t.event_count + 1,
                prompt_count = t.prompt_count + %(prompt)s,
                tool_use_count = t.tool_use_count + %(tool)s,
                in_compaction = t.in_compaction AND NOT %(ends_compaction)s,
                last_event_at = %(at)s,
                model = CASE WHEN %(model)s <> '' THEN %(model)s ELSE t.model END,
                token_count = COALESCE(%(token_count)s, t.token_count),
                reported_message_count = COALESCE(%(message_count)s, t.reported_message_count),
                "trigger" = CASE WHEN %(trigger)s <> '' AND t."trigger" <> '{USER_TRIGGER}'
                    THEN %(trigger)s ELSE t."trigger" END,
                {keep_or_fill("session_key")},
                {keep_or_fill("channel")},
                {keep_or_fill("cwd")},
                {keep_or_fill("project")},
                {keep_or_fill("developer")},
                memory_dirty_at = %(now)s,
                updated_at = %(now)s
            FROM e WHERE t.id = e.session_id
            RETURNING t.id
        )
        SELECT s.id, s.memory_dirty_at, s.memory_run_at, EXISTS (SELECT 1 FROM u) FROM s
    """  # noqa: S608 - table and column names from the models, values bound
