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

The statement does not restate the state machine: what an event adds to the session's
counters, and whether it closes a compaction, is read off ``lifecycle.state.apply`` run
on a probe session (:func:`effect`), and an event the fold would move in any other way
is not quiet. ``tests/lifecycle/test_one_state_machine.py`` holds the statement's columns
to what the fold can write, on both database legs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import orjson
from django.conf import settings
from django.db import connection
from psycopg.types.json import Jsonb

from sessionhub.db.statements import column_of, concrete_fields, server_bound_cursor
from sessionhub.models import Team

from ..adapters import NormalizedEvent
from ..models import USER_TRIGGER, EventKind, LifecycleEvent, Session, SessionStatus
from ..state import FOLD_FIELDS, FoldEvent, apply
from .outbox import enqueue_session_work_soon, settle_delay_after
from .results import ACCEPTED, DUPLICATE
from .statements import INSERT_COLUMNS, event_row

# The kinds that never move an active session: they add to its counters and times only.
QUIET_KINDS = frozenset(
    {EventKind.PROMPT, EventKind.TOOL_USE, EventKind.NOTIFICATION, EventKind.OTHER}
)


# The session's running counts: what the statement adds to, by the fold's own deltas.
COUNTERS = (
    "event_count",
    "prompt_count",
    "turn_count",
    "tool_use_count",
    "compaction_count",
    "suspend_count",
)
# What the fold writes from an event's facts, whatever its kind (``state._stamp``); the
# statement writes each of them the same way.
FACT_FIELDS = ("model", "token_count", "reported_message_count", "trigger")
# The fold's fields a quiet event may move: its counters, its times, the compaction flag
# and what its facts say.
_MAY_MOVE = frozenset({*COUNTERS, "last_event_at", "in_compaction", *FACT_FIELDS})
_PROBE_AT = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Effect:
    """What one quiet event does to an active, started session, as the fold says."""

    deltas: dict[str, int]
    ends_compaction: bool


def _probe(in_compaction: bool) -> Session:
    return Session(
        status=SessionStatus.ACTIVE,
        has_start=True,
        in_compaction=in_compaction,
        started_at=_PROBE_AT,
        first_event_at=_PROBE_AT,
        last_event_at=_PROBE_AT,
    )


@functools.lru_cache(maxsize=256)
def effect(kind: str, phase: str, subagent: bool) -> Effect | None:
    """The fold's effect of an event on an active session, or None when the fold would
    move the session in any way the statement does not write (then it is not quiet)."""
    after: dict[bool, Session] = {}
    for flag in (False, True):
        session = _probe(flag)
        before = {name: getattr(session, name) for name in FOLD_FIELDS}
        facts = {"subagent": True} if subagent else {}
        apply(
            session,
            FoldEvent(kind=kind, occurred_at=_PROBE_AT + timedelta(1), phase=phase, facts=facts),
        )
        moved = {name for name in FOLD_FIELDS if getattr(session, name) != before[name]}
        if moved - _MAY_MOVE or (not flag and session.in_compaction):
            return None  # it would change the session's state, or open a compaction
        after[flag] = session
    deltas = {name: getattr(after[False], name) for name in COUNTERS}
    return Effect(deltas=deltas, ends_compaction=not after[True].in_compaction)


def quiet(event: NormalizedEvent) -> bool:
    """Whether an event may take the one-statement path (the statement checks the rest)."""
    return (
        connection.vendor == "postgresql"
        and event.kind in QUIET_KINDS
        and bool(event.session_external_id)
        and not event.facts.get("opens_new_session")
        and effect(event.kind, event.phase, bool(event.facts.get("subagent"))) is not None
    )


def event_store_quiet(
    *, team: Team, event: NormalizedEvent, received_at: datetime
) -> tuple[str, str] | None:
    """Store a quiet event and add it to its session: (status, session id); None when
    the session is not in a state that lets it (nothing was written)."""
    row = event_row(team, event, event.kind, None, received_at)
    try:
        documents = {name: Jsonb(orjson.dumps(row[name]), dumps=bytes) for name in _JSON_COLUMNS}
    except TypeError:  # an integer past 64 bits: the general path's VALUES take it
        return None
    facts = event.facts
    moves = effect(event.kind, event.phase, bool(facts.get("subagent")))
    if moves is None:
        return None
    params = {
        "team": team.pk,
        "source": row["source"],
        "external_id": event.session_external_id,
        "at": event.occurred_at,
        **{f"e_{name}": documents.get(name, row[name]) for name in _VALUE_COLUMNS},
        **{f"add_{name}": moves.deltas[name] for name in COUNTERS},
        "ends_compaction": moves.ends_compaction,
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
    # Ages in seconds rather than times: the answer is read on every event, and a float
    # costs psycopg far less to load than a timestamp with its time zone.
    session_id, dirty_age, run_age, inserted = found
    if not inserted:
        return DUPLICATE, session_id
    grace = settings.SESSIONHUB["OUTBOX_GRACE"].total_seconds()
    if dirty_age is None or dirty_age > grace:
        # As the general path does for an open session: its memory work waits for the
        # burst to settle, or a busy session for its pace. A newer mark tells a busy
        # worker to go round again.
        enqueue_session_work_soon([session_id], settle_delay_after(run_age))
    return ACCEPTED, session_id


# The event's columns the statement binds one parameter each (the session's id and the
# orphan key come from the statement itself), and those sent as JSON documents.
_VALUE_COLUMNS = tuple(name for name in INSERT_COLUMNS if name not in ("session_id", "orphan_key"))
_JSON_COLUMNS = ("facts", "payload")


@functools.cache
def _statement() -> str:
    """The statement, built once per process from the models' tables and columns."""
    quote = connection.ops.quote_name
    sessions = quote(Session._meta.db_table)
    events = quote(LifecycleEvent._meta.db_table)
    fields = concrete_fields(LifecycleEvent, INSERT_COLUMNS)
    columns = ", ".join(quote(column_of(f)) for f in fields)
    # The row is the general path's, one parameter a column (a one-row JSON document read
    # back by jsonb_to_recordset cost the database more than the parameters cost here);
    # the session is the one the statement locked, and the event is nobody's orphan.
    values = ", ".join(
        {"session_id": "s.id", "orphan_key": "''"}.get(name, f"%(e_{name})s")
        for name in INSERT_COLUMNS
    )
    session_column = quote(column_of(concrete_fields(LifecycleEvent, ["session"])[0]))

    counters = ",\n                ".join(
        f"{quote(name)} = t.{quote(name)} + %(add_{name})s" for name in COUNTERS
    )

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
            SELECT {values} FROM s
            ON CONFLICT (team_id, event_id) DO NOTHING
            RETURNING {session_column} AS session_id
        ), u AS (
            UPDATE {sessions} AS t SET
                {counters},
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
        SELECT s.id::text,
            EXTRACT(EPOCH FROM %(now)s - s.memory_dirty_at)::float8,
            EXTRACT(EPOCH FROM %(now)s - s.memory_run_at)::float8,
            EXISTS (SELECT 1 FROM u)
        FROM s
    """  # noqa: S608 - table and column names from the models, values bound
