"""The hand-built and compiled-once statements of continuity's answer, the record of an
MCP call (``mcp_call_insert``), and the memory worker's insert of many rows
(``rows_insert``).

A continuity answer writes its record, the record's sources and each source's
``continued_by``: three statements through the ORM. On PostgreSQL they are one prepared
statement whose JSON columns (the record's candidates: tens of KB for 200 of them) orjson
encodes, so the answer costs one round trip and no per-request compiling; other
databases (SQLite in embedded mode) keep the ORM's statements. The row locks and the
first-record read are querysets compiled once per process (``Compiled``). The worker's
observations go in as one JSON document, as the hook path's events do, with their session
locked once where foreign keys would check it for each row. A test holds each to what the
ORM writes or returns.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Sequence
from typing import Any

import orjson
from django.db import connection, transaction
from django.db.models import Field, JSONField, Model
from psycopg.types.json import Jsonb

from lifecycle.models import OPEN_STATUSES, Agent, Session
from lifecycle.services import sessions_continued_by
from sessionhub.db.statements import (
    Compiled,
    column_of,
    concrete_fields,
    json_document,
    model_from_row,
    server_bound_cursor,
)

from .models import ContinuityRecord, McpCall


@functools.cache
def _record_fields() -> list[Field[Any, Any]]:
    """The record's columns as the INSERT names them: every concrete field but the id."""
    return [f for f in ContinuityRecord._meta.concrete_fields if not f.primary_key]


@functools.cache
def _record_sql() -> str:
    quote = connection.ops.quote_name
    fields = _record_fields()
    columns = ", ".join(quote(column_of(f)) for f in fields)
    # No casts: each value is assigned to its column, so one too long fails as the ORM's
    # INSERT would (an explicit cast to varchar(n) would cut it short instead).
    values = ", ".join(["%s"] * len(fields))
    through = ContinuityRecord.sources.through
    return (
        f"WITH r AS (INSERT INTO {quote(ContinuityRecord._meta.db_table)} ({columns}) "  # noqa: S608 - constants only
        f"VALUES ({values}) RETURNING id), "
        f"s AS (INSERT INTO {quote(through._meta.db_table)} "
        "(continuityrecord_id, session_id) SELECT r.id, u FROM r, unnest(%s::uuid[]) AS u), "
        f"c AS (UPDATE {quote(Session._meta.db_table)} SET continued_by_id = %s::uuid "
        "WHERE id = ANY(%s::uuid[])) "
        "SELECT id FROM r"
    )


@functools.cache
def _rows_insert_sql(model: type[Model], columns: tuple[str, ...]) -> str:
    """``rows_insert``'s PostgreSQL statement for these columns, built once per process."""
    fields = concrete_fields(model, columns)
    quote = connection.ops.quote_name
    names = ", ".join(quote(column_of(f)) for f in fields)
    # Each value is read as its column's type (varchar(n) included), so one that does not
    # fit fails as it would in VALUES.
    typed = ", ".join(f"{quote(column_of(f))} {f.db_type(connection)}" for f in fields)
    # The session's row is locked once, as a foreign key's check would lock it for each
    # row: a deletion waits for the insert (and then deletes its rows too), or the insert
    # for the deletion (and then finds no session and writes nothing).
    return (
        f"WITH parent AS (SELECT 1 FROM {quote(Session._meta.db_table)} "  # noqa: S608 - constants only
        "WHERE id = %s FOR KEY SHARE) "
        f"INSERT INTO {quote(model._meta.db_table)} ({names}) "
        f"SELECT {names} FROM jsonb_to_recordset(%s) AS r({typed}) "
        "WHERE EXISTS (SELECT 1 FROM parent) ON CONFLICT DO NOTHING"
    )


def rows_insert(model: type[Model], session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Insert rows of one session (each a dict of the same columns, by attribute name) in
    one statement, while the session exists; a row that would break a unique constraint
    is skipped, as ``bulk_create`` with ``ignore_conflicts`` skips it.

    The rows' foreign keys have no constraints in the database (``Observation``): this
    is where the session is checked, once for all of them. On PostgreSQL the rows travel
    as one JSON document that orjson encodes, as the hook path's events do, rather than
    through ``bulk_create``, which prepares each value of each row and builds a model
    instance per row. Rows orjson will not encode, and the other databases, take
    ``bulk_create`` after a read of the session in the same transaction.
    """
    if not rows:
        return
    document = json_document(rows) if connection.vendor == "postgresql" else None
    if document is not None:
        with server_bound_cursor(prepared=True) as cursor:
            cursor.execute(_rows_insert_sql(model, tuple(rows[0])), [session.pk, document])
        return
    with transaction.atomic():
        if not Session.objects.select_for_update().filter(pk=session.pk).exists():
            return
        model._default_manager.bulk_create([model(**row) for row in rows], ignore_conflicts=True)


def _json(value: Any) -> Jsonb:
    try:
        document = orjson.dumps(value)
    except TypeError:  # what orjson will not encode (a key that is not a string, say)
        document = json.dumps(value).encode()
    return Jsonb(document, dumps=bytes)


def record_insert(record: ContinuityRecord, sources: Sequence[uuid.UUID]) -> None:
    """Insert ``record`` (its ``created_at`` set), link its sources and mark each of them
    continued by the record's session, in one statement; the record gets its id.

    The same rows as ``record.save()``, ``sources.add()`` and an ``update(continued_by=)``
    of the sources; on databases other than PostgreSQL it is those three."""
    if connection.vendor != "postgresql":
        record.save()
        if sources:
            through = ContinuityRecord.sources.through
            through.objects.bulk_create(
                [through(continuityrecord_id=record.pk, session_id=pk) for pk in sources]
            )
            sessions_continued_by(sources, record.session_id)
        return
    assert record.created_at is not None, "set created_at: auto_now_add runs only in save()"
    params: list[Any] = [
        _json(getattr(record, f.attname))
        if isinstance(f, JSONField)
        else getattr(record, f.attname)
        for f in _record_fields()
    ]
    params += [list(sources), record.session_id, list(sources)]
    with server_bound_cursor(prepared=True) as cursor:
        cursor.execute(_record_sql(), params)
        record.pk = cursor.fetchone()[0]
    record._state.adding = False
    record._state.db = connection.alias


# Stand-ins for the values of one call, found again among the compiled parameters.
_ROW = uuid.UUID("00000000-0000-4000-8000-0000000010c4")
_STAGE = "\x00stage"


@functools.cache
def _row_lock(model: type[Model]) -> Compiled:
    return Compiled(
        lambda pk: model._default_manager.select_for_update().filter(pk=pk).values_list("pk"),
        _ROW,
    )


def row_lock(model: type[Model], pk: uuid.UUID) -> None:
    """Lock one row by its id until the transaction ends (``SELECT ... FOR UPDATE``), the
    statement compiled once (SQLite, locking the whole database for a write, runs it
    without the clause)."""
    _row_lock(model).rows(pk)


_AUTOMATIC_RECORD = Compiled(
    lambda session_pk, stage: ContinuityRecord.objects.filter(
        session_id=session_pk, trigger=ContinuityRecord.Trigger.AUTOMATIC, stage=stage
    ).order_by("created_at", "id")[:1],
    _ROW,
    _STAGE,
)


def automatic_record(session_pk: uuid.UUID, stage: str) -> ContinuityRecord | None:
    """The first automatic record of a session at a stage, or None (most often: a session
    asks once)."""
    found = _AUTOMATIC_RECORD.instances(session_pk, stage)
    return found[0] if found else None


@functools.cache
def _mcp_call_sql() -> str:
    quote = connection.ops.quote_name
    fields = [f for f in McpCall._meta.concrete_fields if not f.primary_key]
    columns = ", ".join(quote(column_of(f)) for f in fields)
    values = ", ".join(["%s"] * len(fields))
    through = McpCall.returned.through
    return (
        f"WITH r AS (INSERT INTO {quote(McpCall._meta.db_table)} ({columns}) "  # noqa: S608 - constants only
        f"VALUES ({values}) RETURNING id), "
        f"s AS (INSERT INTO {quote(through._meta.db_table)} (mcpcall_id, session_id) "
        "SELECT r.id, u FROM r, unnest(%s::uuid[]) AS u) "
        "SELECT id FROM r"
    )


def mcp_call_insert(record: McpCall, returned: Sequence[uuid.UUID]) -> None:
    """Insert an MCP call's record and the sessions its answer named: one statement on
    PostgreSQL (the request's audit costs one round trip, not four), ``save()`` and a bulk
    insert in a transaction elsewhere. The record gets its id."""
    if connection.vendor != "postgresql":
        with transaction.atomic():
            record.save()
            through = McpCall.returned.through
            through.objects.bulk_create(
                [through(mcpcall_id=record.pk, session_id=pk) for pk in returned]
            )
        return
    fields = [f for f in McpCall._meta.concrete_fields if not f.primary_key]
    params: list[Any] = [
        _json(getattr(record, f.attname))
        if isinstance(f, JSONField)
        else getattr(record, f.attname)
        for f in fields
    ]
    params.append(list(returned))
    with server_bound_cursor(prepared=True) as cursor:
        cursor.execute(_mcp_call_sql(), params)
        record.pk = cursor.fetchone()[0]
    record._state.adding = False
    record._state.db = connection.alias


@functools.cache
def _caller_guess_sql() -> str:
    quote = connection.ops.quote_name
    sessions = ", ".join(f"s.{quote(column_of(f))}" for f in Session._meta.concrete_fields)
    agents = ", ".join(f"a.{quote(column_of(f))}" for f in Agent._meta.concrete_fields)
    # The statuses as literals: the partial index of open sessions is read only when the
    # planner can prove its condition from the statement's own.
    statuses = ", ".join(f"'{status}'" for status in OPEN_STATUSES)
    return (
        f"SELECT {sessions}, {agents} FROM {quote(Session._meta.db_table)} s "  # noqa: S608 - constants only
        f"JOIN {quote(Agent._meta.db_table)} a ON a.id = s.agent_id "
        f"WHERE s.team_id = %s AND s.status IN ({statuses}) "
        "AND (a.external_id LIKE %s OR a.external_id LIKE %s) "
        "ORDER BY s.last_event_at DESC LIMIT 1"
    )


def caller_guess(team_id: int, gateway: str) -> Session | None:
    """PostgreSQL: the open session of a gateway's agents (their ids start with the
    gateway's name and ``:`` or ``/``) that was active last, with its agent, in a prepared
    statement: the same row as ``memory.recall.caller_guess``'s queryset, whose planning
    costs more than its run."""
    patterns = [f"{connection.ops.prep_for_like_query(gateway + sep)}%" for sep in ":/"]
    with server_bound_cursor(prepared=True) as cursor:
        cursor.execute(_caller_guess_sql(), [team_id, *patterns])
        row = cursor.fetchone()
    if row is None:
        return None
    width = len(Session._meta.concrete_fields)
    session = model_from_row(Session, row[:width])
    session.agent = model_from_row(Agent, row[width:])
    return session
