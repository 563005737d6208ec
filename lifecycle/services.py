"""Ingestion and the session lifecycle: the only code that writes sessions and events.

The ingest path is: adapt (validate) → redact → one transaction that stores the events,
with the client's event id as the idempotency key, and moves the sessions' state →
queue background work after commit → answer per event. The request never waits on the
broker: a session whose work could not be queued stays marked in the outbox
(``Session.memory_dirty_at``) until the periodic sweep queues it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, cast

import orjson
import psycopg
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Case, CharField, Field, Model, Q, Value, When
from django.utils import timezone
from psycopg.types.json import Jsonb

from sessionhub.models import ApiToken, Team
from sessionhub.resilience import breaker_for, throttled
from sessionhub.text.redaction import RULES_VERSION, redact_key, redact_text, redact_value

from . import signals, state
from .adapters import EventInvalid, NormalizedEvent
from .adapters import canonical as canonical_adapter
from .adapters import claude_code as claude_code_adapter
from .adapters import openclaw as openclaw_adapter
from .adapters.base import as_key, trim_strings
from .models import Agent, EndReason, EventKind, LifecycleEvent, Session, SessionStatus, Source
from .selectors import newest_first

logger = logging.getLogger(__name__)

ACCEPTED, DUPLICATE, REJECTED = "accepted", "duplicate", "rejected"
# Internal to events_store: answered as REJECTED with the code below.
CONFLICT = "conflict"


@dataclass(slots=True)
class EventResult:
    """What happened to one event of a request."""

    index: int
    status: str
    event_id: str | None = None
    session_id: str | None = None
    field: str | None = None
    reason: str | None = None
    code: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            name: getattr(self, name)
            for name in ("index", "status", "event_id", "session_id", "field", "reason", "code")
            if getattr(self, name) is not None
        }


Adapter = Callable[[Any, datetime], NormalizedEvent]


def adapter_for(source: str, token: ApiToken) -> Adapter:
    """The adapter of an ingest endpoint, bound to what it needs of the caller."""
    if source == Source.CLAUDE_CODE:
        gateway = token.gateway_name
        return lambda body, now: claude_code_adapter.adapt(body, gateway=gateway, now=now)
    if source == Source.OPENCLAW:
        gateway = token.gateway_name
        return lambda body, now: openclaw_adapter.adapt(body, now=now, gateway=gateway)
    return lambda body, now: canonical_adapter.adapt(body, now=now)


def events_ingest(*, team: Team, bodies: Sequence[Any], adapter: Adapter) -> list[EventResult]:
    """Validate, redact and store a batch of raw bodies; one result per body, in order."""
    now = timezone.now()
    results: list[EventResult] = []
    valid: list[tuple[int, NormalizedEvent]] = []
    for index, body in enumerate(bodies):
        try:
            event = adapter(body, now)
        except EventInvalid as exc:
            results.append(
                EventResult(
                    index=index,
                    status=REJECTED,
                    event_id=_claimed_id(body),
                    # The field can name a key the client sent: shown as a key is stored.
                    field=redact_key(exc.field),
                    reason=exc.reason,
                    code=exc.code,
                )
            )
            continue
        valid.append((index, _redacted(event)))
        results.append(EventResult(index=index, status=ACCEPTED, event_id=event.event_id))
    parts = _split_at_new_sessions(valid)
    # Nearly always one part; several are stored in one transaction all the same.
    with transaction.atomic() if len(parts) > 1 else contextlib.nullcontext():
        for part in parts:
            stored = events_store(team=team, events=[event for _, event in part], received_at=now)
            for (index, _), (status, session_id) in zip(part, stored, strict=True):
                result = results[index]
                if status == CONFLICT:
                    result.status = REJECTED
                    result.field = "event_id"
                    result.reason = "repeats an event id of this batch with a different body"
                    result.code = "event_id_conflict"
                    continue
                result.status = status
                result.session_id = session_id
    embedded_housekeeping(now)
    return results


def _split_at_new_sessions(
    valid: list[tuple[int, NormalizedEvent]],
) -> list[list[tuple[int, NormalizedEvent]]]:
    """The batch in parts, a new part at each start that opens a new session under a
    reused id (a reset in place): what came before it belongs to the session it ends."""
    parts: list[list[tuple[int, NormalizedEvent]]] = []
    for item in valid:
        if not parts or item[1].facts.get("opens_new_session"):
            parts.append([])
        parts[-1].append(item)
    return parts


_last_housekeeping = 0.0


def embedded_housekeeping(now: datetime) -> None:
    """Without a broker there is no Celery beat: run its periodic sweeps from the ingest
    path instead, at most once a minute per process."""
    global _last_housekeeping
    if not settings.CELERY_TASK_ALWAYS_EAGER or settings.REDIS_URL:
        return
    tick = now.timestamp()
    if tick - _last_housekeeping < settings.SESSIONHUB["EMBEDDED_SWEEP_SECONDS"]:
        return
    _last_housekeeping = tick
    try:
        crashed_sessions_close(now=now)
        outbox_sweep(now=now)
    except Exception:
        logger.exception("embedded housekeeping failed")


def _claimed_id(body: Any) -> str | None:
    if isinstance(body, dict):
        extra = body.get("sessionhub")
        for value in (
            body.get("event_id"),
            body.get("eventId"),
            extra.get("event_id") if isinstance(extra, dict) else None,
        ):
            if isinstance(value, str) and len(value) <= 200:
                return as_key(value)  # echoed in its stored form: never a secret in clear
    return None


def _redacted(event: NormalizedEvent) -> NormalizedEvent:
    """Secrets go before anything is stored or queued: payload, facts and every string
    shown about the session or its agent. The identifiers (event, session and agent ids,
    session key, hook) come from the adapters already keyed (``adapters.base.as_key``).

    Whole strings are redacted first and trimmed to ``MAX_STORED_STRING`` after, so a cut
    can never keep the head of a secret whose tail would have let a rule recognise it.

    One memo for the whole event: facts repeat payload strings (a prompt's text, a
    turn's last message, the tool name) and the working directory is in both the payload
    and the session's fields, so each such string is redacted once.
    """
    memo: dict[str, str] = {}
    changes: dict[str, Any] = {}
    for name in ("payload", "facts"):
        value = getattr(event, name)
        # The adapters' payload and facts are their own: redacted in place of a copy when
        # nothing changes, and copied by the trim in any case.
        changes[name] = trim_strings(redact_value(value, memo, copy=False))
    for name in ("agent_name", "channel", "cwd", "project"):
        value = getattr(event, name)
        redacted = redact_value(value, memo)
        if redacted != value:
            changes[name] = redacted
    return replace(event, **changes)


# --- storing ----------------------------------------------------------------------------


@transaction.atomic
def events_store(
    *, team: Team, events: Sequence[NormalizedEvent], received_at: datetime
) -> list[tuple[str, str | None]]:
    """Store events once each and move their sessions; (status, session id) per event.

    Round trips for the common case (known sessions): lock the sessions, insert the
    events, update the sessions — whatever the batch size or the number of sessions.
    """
    sessions, created = _sessions_resolve(team, events)
    adopted = _orphans_adopt(team, [sessions[key] for key in created])
    by_key = _sessions_by_key(team, events, sessions)

    rows: list[dict[str, Any]] = []
    pending: list[tuple[int, str, Session | None, state.FoldEvent | None]] = []
    in_batch: set[str] = set()
    started: set[Any] = {s.pk for s in sessions.values() if s.has_start}
    outcome: list[tuple[str, str | None]] = [(DUPLICATE, None)] * len(events)
    conflicting = _conflicting(events)
    # Time order, so "the second start is a resume" holds for a shuffled batch too.
    order = sorted(range(len(events)), key=lambda i: (events[i].occurred_at, i))
    for position, i in enumerate(order):
        event = events[i]
        if i in conflicting:
            outcome[i] = (CONFLICT, None)
            continue
        session = _session_of(event, sessions, by_key)
        outcome[i] = (DUPLICATE, str(session.pk) if session else None)
        if event.event_id in in_batch:
            continue
        in_batch.add(event.event_id)
        kind = event.kind
        if session is not None and kind in (EventKind.SESSION_START, EventKind.SESSION_RESUME):
            if kind == EventKind.SESSION_START and session.pk in started:
                kind = EventKind.SESSION_RESUME
            started.add(session.pk)
        rows.append(
            {
                "team_id": team.pk,
                "session_id": session.pk if session else None,
                "event_id": event.event_id,
                "kind": kind,
                "source": event.source,
                "hook": event.hook[:100],
                "phase": event.phase,
                "occurred_at": event.occurred_at,
                "received_at": received_at,
                "facts": event.facts,
                "payload": event.payload,
                "redaction_version": RULES_VERSION,
                "orphan_key": "" if session is not None else event.session_key[:300],
            }
        )
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
        pending.append((i, event.event_id, session, fold))

    inserted = insert_events(rows)
    new_by_session: dict[Any, list[state.FoldEvent]] = defaultdict(list)
    for i, event_id, session, fold in pending:
        if event_id not in inserted:
            continue  # stored by an earlier delivery
        outcome[i] = (ACCEPTED, outcome[i][1])
        if session is not None and fold is not None:
            new_by_session[session.pk].append(fold)

    touched = {s.pk: s for s in sessions.values()} | {s.pk: s for s in by_key.values() if s}
    for session_pk in adopted - set(new_by_session):
        new_by_session[session_pk] = []
    # Each session first takes in its own events, then the sessions link to each other;
    # all of them are written at the end, in one statement.
    written = {session_pk: touched[session_pk] for session_pk in new_by_session}
    ending: list[str] = []  # closed by this batch, or closed already: work queued now
    settling: list[str] = []  # open: work queued a moment later
    stale = received_at - settings.SESSIONHUB["OUTBOX_GRACE"]
    for session_pk, new_events in new_by_session.items():
        session = written[session_pk]
        was_open = session.is_open
        if session_pk in adopted:
            session_refold(session)  # adopted events may lie anywhere in its past
        else:
            _advance(session, new_events)
        for fold in new_events:  # the successor it names; _Linking links the two
            if fold.kind == EventKind.SESSION_END and fold.facts.get("next_session_id"):
                session.successor_external_id = fold.facts["next_session_id"]
        closed = was_open and not session.is_open
        if closed:
            signals.session_closed.send(Session, session=session, ended_at=session.ended_at)
            # Its summary is wanted now: queued at once, even when a run is already
            # waiting (a second run finds nothing new and costs little).
            ending.append(str(session_pk))
        elif session.memory_dirty_at is None or session.memory_dirty_at < stale:
            # Newly dirty; or marked long ago and never cleared (a failed run): queue it
            # again rather than leave it to a sweep that embedded mode does not have.
            (settling if session.is_open else ending).append(str(session_pk))
        # A newer mark tells a worker that is busy with the session to go round again.
        session.memory_dirty_at = received_at
    _Linking(team, written, new_by_session).run()
    sessions_write(list(written.values()))
    if ending:
        transaction.on_commit(lambda: enqueue_session_work(ending))
    if settling:
        # An open session's events come in bursts (a tool call, its result, the next):
        # waiting a moment lets one run take in the whole burst.
        delay = settings.SESSIONHUB["MEMORY_SETTLE_SECONDS"]
        transaction.on_commit(lambda: enqueue_session_work(settling, countdown=delay))
    return outcome


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


# What ingestion changes on a session row (never its team, agent, source or identity).
_SESSION_WRITABLE = (
    *state.FOLD_FIELDS,
    "session_key",
    "channel",
    "cwd",
    "project",
    "previous_session",
    "previous_external_id",
    "successor_external_id",
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
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _session_params(session: Session, fields: Sequence[Any]) -> list[Any]:
    """The session's values for these fields, as the database takes them."""
    if connection.vendor == "postgresql":
        # psycopg adapts every type these columns hold (text, numbers, times, ids) itself.
        return [getattr(session, f.attname) for f in fields]
    return [f.get_db_prep_save(getattr(session, f.attname), connection) for f in fields]


def concrete_fields(model: type[Model], names: Iterable[str]) -> list[Field]:
    """The model's fields of these names, each a column of its table."""
    fields = [model._meta.get_field(name) for name in names]
    for field in fields:
        assert isinstance(field, Field) and field.column, field  # a column, not a relation
    return cast(list[Field], fields)


def column_of(field: Field) -> str:
    """A concrete field's column name (the stubs allow None, which only relations have)."""
    assert field.column, field
    return field.column


@functools.cache
def _session_attnames() -> list[str]:
    return [f.attname for f in Session._meta.concrete_fields]


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

    ``WITH v (...) AS (VALUES ...) UPDATE ... FROM v``. On PostgreSQL each value is cast
    to its column's type, since VALUES alone would take the parameters for text
    (character columns get an unbounded varchar, so an over-long value still fails as it
    does in a plain UPDATE); SQLite needs no casts, but UPDATE ... FROM only from 3.33.
    Anywhere else, one UPDATE per session.
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
    fields = concrete_fields(Session, ("id", *_SESSION_WRITABLE))
    if postgresql:
        casts = [
            connection.ops.cast_char_field_without_max_length
            if isinstance(f, CharField)
            else f.cast_db_type(connection)
            for f in fields
        ]
        row = "(" + ", ".join(f"%s::{cast}" for cast in casts) + ")"
    else:
        row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    params: list[Any] = []
    for session in sessions:
        session.updated_at = now
        params.extend(_session_params(session, fields))
    quote = connection.ops.quote_name
    table = quote(Session._meta.db_table)
    columns = ", ".join(quote(column_of(f)) for f in fields)
    assignments = ", ".join(f"{quote(column_of(f))} = v.{quote(column_of(f))}" for f in fields[1:])
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH v ({columns}) AS (VALUES {', '.join([row] * len(sessions))}) "  # noqa: S608 - constants only
            f"UPDATE {table} SET {assignments} FROM v WHERE {table}.id = v.id",
            params,
        )


_INSERT_COLUMNS = (
    "team_id",
    "session_id",
    "event_id",
    "kind",
    "source",
    "hook",
    "phase",
    "occurred_at",
    "received_at",
    "facts",
    "payload",
    "redaction_version",
    "orphan_key",
)


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
    if from_json:
        try:
            document = orjson.dumps(rows)
        except TypeError:  # orjson.JSONEncodeError: an integer past 64 bits, say
            pass
        else:
            # Django's cursors bind client-side; this one statement binds server-side,
            # through Django's wrapper all the same (query logging, execute wrappers,
            # error translation). Django leaves psycopg's automatic prepare off.
            connection.ensure_connection()
            raw = psycopg.Cursor(connection.connection)
            wrap = (
                connection.make_debug_cursor
                if connection.queries_logged
                else connection.make_cursor
            )
            # The stubs type the wrapped cursor as Django's own and its parameters as plain
            # values; a psycopg cursor and its Jsonb adapter are what this one takes.
            with wrap(raw) as cursor:  # type: ignore[arg-type]
                cursor.execute(from_json, [Jsonb(document, dumps=bytes)])  # type: ignore[list-item]
                return {row[0] for row in cursor.fetchall()}
    params: list[Any] = []
    for row in rows:
        for name, model_field in zip(_INSERT_COLUMNS, fields, strict=True):
            params.append(model_field.get_db_prep_save(row[name], connection))
    one = "(" + ", ".join(["%s"] * len(_INSERT_COLUMNS)) + ")"
    sql = f"{head}VALUES {', '.join([one] * len(rows))}{tail}"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {row[0] for row in cursor.fetchall()}


@functools.cache
def _insert_sql(vendor: str) -> tuple[str, str, str, list[Any]]:
    """``insert_events``' statements, built once per process: the head and tail around
    VALUES, the whole statement from one JSON document (PostgreSQL only, else empty),
    and the fields in column order."""
    fields = concrete_fields(LifecycleEvent, _INSERT_COLUMNS)
    quote = connection.ops.quote_name
    head = (
        f"INSERT INTO {quote(LifecycleEvent._meta.db_table)} "
        f"({', '.join(quote(column_of(f)) for f in fields)}) "
    )
    tail = " ON CONFLICT (team_id, event_id) DO NOTHING RETURNING event_id"
    from_json = ""
    if vendor == "postgresql":
        # The row dicts' keys name the record's columns.
        keys = [quote(name) for name in _INSERT_COLUMNS]
        typed = ", ".join(
            f"{key} {f.db_type(connection)}" for key, f in zip(keys, fields, strict=True)
        )
        from_json = (
            f"{head}SELECT {', '.join(keys)} "  # noqa: S608 - constants only
            f"FROM jsonb_to_recordset(%s) AS r({typed}){tail}"
        )
    return head, tail, from_json, fields


def _orphans_adopt(team: Team, sessions: list[Session]) -> set[Any]:
    """Give new sessions the events that came, by their key alone, before they existed.

    One read of which keys have such events (usually none) and, when some do, one UPDATE
    for all of them; where two new sessions share a key, the first takes the events.
    """
    keyed = [s for s in sessions if s.session_key]
    if not keyed:
        return set()
    match = Q()
    for session in keyed:
        match |= Q(source=session.source, orphan_key=session.session_key)
    orphans = LifecycleEvent.objects.filter(match, team=team)
    waiting = set(orphans.values_list("source", "orphan_key").distinct())
    adopting: dict[tuple[str, str], Session] = {}
    for session in keyed:
        adopting.setdefault((session.source, session.session_key), session)
    adopting = {key: session for key, session in adopting.items() if key in waiting}
    if not adopting:
        return set()
    orphans.update(
        session=Case(
            *(
                When(source=source, orphan_key=key, then=Value(session.pk))
                for (source, key), session in adopting.items()
            ),
            output_field=LifecycleEvent._meta.get_field("session").target_field,
        ),
        orphan_key="",
    )
    return {session.pk for session in adopting.values()}


def _agents_resolve(
    team: Team, events: Iterable[NormalizedEvent], now: datetime
) -> dict[tuple[str, str], Agent]:
    wanted: dict[tuple[str, str], NormalizedEvent] = {}
    for event in events:
        if event.session_external_id and event.agent_external_id:
            wanted.setdefault((event.source, event.agent_external_id), event)
    if not wanted:
        return {}
    query = Q()
    for source, external_id in wanted:
        query |= Q(source=source, external_id=external_id)
    found = {(a.source, a.external_id): a for a in Agent.objects.filter(query, team=team)}
    missing = [key for key in wanted if key not in found]
    if missing:
        Agent.objects.bulk_create(
            [
                Agent(
                    team=team,
                    source=source,
                    external_id=external_id,
                    name=wanted[(source, external_id)].agent_name[:300],
                    project=wanted[(source, external_id)].project[:500],
                    last_seen_at=now,
                    redaction_version=RULES_VERSION,
                )
                for source, external_id in missing
            ],
            ignore_conflicts=True,
        )
        query = Q()
        for source, external_id in missing:
            query |= Q(source=source, external_id=external_id)
        found.update({(a.source, a.external_id): a for a in Agent.objects.filter(query, team=team)})
    return found


def _sessions_resolve(
    team: Team, events: Sequence[NormalizedEvent]
) -> tuple[dict[tuple[str, str], Session], list[tuple[str, str]]]:
    """Every session named by id, created when new, locked for this transaction; and
    which of them this call created."""
    wanted: dict[tuple[str, str], NormalizedEvent] = {}
    for event in sorted(events, key=lambda e: e.occurred_at):
        if event.session_external_id:
            wanted.setdefault((event.source, event.session_external_id), event)
    if not wanted:
        return {}, []

    found = _sessions_locked(team, list(wanted))
    _sessions_roll_over(team, events, found)
    missing = [key for key in wanted if key not in found]
    if missing:
        agents = _agents_resolve(team, [wanted[key] for key in missing], timezone.now())
        Session.objects.bulk_create(
            [_new_session(team, wanted[key], agents) for key in missing], ignore_conflicts=True
        )
        found.update(_sessions_locked(team, missing))
    by_session: dict[tuple[str, str], list[NormalizedEvent]] = defaultdict(list)
    for event in events:
        if event.session_external_id:
            by_session[(event.source, event.session_external_id)].append(event)
    for key, session in found.items():
        _fill_blanks(session, by_session[key])
    return found, missing


def _sessions_roll_over(
    team: Team, events: Sequence[NormalizedEvent], found: dict[tuple[str, str], Session]
) -> None:
    """A start that opens a new session under the id of one already started (OpenClaw's
    /new and /reset keep the id): the old row steps aside under a derived id, and the id
    is free for a new row, which follows the old one in the chain.

    Only a start not stored yet does this (a redelivery is a duplicate, nothing more);
    the caller splits batches so that such a start comes first in its part.
    """
    opening = [
        e
        for e in events
        if e.facts.get("opens_new_session") and (e.source, e.session_external_id) in found
    ]
    if not opening:
        return
    stored = set(
        LifecycleEvent.objects.filter(
            team=team, event_id__in=[e.event_id for e in opening]
        ).values_list("event_id", flat=True)
    )
    for event in opening:
        key = (event.source, event.session_external_id)
        old = found[key]
        if event.event_id in stored or not old.has_start:
            continue
        generation = (
            Session.objects.filter(
                team=team, source=event.source, external_id__startswith=f"{old.external_id}~"
            ).count()
            + 1
        )
        old.external_id = f"{event.session_external_id[:190]}~{generation}"
        Session.objects.filter(pk=old.pk).update(external_id=old.external_id)
        del found[key]
        agents = _agents_resolve(team, [event], timezone.now())
        new = _new_session(team, event, agents)
        new.previous_session = old
        new.previous_external_id = old.external_id
        new.save(force_insert=True)
        found[key] = new


def _sessions_locked(team: Team, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Session]:
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
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    converters = _session_converters(connection.vendor)
    found: dict[tuple[str, str], Session] = {}
    for row in rows:
        values = list(row)
        for index, functions, column in converters:
            for convert in functions:
                values[index] = convert(values[index], column, connection)
        session = Session.from_db(connection.alias, _session_attnames(), values)
        found[(session.source, session.external_id)] = session
    return found


@functools.cache
def _session_converters(vendor: str) -> list[tuple[int, list[Any], Any]]:
    """What turns a raw session row into field values on this database, as the ORM would
    apply it: nothing on PostgreSQL, text to times and ids on SQLite."""
    table = Session._meta.db_table
    converters = []
    for index, field in enumerate(Session._meta.concrete_fields):
        column = field.get_col(table)
        functions = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        if functions:
            converters.append((index, functions, column))
    return converters


def _new_session(
    team: Team, event: NormalizedEvent, agents: dict[tuple[str, str], Agent]
) -> Session:
    agent = agents[(event.source, event.agent_external_id)]
    return Session(
        team=team,
        agent=agent,
        source=event.source,
        external_id=event.session_external_id,
        session_key=event.session_key[:300],
        channel=event.channel[:100],
        cwd=event.cwd[:1000],
        project=event.project[:500],
        redaction_version=RULES_VERSION,
    )


def _fill_blanks(session: Session, events: Iterable[NormalizedEvent]) -> None:
    """Details a later event knows and the first one did not (OpenClaw sends them piecemeal)."""
    for event in events:
        for name, value, limit in (
            ("session_key", event.session_key, 300),
            ("channel", event.channel, 100),
            ("cwd", event.cwd, 1000),
            ("project", event.project, 500),
        ):
            if value and not getattr(session, name):
                setattr(session, name, value[:limit])


def _sessions_by_key(
    team: Team, events: Sequence[NormalizedEvent], sessions: dict[tuple[str, str], Session]
) -> dict[tuple[str, str], Session | None]:
    """Sessions for events that carry only a session key: the newest open one with that key."""
    keys = {
        (e.source, e.session_key) for e in events if not e.session_external_id and e.session_key
    }
    resolved: dict[tuple[str, str], Session | None] = {}
    for source, key in keys:
        in_batch = [s for (src, _), s in sessions.items() if src == source and s.session_key == key]
        candidates = sorted(
            in_batch, key=lambda s: (s.is_open, s.last_event_at or s.created_at), reverse=True
        )
        if candidates:
            resolved[(source, key)] = candidates[0]
            continue
        with_key = Session.objects.select_for_update().filter(
            team=team, source=source, session_key=key
        )
        resolved[(source, key)] = (
            with_key.filter(status__in=[SessionStatus.ACTIVE, SessionStatus.SUSPENDED])
            .order_by("-last_event_at")
            .first()
            or with_key.order_by("-last_event_at").first()
        )
    return resolved


def _session_of(
    event: NormalizedEvent,
    sessions: dict[tuple[str, str], Session],
    by_key: dict[tuple[str, str], Session | None],
) -> Session | None:
    if event.session_external_id:
        return sessions[(event.source, event.session_external_id)]
    return by_key.get((event.source, event.session_key))


# --- the state machine and the chain ---------------------------------------------------


def _advance(session: Session, new_events: list[state.FoldEvent]) -> None:
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


_STARTS = (EventKind.SESSION_START, EventKind.SESSION_RESUME)
_OPEN = (SessionStatus.ACTIVE, SessionStatus.SUSPENDED)


@dataclass(frozen=True, slots=True)
class _Claim:
    """A link the batch gives other sessions: those whose ``field`` (the id they resumed
    from, or their own id) is ``value`` and that have no predecessor yet follow ``by``."""

    by: Session
    field: str
    value: str

    def q(self) -> Q:
        return Q(source=self.by.source, **{self.field: self.value})

    def fits(self, session: Session) -> bool:
        return (
            session.pk != self.by.pk
            and session.source == self.by.source
            and getattr(session, self.field) == self.value
        )


class _Linking:
    """Session-chain links and replacement, from the starts and ends just stored.

    The same few queries whatever the number of sessions in the batch: one read of the
    sessions the starting ones may follow, one UPDATE of the stored sessions that follow
    one of the batch's, one locking read of the open sessions the starts may replace (and
    one read per /clear start).

    The sessions are linked one after the other, in batch order, as when each was written
    before the next was linked; now they are all written at the end. So a lookup sees the
    batch's sessions already linked ("settled") as they are in memory, the others as
    stored.
    """

    def __init__(
        self,
        team: Team,
        written: dict[Any, Session],
        new_by_session: dict[Any, list[state.FoldEvent]],
    ) -> None:
        self.team = team
        self.written = written
        self.new_by_session = new_by_session
        self.settled: set[Any] = set()
        self.by_external_id: dict[tuple[str, str], Session] = {}
        self.naming_successor: list[Session] = []
        self.siblings: list[Session] = []
        self.starting = [
            (written[pk], starts)
            for pk, events in new_by_session.items()
            if (starts := [e for e in events if e.kind in _STARTS])
        ]
        self.claims = self._claims()

    def run(self) -> None:
        if not self.starting and not self.claims:
            return
        self._predecessors_read()
        self._claims_store()
        self._open_siblings_lock()
        for session_pk, new_events in self.new_by_session.items():
            self.settled.add(session_pk)
            session = self.written[session_pk]
            for index, event in enumerate(new_events):
                claim = self.claims.get((session_pk, index))
                if event.kind not in _STARTS:
                    self._claim_settled(claim)
                    continue
                resumed_from = event.facts.get("resumed_from")
                if resumed_from and not session.previous_external_id:
                    session.previous_external_id = resumed_from
                if not session.previous_session_id:
                    session.previous_session = self._predecessor(session)
                self._claim_settled(claim)
                if event.facts.get("start_source") == "clear":
                    self._link_cleared(session)
                if session.session_key:
                    self._replace_open_siblings(session, event.occurred_at)
        # A session of the batch settled only after a claim that fits it takes the first
        # such claim now (written one by one, it would have lost it to its own write).
        for session in self.written.values():
            if not session.previous_session_id:
                claim = next((c for c in self.claims.values() if c.fits(session)), None)
                if claim is not None:
                    session.previous_session = claim.by

    def _claim_settled(self, claim: _Claim | None) -> None:
        """A claim as it is made: settled sessions of the batch without a predecessor that
        it fits follow its session (stored ones got theirs from ``_claims_store``)."""
        if claim is None:
            return
        for session_pk in self.settled:
            session = self.written[session_pk]
            if not session.previous_session_id and claim.fits(session):
                session.previous_session = claim.by

    def _current(self, rows: Iterable[Session]) -> list[Session]:
        """The rows as read, each settled session of the batch as it is in memory."""
        return [self.written[s.pk] if s.pk in self.settled else s for s in rows]

    def _current_and_settled(self, rows: Iterable[Session]) -> list[Session]:
        """The rows as read but the settled sessions of the batch, then all of these as
        they are in memory, whether or not they fitted the read."""
        return [s for s in rows if s.pk not in self.settled] + [
            self.written[pk] for pk in self.settled
        ]

    def _claims(self) -> dict[tuple[Any, int], _Claim]:
        """The claims by (session, index of the event making it), in the order they are
        made, so the first claim on a session wins, as with one UPDATE each."""
        claims: dict[tuple[Any, int], _Claim] = {}
        for session_pk, new_events in self.new_by_session.items():
            session = self.written[session_pk]
            claiming = session.previous_session_id is None
            for index, event in enumerate(new_events):
                if event.kind in _STARTS and claiming:
                    # Sessions that named this one as where they resumed from, before it
                    # was known here.
                    claims[(session_pk, index)] = _Claim(
                        session, "previous_external_id", session.external_id
                    )
                    claiming = False
                elif event.kind == EventKind.SESSION_END and event.facts.get("next_session_id"):
                    claims[(session_pk, index)] = _Claim(
                        session, "external_id", event.facts["next_session_id"]
                    )
        return claims

    def _claims_store(self) -> None:
        """Stored sessions that follow one of the batch's, in one UPDATE (the batch's own
        sessions take theirs in memory: their rows are written afterwards)."""
        if not self.claims:
            return
        claims = list(self.claims.values())
        match = Q()
        for claim in claims:
            match |= claim.q()
        Session.objects.filter(match, team=self.team, previous_session__isnull=True).exclude(
            pk__in=list(self.written)
        ).update(previous_session=Case(*(When(c.q(), then=Value(c.by.pk)) for c in claims)))

    def _predecessors_read(self) -> None:
        """The sessions the starting ones may follow: those they name as where they
        resumed from, and those naming one of them as successor."""
        query = Q()
        for session, starts in self.starting:
            if session.previous_session_id:
                continue
            named = {session.previous_external_id}
            named.update(e.facts.get("resumed_from") or "" for e in starts)
            named.discard("")
            query |= Q(source=session.source, successor_external_id=session.external_id)
            if named:
                query |= Q(source=session.source, external_id__in=named)
        rows = list(Session.objects.filter(query, team=self.team)) if query else []
        self.by_external_id = {(s.source, s.external_id): s for s in rows}
        self.naming_successor = [s for s in rows if s.successor_external_id]

    def _predecessor(self, session: Session) -> Session | None:
        """The one it resumed from, else the latest started that names it as successor."""
        if session.previous_external_id:
            named = self.by_external_id.get((session.source, session.previous_external_id))
            if named is not None and named.pk != session.pk:
                return self.written.get(named.pk, named)
        naming = [
            s
            for s in self._current_and_settled(self.naming_successor)
            if s.source == session.source
            and s.successor_external_id == session.external_id
            and s.pk != session.pk
        ]
        newest = newest_first(naming, "started_at")
        return self.written.get(newest[0].pk, newest[0]) if newest else None

    def _open_siblings_lock(self) -> None:
        """The open sessions a start may replace (same agent and key, started before it),
        for every start of the batch in one locking read."""
        latest: dict[tuple[Any, str], datetime] = {}
        for session, starts in self.starting:
            if session.session_key:
                pair = (session.agent_id, session.session_key)
                at = max(e.occurred_at for e in starts)
                latest[pair] = max(latest.get(pair, at), at)
        if latest:
            query = Q()
            for (agent_id, key), at in latest.items():
                query |= Q(agent_id=agent_id, session_key=key, started_at__lt=at)
            self.siblings = list(
                Session.objects.select_for_update().filter(query, status__in=_OPEN).order_by("pk")
            )

    def _replace_open_siblings(self, session: Session, started_at: datetime) -> None:
        """A new start for the same agent and key ends the session it replaces."""
        siblings = sorted(
            (
                s
                for s in self._current_and_settled(self.siblings)
                if s.pk != session.pk
                and s.agent_id == session.agent_id
                and s.session_key == session.session_key
                and s.is_open
                and s.started_at is not None
                and s.started_at < started_at
            ),
            key=lambda s: s.pk,
        )
        for old in siblings:
            # One of the batch's sessions is closed as it is in memory, and counts so from
            # now on.
            old = self.written.get(old.pk, old)
            if old.pk in self.written:
                self.settled.add(old.pk)
            session_close(
                session=old,
                reason=EndReason.REPLACED,
                at=started_at,
                event_id=f"sessionhub:replaced:{old.pk}",
                facts={"replaced_by": str(session.pk)},
            )
            if not session.previous_session_id:
                session.previous_session = old

    def _link_cleared(self, session: Session) -> None:
        """Claude Code /clear: the new session follows the one just cleared in the project."""
        if session.previous_session_id or session.started_at is None:
            return
        window = settings.SESSIONHUB["CLEAR_LINK_WINDOW"]
        earliest, latest = session.started_at - window, session.started_at + window

        def fits(s: Session) -> bool:
            return (
                s.agent_id == session.agent_id
                and s.end_reason == EndReason.CLEAR
                and s.ended_at is not None
                and earliest <= s.ended_at <= latest
            )

        stored = Q(
            agent_id=session.agent_id,
            end_reason=EndReason.CLEAR,
            ended_at__gte=earliest,
            ended_at__lte=latest,
        ) & ~Q(pk__in=list(self.settled))
        settled = Q(pk__in=[pk for pk in self.settled if fits(self.written[pk])])
        # Not one that a session already follows, stored or settled.
        followed = {self.written[pk].previous_session_id for pk in self.settled}
        rows = Session.objects.filter(stored | settled, next_sessions__isnull=True).exclude(
            pk=session.pk
        )
        newest = newest_first(self._current(s for s in rows if s.pk not in followed), "ended_at")
        if newest:
            session.previous_session = self.written.get(newest[0].pk, newest[0])


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
    _advance(session, [state.FoldEvent(kind=EventKind.SESSION_END, occurred_at=at, facts=facts)])
    if was_open and not session.is_open:
        signals.session_closed.send(Session, session=session, ended_at=session.ended_at)
    session.memory_dirty_at = timezone.now()
    session.save()
    pk = str(session.pk)
    transaction.on_commit(lambda: enqueue_session_work([pk]))
    return True


def session_for_continuity(
    *,
    team: Team,
    source: str,
    external_id: str,
    agent_external_id: str = "",
    gateway: str = "",
    instance: str = "",
) -> Session | None:
    """The session a gateway asks continuity for; a shell is made when the gateway's start
    event is still on its way (the plugin sends it in the background) and it names its agent
    (an OpenClaw agent as its events name it: with the gateway).
    """
    external_id = as_key(external_id)  # the gateway's raw id, keyed as ingestion keys it
    session = (
        Session.objects.select_related("agent")
        .filter(team=team, source=source, external_id=external_id)
        .first()
    )
    if session is not None or not agent_external_id:
        return session
    name = agent_external_id
    if source == Source.OPENCLAW and (gateway or instance):
        agent_external_id, name = openclaw_adapter.agent_identity(
            agent_external_id, gateway, instance
        )
    agent, _ = Agent.objects.get_or_create(
        team=team,
        source=source,
        external_id=as_key(agent_external_id, limit=300),  # as ingestion stores it
        defaults={"name": redact_text(name)[:300], "last_seen_at": timezone.now()},
    )
    session, _ = Session.objects.get_or_create(
        team=team, source=source, external_id=external_id, defaults={"agent": agent}
    )
    return session


# --- background work -------------------------------------------------------------------


def enqueue_session_work(session_ids: Iterable[str], countdown: float = 0) -> int:
    """Queue memory processing; a broker outage leaves the work to the outbox sweep.

    The sessions stay marked (``memory_dirty_at``) until their work is done, so nothing is
    lost by not queueing: after a first failure the broker's circuit breaker skips the
    publish at once, and the outage is logged once per interval, not per request.
    """
    process_session = signals.session_task()
    if process_session is None:
        return 0  # no app distils sessions here; the marks stay for when one does
    ids = list(session_ids)
    conf = process_session.app.conf
    breaker = None if conf.task_always_eager else breaker_for(conf.broker_url)
    if breaker is not None and not breaker.available:
        throttled.warning(
            "broker", "broker at %s unavailable; the outbox sweep will queue the work", breaker.name
        )
        return 0
    queued = 0
    for session_id in ids:
        try:
            process_session.apply_async((session_id,), countdown=countdown or None)
            queued += 1
        except Exception as exc:  # noqa: BLE001 - the outbox keeps the work
            if breaker is not None:
                breaker.failed(exc)
            throttled.warning(
                "broker",
                "could not queue work (%s); the outbox sweep will queue it",
                exc.__class__.__name__,
            )
            break
    return queued


def outbox_sweep(*, now: datetime | None = None, limit: int = 500) -> int:
    """Re-queue sessions whose marked work was not done within the grace period."""
    now = now or timezone.now()
    grace = settings.SESSIONHUB["OUTBOX_GRACE"]
    ids = list(
        Session.objects.filter(memory_dirty_at__lt=now - grace)
        .order_by("memory_dirty_at")
        .values_list("pk", flat=True)[:limit]
    )
    return enqueue_session_work([str(pk) for pk in ids])


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
