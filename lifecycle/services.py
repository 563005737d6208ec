"""Ingestion and the session lifecycle: the code that writes sessions and events.

The import of an export document (``session_import``, ``session_links_set``) and the
``split_merged_agents`` repair (``session_agent_move``) write through here too. One
writer stands outside, named where it writes: on PostgreSQL the continuity record marks
its sources ``continued_by`` in the same statement that inserts it
(memory/statements.py; elsewhere it calls ``sessions_continued_by``).

The ingest path is: adapt (validate) → redact → one transaction that stores the events,
with the client's event id as the idempotency key, and moves the sessions' state →
queue background work after commit → answer per event. The request never waits on the
broker: a session whose work could not be queued stays marked in the outbox
(``Session.memory_dirty_at``) until the periodic sweep queues it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from sessionhub.db.statements import Compiled
from sessionhub.models import ApiToken, Team
from sessionhub.text.redaction import (
    RULES_VERSION,
    has_random_run,
    redact_identifier,
    redact_key,
    redact_text,
    redact_value,
    unchanged,
)

from .adapters import EventInvalid, NormalizedEvent
from .adapters import canonical as canonical_adapter
from .adapters import claude_code as claude_code_adapter
from .adapters import codex as codex_adapter
from .adapters import gemini_cli as gemini_cli_adapter
from .adapters import openclaw as openclaw_adapter
from .adapters.base import MAX_STORED_STRING, as_key, trim_strings
from .ingest.fold import crashed_sessions_close
from .ingest.identity import agents_seen
from .ingest.outbox import memory_caught_up, outbox_sweep
from .ingest.quick import event_store_quiet, quiet
from .ingest.results import ACCEPTED, CONFLICT, DUPLICATE, REJECTED, EventResult
from .ingest.store import events_store
from .models import Agent, LifecycleEvent, Session, Source

# The way in: what views, tasks and the memory app call. The parts live in ingest/.
__all__ = [
    "ACCEPTED",
    "DUPLICATE",
    "REJECTED",
    "Adapter",
    "EventResult",
    "adapter_for",
    "crashed_sessions_close",
    "embedded_housekeeping",
    "events_ingest",
    "memory_caught_up",
    "orphan_events_delete",
    "outbox_sweep",
    "session_delete_if_closed",
    "session_for_continuity",
]

logger = logging.getLogger(__name__)


Adapter = Callable[[Any, datetime], NormalizedEvent]
# The CLIs whose hooks follow Claude Code's shape: the token's gateway names the agent.
_CLI_ADAPTERS: dict[str, Callable[..., NormalizedEvent]] = {
    Source.CODEX: codex_adapter.adapt,
    Source.GEMINI_CLI: gemini_cli_adapter.adapt,
}


def adapter_for(source: str, token: ApiToken) -> Adapter:
    """The adapter of an ingest endpoint, bound to what it needs of the caller."""
    if source == Source.CLAUDE_CODE:
        gateway = token.gateway_name
        memo: dict[Any, Any] = {}  # what the request's events repeat, derived once
        return lambda body, now: claude_code_adapter.adapt(
            body, gateway=gateway, now=now, memo=memo
        )
    if source == Source.OPENCLAW:
        gateway = token.gateway_name
        return lambda body, now: openclaw_adapter.adapt(body, now=now, gateway=gateway)
    if source in _CLI_ADAPTERS:
        gateway, adapt = token.gateway_name, _CLI_ADAPTERS[source]
        return lambda body, now: adapt(body, gateway=gateway, now=now)
    return lambda body, now: canonical_adapter.adapt(body, now=now)


def events_ingest(*, team: Team, bodies: Sequence[Any], adapter: Adapter) -> list[EventResult]:
    """Validate, redact and store a batch of raw bodies; one result per body, in order."""
    now = timezone.now()
    results: list[EventResult] = []
    valid: list[tuple[int, NormalizedEvent]] = []
    clean = _Clean()  # what the events repeat and was found to hold no secret
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
        valid.append((index, _redacted(event, clean)))
        results.append(
            EventResult(index=index, status=ACCEPTED, event_id=event.event_id, kind=event.kind)
        )
    if len(valid) == 1 and quiet(valid[0][1]):
        quick = event_store_quiet(team=team, event=valid[0][1], received_at=now)
        if quick is not None:
            results[valid[0][0]].status, results[valid[0][0]].session_id = quick
            agents_seen(team, [valid[0][1]], now)
            embedded_housekeeping(now)
            return results
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
    agents_seen(team, [event for _, event in valid], now)
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


@dataclass(slots=True)
class _Clean:
    """What a request's events repeat and redaction found nothing in: the details of a
    session (``_redacted``) and strings of their payloads (``unchanged``'s ``clean``)."""

    details: set[tuple[str, ...]] = field(default_factory=set)
    strings: set[str] = field(default_factory=set)


def _redacted(event: NormalizedEvent, clean: _Clean | None = None) -> NormalizedEvent:
    """Secrets go before anything is stored or queued: payload, facts and every string
    shown about the session or its agent. The identifiers (event, session and agent ids,
    session key, hook) come from the adapters already keyed (``adapters.base.as_key``).

    Whole strings are redacted first and trimmed to ``MAX_STORED_STRING`` after, so a cut
    can never keep the head of a secret whose tail would have let a rule recognise it.

    One memo for the whole event: facts repeat payload strings (a prompt's text, a
    turn's last message, the tool name) and the working directory is in both the payload
    and the session's fields, so each such string is redacted once.

    ``clean``, when given (one for the events of a request), holds the details (agent
    name, channel, working directory, project, developer) and strings found to need
    nothing: the events of a session repeat them, and they are looked at once.
    """
    memo: dict[str, str] = {}
    details = (event.agent_name, event.channel, event.cwd, event.project, event.developer)
    # The usual event holds no secret and no string past the limit: one scan over all its
    # strings finds that, and the event is stored as the adapter made it. (``unchanged``
    # of several values is the conjunction of each one's answer.)
    if clean is None:
        if unchanged(
            event.payload, event.facts, *details, memo=memo, longest=MAX_STORED_STRING
        ) and not (has_random_run(event.cwd) or has_random_run(event.project)):
            return event
    elif details in clean.details:
        if unchanged(
            event.payload, event.facts, memo=memo, longest=MAX_STORED_STRING, clean=clean.strings
        ):
            return event
    elif unchanged(
        event.payload,
        event.facts,
        *details,
        memo=memo,
        longest=MAX_STORED_STRING,
        clean=clean.strings,
    ) and not (has_random_run(event.cwd) or has_random_run(event.project)):
        clean.details.add(details)
        return event
    changes: dict[str, Any] = {}
    for name in ("payload", "facts"):
        value = getattr(event, name)
        # The adapters' payload and facts are their own: redacted in place of a copy when
        # nothing changes, and copied by the trim in any case.
        changes[name] = trim_strings(redact_value(value, memo, copy=False))
    for name in ("agent_name", "channel", "cwd", "project", "developer"):
        value = getattr(event, name)
        redacted: object
        if name in ("cwd", "project"):
            redacted = redact_identifier(value)  # paths: random-looking folders too
        else:
            redacted = redact_value(value, memo)
        if redacted != value:
            changes[name] = redacted
    return replace(event, **changes)


# The session a continuity request names: compiled once (a lookup of some forty columns).
_CONTINUITY_SESSION = Compiled(
    lambda team_id, source, external_id: Session.objects.filter(
        team_id=team_id, source=source, external_id=external_id
    ).order_by("pk")[:1],
    -97_531,
    "\x00source",
    "\x00external id",
)


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
    found = _CONTINUITY_SESSION.instances(team.pk, source, external_id)
    session = found[0] if found else None
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


def session_delete_if_closed(session: Session) -> bool:
    """Delete a closed session with everything hanging off it, if it is still closed as
    it was read (retention archives it first): locked as ingestion locks it, so a resume
    that lands meanwhile keeps it. Whether it was deleted."""
    with transaction.atomic():
        unchanged = Session.objects.select_for_update().filter(
            pk=session.pk, status=session.status, ended_at=session.ended_at
        )
        if not unchanged.exists():
            return False
        deleted, _ = unchanged.delete()
    return bool(deleted)


def orphan_events_delete(ids: Sequence[int]) -> int:
    """Delete these events if they still belong to no session (retention archives them
    first; one adopted meanwhile stays). How many were deleted."""
    deleted, _ = LifecycleEvent.objects.filter(pk__in=ids, session__isnull=True).delete()
    return deleted


def session_import(
    *,
    team: Team,
    agent: dict[str, Any],
    session_pk: Any,
    session: dict[str, Any],
    events: Sequence[dict[str, Any]],
) -> tuple[Session, dict[str, LifecycleEvent]]:
    """Store a session read from an export document as it was (its id, times, state and
    events), under its agent, found by identity or made: the import's write to this
    app's tables. The document's reader (``memory.export.redacted_session_item``) hands
    the rows over with identifiers keyed and every string redacted by ingest's rules, as
    an adapter hands ``events_ingest`` its normalized events. The session and its
    events by their event ids."""
    found, _ = Agent.objects.get_or_create(
        team=team,
        source=agent["source"],
        external_id=agent["external_id"],
        defaults={"name": agent.get("name", ""), "project": agent.get("project", "")},
    )
    stored = Session.objects.create(pk=session_pk, team=team, agent=found, **session)
    LifecycleEvent.objects.bulk_create(
        [LifecycleEvent(team=team, session=stored, **row) for row in events]
    )
    by_event_id = {e.event_id: e for e in LifecycleEvent.objects.filter(session=stored)}
    return stored, by_event_id


def session_links_set(
    *, team: Team, session_pk: Any, previous_session: Any = None, continued_by: Any = None
) -> None:
    """Link an imported session to the sessions before and after it, where those exist in
    the team."""
    links = {}
    for name, target in (("previous_session", previous_session), ("continued_by", continued_by)):
        if target and Session.objects.filter(pk=target, team=team).exists():
            links[f"{name}_id"] = target
    if links:
        Session.objects.filter(pk=session_pk, team=team).update(**links)


def sessions_continued_by(sources: Sequence[Any], session_id: Any) -> None:
    """Mark these sessions continued by ``session_id`` (a continuity record's)."""
    Session.objects.filter(pk__in=sources).update(continued_by_id=session_id)


def session_agent_move(session: Session, *, external_id: str, name: str, project: str) -> bool:
    """Move a session to the agent of this identity in its team and source (made when
    missing, with the session's last activity as its last sighting). Whether an agent was
    made."""
    old = session.agent
    target, made = Agent.objects.get_or_create(
        team_id=old.team_id,
        source=old.source,
        external_id=external_id,
        defaults={
            "name": name,
            "project": project,
            "last_seen_at": session.last_event_at or timezone.now(),
            "redaction_version": RULES_VERSION,
        },
    )
    Session.objects.filter(pk=session.pk).update(agent=target)
    session.agent = target
    return made


def agent_delete_if_unused(agent: Agent) -> bool:
    """Delete an agent that no session is on any more (the caller has checked that
    nothing of its own holds it). Whether it was deleted."""
    if Session.objects.filter(agent=agent).exists():
        return False
    agent.delete()
    return True
