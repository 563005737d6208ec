"""The hand-built statements of the hot path, each one round trip: the locked read of the
request's sessions, the session UPDATE (one or many), the event INSERT (PostgreSQL: from
one JSON document). Each has a test against its ORM equivalent on PostgreSQL and SQLite."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar

from django.db import connection
from django.db.models import CharField, Field, Model
from django.utils import timezone

from sessionhub.db.statements import (
    column_of,
    concrete_fields,
    json_document,
    model_from_row,
    server_bound_cursor,
)
from sessionhub.models import Team
from sessionhub.text.redaction import RULES_VERSION

from .. import state
from ..adapters import NormalizedEvent
from ..models import (
    EVENT_FIELDS,
    SESSION_CONTEXT_FIELDS,
    SESSION_LINK_FIELDS,
    LifecycleEvent,
    Session,
)

logger = logging.getLogger(__name__)
ModelT = TypeVar("ModelT", bound=Model)

# What ingestion changes on a session row (never its team, agent, source or identity).
_SESSION_WRITABLE = (
    *state.FOLD_FIELDS,
    *SESSION_CONTEXT_FIELDS,
    "previous_session",
    *SESSION_LINK_FIELDS,
    "memory_dirty_at",
    "updated_at",
)


def session_write(session: Session) -> None:
    """Write the fields ingestion moves, in one hand-built UPDATE.

    The same as ``save(update_fields=...)``, without compiling the statement anew on
    every request of the hot path.
    """
    session.updated_at = timezone.now()
    sql, fields = _session_update(connection.vendor)
    params = _session_params(session, [*fields, Session._meta.pk])
    with _hot_cursor() as cursor:
        cursor.execute(sql, params)


def _hot_cursor() -> Any:
    """The cursor for the general ingest path's locked read and session UPDATE, which
    every batch and every event that moves a session runs: on PostgreSQL bound
    server-side and prepared once per connection (bound client-side, each was parsed and
    planned anew on every request, which cost the database more than running it),
    elsewhere Django's own."""
    if connection.vendor == "postgresql":
        return server_bound_cursor(prepared=True)
    return connection.cursor()


def _session_params(session: Session, fields: Sequence[Any]) -> list[Any]:
    """The session's values for these fields, as the database takes them."""
    if connection.vendor == "postgresql":
        # psycopg adapts every type these columns hold (text, numbers, times, ids) itself.
        return [getattr(session, f.attname) for f in fields]
    return [f.get_db_prep_save(getattr(session, f.attname), connection) for f in fields]


@functools.cache
def _session_update(vendor: str) -> tuple[str, list[Any]]:
    """``session_write``'s statement and the fields it sets, built once per process."""
    fields = concrete_fields(Session, _SESSION_WRITABLE)
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(column_of(f))} = %s" for f in fields)
    sql = f"UPDATE {quote(Session._meta.db_table)} SET {assignments} WHERE id = %s"  # noqa: S608 - constants only
    return sql, fields


def sessions_write(sessions: Sequence[Session]) -> None:
    """``session_write`` for several sessions in one statement, whatever their number.

    On PostgreSQL the rows travel as one JSON document bound server-side, as the events'
    do (``insert_events``), in a statement prepared once per connection:
    ``WITH v AS (SELECT * FROM jsonb_to_recordset(...)) UPDATE ... FROM v``. Character
    columns are read as unbounded ``varchar``, so an over-long value fails on assignment
    as it does in a plain UPDATE. Rows orjson cannot encode (an integer past 64 bits)
    take ``WITH v (...) AS (VALUES ...)``, each value cast to its column's type, since
    VALUES alone would take the parameters for text; SQLite needs no casts, but
    UPDATE ... FROM only from 3.33. Anywhere else, one UPDATE per session.
    """
    postgresql = connection.vendor == "postgresql"
    update_from = postgresql or (
        connection.vendor == "sqlite" and connection.Database.sqlite_version_info >= (3, 33)  # type: ignore[attr-defined]
    )
    if len(sessions) < 2 or not update_from:
        for session in sessions:
            session_write(session)
        return
    now = timezone.now()
    for session in sessions:
        session.updated_at = now
    fields = concrete_fields(Session, ("id", *_SESSION_WRITABLE))
    if postgresql:
        document = json_document(
            [{column_of(f): getattr(s, f.attname) for f in fields} for s in sessions]
        )
        if document is not None:
            with server_bound_cursor(prepared=True) as cursor:
                cursor.execute(_sessions_update_from_json(), [document])
            return
    casts = [f"::{t}" for t in _column_types(fields)] if postgresql else ["" for _ in fields]
    row = "(" + ", ".join(f"%s{cast}" for cast in casts) + ")"
    params: list[Any] = []
    for session in sessions:
        params.extend(_session_params(session, fields))
    quote = connection.ops.quote_name
    table = quote(Session._meta.db_table)
    columns = ", ".join(quote(column_of(f)) for f in fields)
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH v ({columns}) AS (VALUES {', '.join([row] * len(sessions))}) "  # noqa: S608 - constants only
            f"UPDATE {table} SET {_assignments_from_v(fields)} FROM v WHERE {table}.id = v.id",
            params,
        )


def _column_types(fields: Sequence[Field[Any, Any]]) -> list[str]:
    """The type PostgreSQL should read a value for each field's column as (character
    columns unbounded, so the assignment itself checks the length)."""
    return [
        connection.ops.cast_char_field_without_max_length
        if isinstance(f, CharField)
        else str(f.cast_db_type(connection))
        for f in fields
    ]


def _assignments_from_v(fields: Sequence[Field[Any, Any]]) -> str:
    quote = connection.ops.quote_name
    return ", ".join(f"{quote(column_of(f))} = v.{quote(column_of(f))}" for f in fields[1:])


@functools.cache
def _sessions_update_from_json() -> str:
    """``sessions_write``'s PostgreSQL statement, built once per process."""
    fields = concrete_fields(Session, ("id", *_SESSION_WRITABLE))
    quote = connection.ops.quote_name
    table = quote(Session._meta.db_table)
    typed = ", ".join(
        f"{quote(column_of(f))} {type_}"
        for f, type_ in zip(fields, _column_types(fields), strict=True)
    )
    return (
        f"WITH v AS (SELECT * FROM jsonb_to_recordset(%s) AS r({typed})) "  # noqa: S608 - constants only
        f"UPDATE {table} SET {_assignments_from_v(fields)} FROM v WHERE {table}.id = v.id"
    )


INSERT_COLUMNS = ("team_id", "session_id", *EVENT_FIELDS, "redaction_version", "orphan_key")


def event_row(
    team: Team, event: NormalizedEvent, kind: str, session: Session | None, received_at: datetime
) -> dict[str, Any]:
    """An event's row as ``insert_events`` takes it (an event with no session is an
    orphan, waiting under its session key)."""
    return {
        "team_id": team.pk,
        "session_id": session.pk if session else None,
        "event_id": event.event_id,
        # The choices as the plain strings they stand for: psycopg finds a value's dumper
        # by its type, and a cursor's first look at a choices type walks the enum's
        # classes (two fifths of binding the quiet statement's parameters).
        "kind": str(kind),
        "source": str(event.source),
        "hook": event.hook[:100],
        "phase": event.phase,
        "occurred_at": event.occurred_at,
        "received_at": received_at,
        "facts": event.facts,
        "payload": event.payload,
        "redaction_version": RULES_VERSION,
        "orphan_key": "" if session is not None else event.session_key[:300],
    }


def insert_events(rows: list[dict[str, Any]]) -> set[str]:
    """Insert event rows in one statement; the ids actually inserted (a repeat is skipped).

    ``ON CONFLICT DO NOTHING RETURNING`` makes the unique (team, event id) index the
    idempotency check itself: no read before the write, no race between two deliveries.

    On PostgreSQL the rows travel as one parameter: a JSON array encoded once by orjson,
    bound server-side (no quoting of the ~2 KB a row on the client), that
    ``jsonb_to_recordset`` turns back into typed columns. A multi-row VALUES of 13
    parameters a row spent more time in Django's and psycopg's per-value preparation than
    the database spent inserting. Each column is read as its field's type
    (``varchar(200)``, ``uuid``, ``timestamp with time zone``, ``jsonb``...), so a value
    that does not fit fails as it did in VALUES. Rows orjson cannot encode (an integer
    past 64 bits) and the other databases (SQLite in embedded mode) take the VALUES path.
    """
    if not rows:
        return set()
    head, tail, from_json, fields = _insert_sql(connection.vendor)
    document = json_document(rows) if from_json else None
    if document is not None:
        with server_bound_cursor(prepared=True) as cursor:
            cursor.execute(from_json, [document])
            return {row[0] for row in cursor.fetchall()}
    params: list[Any] = []
    for row in rows:
        for name, model_field in zip(INSERT_COLUMNS, fields, strict=True):
            params.append(model_field.get_db_prep_save(row[name], connection))
    one = "(" + ", ".join(["%s"] * len(INSERT_COLUMNS)) + ")"
    sql = f"{head}VALUES {', '.join([one] * len(rows))}{tail}"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {row[0] for row in cursor.fetchall()}


@functools.cache
def _insert_sql(vendor: str) -> tuple[str, str, str, list[Any]]:
    """``insert_events``' statements, built once per process: the head and tail around
    VALUES, the whole statement from one JSON document (PostgreSQL only, else empty),
    and the fields in column order."""
    fields = concrete_fields(LifecycleEvent, INSERT_COLUMNS)
    quote = connection.ops.quote_name
    head = (
        f"INSERT INTO {quote(LifecycleEvent._meta.db_table)} "
        f"({', '.join(quote(column_of(f)) for f in fields)}) "
    )
    tail = " ON CONFLICT (team_id, event_id) DO NOTHING RETURNING event_id"
    from_json = ""
    if vendor == "postgresql":
        # The row dicts' keys name the record's columns.
        keys = [quote(name) for name in INSERT_COLUMNS]
        typed = ", ".join(
            f"{key} {f.db_type(connection)}" for key, f in zip(keys, fields, strict=True)
        )
        from_json = (
            f"{head}SELECT {', '.join(keys)} "  # noqa: S608 - constants only
            f"FROM jsonb_to_recordset(%s) AS r({typed}){tail}"
        )
    return head, tail, from_json, fields


def sessions_locked(team: Team, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Session]:
    """The team's sessions with these (source, external id) keys, locked for this
    transaction in id order, so concurrent requests cannot deadlock on each other.

    Written out by hand: it is the first statement of every ingest request, and having
    the ORM build it (some forty columns, an OR of pairs, the lock) cost more CPU than
    the database spent answering it. The unique (team, source, external id) index
    serves it.
    """
    meta = Session._meta
    quote = connection.ops.quote_name
    columns = ", ".join(
        quote(f.attname if f.column is None else f.column) for f in meta.concrete_fields
    )
    match = " OR ".join(["(source = %s AND external_id = %s)"] * len(keys))
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    sql = (
        f"SELECT {columns} FROM {quote(meta.db_table)} "  # noqa: S608 - constants only
        f"WHERE team_id = %s AND ({match}) ORDER BY id{lock}"
    )
    params: list[Any] = [team.pk]
    for source, external_id in keys:
        params += (source, external_id)
    with _hot_cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    found: dict[tuple[str, str], Session] = {}
    for row in rows:
        session = model_from_row(Session, row)
        found[(session.source, session.external_id)] = session
    return found
