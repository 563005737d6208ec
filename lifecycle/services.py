"""Ingestion and the session lifecycle: the only code that writes sessions and events.

The ingest path is: adapt (validate) → redact → one transaction that stores the events,
with the client's event id as the idempotency key, and moves the sessions' state →
queue background work after commit → answer per event. The request never waits on the
broker: a session whose work could not be queued stays marked in the outbox
(``Session.memory_dirty_at``) until the periodic sweep queues it.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from memory.continuity import pins_release
from memory.redaction import RULES_VERSION, redact_text, redact_value
from sessionhub.models import ApiToken, Team

from . import state
from .adapters import EventInvalid, NormalizedEvent
from .adapters import canonical as canonical_adapter
from .adapters import claude_code as claude_code_adapter
from .adapters import openclaw as openclaw_adapter
from .models import Agent, EndReason, EventKind, LifecycleEvent, Session, SessionStatus, Source

logger = logging.getLogger(__name__)

ACCEPTED, DUPLICATE, REJECTED = "accepted", "duplicate", "rejected"


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
        return lambda body, now: openclaw_adapter.adapt(body, now=now)
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
                    field=exc.field,
                    reason=exc.reason,
                    code=exc.code,
                )
            )
            continue
        valid.append((index, _redacted(event)))
        results.append(EventResult(index=index, status=ACCEPTED, event_id=event.event_id))
    if valid:
        stored = events_store(team=team, events=[event for _, event in valid], received_at=now)
        for (index, _), (status, session_id) in zip(valid, stored, strict=True):
            results[index].status = status
            results[index].session_id = session_id
    embedded_housekeeping(now)
    return results


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
                return value
    return None


def _redacted(event: NormalizedEvent) -> NormalizedEvent:
    """Secrets go before anything is stored or queued: payload, facts and every string
    that names the session or its agent. Redaction is deterministic, so identities made
    of redacted strings still match from one event to the next."""
    return replace(
        event,
        payload=redact_value(event.payload),
        facts=redact_value(event.facts),
        agent_external_id=redact_text(event.agent_external_id),
        agent_name=redact_text(event.agent_name),
        session_key=redact_text(event.session_key),
        channel=redact_text(event.channel),
        cwd=redact_text(event.cwd),
        project=redact_text(event.project),
    )


# --- storing ----------------------------------------------------------------------------


@transaction.atomic
def events_store(
    *, team: Team, events: Sequence[NormalizedEvent], received_at: datetime
) -> list[tuple[str, str | None]]:
    """Store events once each and move their sessions; (status, session id) per event.

    Round trips for the common case (known session): lock the session, insert the
    events, update the session — whatever the batch size.
    """
    sessions, created = _sessions_resolve(team, events)
    adopted = _orphans_adopt(team, [sessions[key] for key in created])
    by_key = _sessions_by_key(team, events, sessions)

    rows: list[dict[str, Any]] = []
    pending: list[tuple[int, str, Session | None, state.FoldEvent | None]] = []
    in_batch: set[str] = set()
    started: set[Any] = {s.pk for s in sessions.values() if s.has_start}
    outcome: list[tuple[str, str | None]] = [(DUPLICATE, None)] * len(events)
    # Time order, so "the second start is a resume" holds for a shuffled batch too.
    order = sorted(range(len(events)), key=lambda i: (events[i].occurred_at, i))
    for position, i in enumerate(order):
        event = events[i]
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
    newly_dirty: list[str] = []
    stale = received_at - settings.SESSIONHUB["OUTBOX_GRACE"]
    for session_pk, new_events in new_by_session.items():
        session = touched[session_pk]
        was_open = session.is_open
        if session_pk in adopted:
            session_refold(session)  # adopted events may lie anywhere in its past
        else:
            _advance(session, new_events)
        _link(session, new_events, received_at)
        if was_open and not session.is_open:
            pins_release(session, session.ended_at)
        if session.memory_dirty_at is None or session.memory_dirty_at < stale:
            # Newly dirty; or marked long ago and never cleared (a failed run): queue it
            # again rather than leave it to a sweep that embedded mode does not have.
            newly_dirty.append(str(session_pk))
        # A newer mark tells a worker that is busy with the session to go round again.
        session.memory_dirty_at = received_at
        session_write(session)
    if newly_dirty:
        transaction.on_commit(lambda: enqueue_session_work(newly_dirty))
    return outcome


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
    fields = [Session._meta.get_field(name) for name in _SESSION_WRITABLE]
    assignments = ", ".join(f'"{f.column}" = %s' for f in fields)
    params = [f.get_db_prep_save(getattr(session, f.attname), connection) for f in fields]
    params.append(Session._meta.pk.get_db_prep_value(session.pk, connection))
    with connection.cursor() as cursor:
        cursor.execute(
            f'UPDATE "{Session._meta.db_table}" SET {assignments} WHERE "id" = %s',  # noqa: S608 - constants only
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
    """
    if not rows:
        return set()
    fields = [LifecycleEvent._meta.get_field(name) for name in _INSERT_COLUMNS]
    params: list[Any] = []
    for row in rows:
        for name, model_field in zip(_INSERT_COLUMNS, fields, strict=True):
            params.append(model_field.get_db_prep_save(row[name], connection))
    one = "(" + ", ".join(["%s"] * len(_INSERT_COLUMNS)) + ")"
    sql = (
        f"INSERT INTO {LifecycleEvent._meta.db_table} ({', '.join(_INSERT_COLUMNS)}) "  # noqa: S608 - constants only
        f"VALUES {', '.join([one] * len(rows))} "
        "ON CONFLICT (team_id, event_id) DO NOTHING RETURNING event_id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {row[0] for row in cursor.fetchall()}


def _orphans_adopt(team: Team, sessions: list[Session]) -> set[Any]:
    """Give a new session the events that came, by its key alone, before it existed."""
    adopted: set[Any] = set()
    for session in sessions:
        if not session.session_key:
            continue
        count = LifecycleEvent.objects.filter(
            team=team, source=session.source, orphan_key=session.session_key
        ).update(session=session, orphan_key="")
        if count:
            adopted.add(session.pk)
    return adopted


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

    def lookup(keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Session]:
        query = Q()
        for source, external_id in keys:
            query |= Q(source=source, external_id=external_id)
        # Locked in a fixed order so concurrent requests cannot deadlock on each other.
        rows = Session.objects.select_for_update().filter(query, team=team).order_by("pk")
        return {(s.source, s.external_id): s for s in rows}

    found = lookup(wanted)
    missing = [key for key in wanted if key not in found]
    if missing:
        agents = _agents_resolve(team, [wanted[key] for key in missing], timezone.now())
        Session.objects.bulk_create(
            [_new_session(team, wanted[key], agents) for key in missing], ignore_conflicts=True
        )
        found.update(lookup(missing))
    by_session: dict[tuple[str, str], list[NormalizedEvent]] = defaultdict(list)
    for event in events:
        if event.session_external_id:
            by_session[(event.source, event.session_external_id)].append(event)
    for key, session in found.items():
        _fill_blanks(session, by_session[key])
    return found, missing


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


def _link(session: Session, new_events: list[state.FoldEvent], now: datetime) -> None:
    """Session-chain links and replacement, from the starts and ends just stored."""
    for event in new_events:
        facts = event.facts
        if event.kind in (EventKind.SESSION_START, EventKind.SESSION_RESUME):
            resumed_from = facts.get("resumed_from")
            if resumed_from and not session.previous_external_id:
                session.previous_external_id = resumed_from
            _link_predecessor(session)
            if facts.get("start_source") == "clear":
                _link_cleared(session)
            if session.session_key:
                _replace_open_siblings(session, event.occurred_at)
        elif event.kind == EventKind.SESSION_END and facts.get("next_session_id"):
            session.successor_external_id = facts["next_session_id"]
            Session.objects.filter(
                team_id=session.team_id,
                source=session.source,
                external_id=session.successor_external_id,
                previous_session__isnull=True,
            ).exclude(pk=session.pk).update(previous_session=session)


def _link_predecessor(session: Session) -> None:
    if session.previous_session_id:
        return
    same_source = Session.objects.filter(team_id=session.team_id, source=session.source).exclude(
        pk=session.pk
    )
    predecessor = None
    if session.previous_external_id:
        predecessor = same_source.filter(external_id=session.previous_external_id).first()
    if predecessor is None:
        predecessor = same_source.filter(successor_external_id=session.external_id).first()
    if predecessor is not None:
        session.previous_session = predecessor
    # Sessions that named this one as where they resumed from, before it was known here.
    same_source.filter(
        previous_external_id=session.external_id, previous_session__isnull=True
    ).update(previous_session=session)


def _link_cleared(session: Session) -> None:
    """Claude Code /clear: the new session follows the one just cleared in the project."""
    if session.previous_session_id or session.started_at is None:
        return
    window = settings.SESSIONHUB["CLEAR_LINK_WINDOW"]
    cleared = (
        Session.objects.filter(
            agent_id=session.agent_id,
            end_reason=EndReason.CLEAR,
            ended_at__gte=session.started_at - window,
            ended_at__lte=session.started_at + window,
            next_sessions__isnull=True,
        )
        .exclude(pk=session.pk)
        .order_by("-ended_at")
        .first()
    )
    if cleared is not None:
        session.previous_session = cleared


def _replace_open_siblings(session: Session, started_at: datetime) -> None:
    """A new start for the same agent and key ends the session it replaces."""
    siblings = (
        Session.objects.select_for_update()
        .filter(
            agent_id=session.agent_id,
            session_key=session.session_key,
            status__in=[SessionStatus.ACTIVE, SessionStatus.SUSPENDED],
            started_at__lt=started_at,
        )
        .exclude(pk=session.pk)
        .order_by("pk")
    )
    for old in siblings:
        session_close(
            session=old,
            reason=EndReason.REPLACED,
            at=started_at,
            event_id=f"sessionhub:replaced:{old.pk}",
            facts={"replaced_by": str(session.pk)},
        )
        if not session.previous_session_id:
            session.previous_session = old


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
        pins_release(session, session.ended_at)
    session.memory_dirty_at = timezone.now()
    session.save()
    pk = str(session.pk)
    transaction.on_commit(lambda: enqueue_session_work([pk]))
    return True


def session_for_continuity(
    *, team: Team, source: str, external_id: str, agent_external_id: str = ""
) -> Session | None:
    """The session a gateway asks continuity for; a shell is made when the gateway's start
    event is still on its way (the plugin sends it in the background) and it names its agent.
    """
    session = (
        Session.objects.select_related("agent")
        .filter(team=team, source=source, external_id=external_id)
        .first()
    )
    if session is not None or not agent_external_id:
        return session
    agent_external_id = redact_text(agent_external_id)  # as ingestion stores it
    agent, _ = Agent.objects.get_or_create(
        team=team,
        source=source,
        external_id=agent_external_id,
        defaults={"name": agent_external_id, "last_seen_at": timezone.now()},
    )
    session, _ = Session.objects.get_or_create(
        team=team, source=source, external_id=external_id, defaults={"agent": agent}
    )
    return session


# --- background work -------------------------------------------------------------------


def enqueue_session_work(session_ids: Iterable[str]) -> int:
    """Queue memory processing; a broker outage leaves the work to the outbox sweep."""
    from memory.tasks import process_session

    queued = 0
    for session_id in session_ids:
        try:
            process_session.delay(session_id)
            queued += 1
        except Exception:
            logger.warning(
                "could not queue work for session %s; the outbox sweep will",
                session_id,
                exc_info=True,
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
