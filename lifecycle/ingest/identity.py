"""Which agent and which session an event belongs to: resolving and creating them, rolling
a reset session over to a new one, adopting orphans that arrived before their start."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Case, Q, Value, When
from django.utils import timezone

from sessionhub.models import Team
from sessionhub.text.redaction import RULES_VERSION

from ..adapters import NormalizedEvent
from ..models import OPEN_STATUSES, Agent, LifecycleEvent, Session
from .statements import sessions_locked

logger = logging.getLogger(__name__)


def orphans_adopt(team: Team, sessions: list[Session]) -> set[Any]:
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
                    developer=wanted[(source, external_id)].developer[:200],
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


# (team, source, agent external id) → when this process last moved the agent's last_seen_at
_agents_seen: dict[tuple[int, str, str], float] = {}
_AGENTS_SEEN_MAX = 10_000


def agents_seen(team: Team, events: Iterable[NormalizedEvent], now: datetime) -> None:
    """Move the agents' ``last_seen_at`` to ``now``: one UPDATE for the agents this process
    has not moved for ``AGENT_LAST_SEEN_RESOLUTION``, and nothing at all (no query) for the
    usual request, whose agent it moved a moment ago."""
    resolution = settings.SESSIONHUB["AGENT_LAST_SEEN_RESOLUTION"]
    tick = now.timestamp()
    due = {
        (team.pk, event.source, event.agent_external_id)
        for event in events
        if event.agent_external_id
        and tick - _agents_seen.get((team.pk, event.source, event.agent_external_id), 0.0)
        >= resolution.total_seconds()
    }
    if not due:
        return
    match = Q()
    for _, source, external_id in due:
        match |= Q(source=source, external_id=external_id)
    Agent.objects.filter(match, team=team).filter(
        Q(last_seen_at__isnull=True) | Q(last_seen_at__lt=now - resolution)
    ).update(last_seen_at=now)
    if len(_agents_seen) > _AGENTS_SEEN_MAX:
        _agents_seen.clear()
    for key in due:
        _agents_seen[key] = tick


def sessions_resolve(
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

    found = sessions_locked(team, list(wanted))
    _sessions_roll_over(team, events, found)
    missing = [key for key in wanted if key not in found]
    if missing:
        agents = _agents_resolve(team, [wanted[key] for key in missing], timezone.now())
        Session.objects.bulk_create(
            [_new_session(team, wanted[key], agents) for key in missing], ignore_conflicts=True
        )
        found.update(sessions_locked(team, missing))
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
        developer=event.developer[:200],
        redaction_version=RULES_VERSION,
    )


def _fill_blanks(session: Session, events: Iterable[NormalizedEvent]) -> None:
    """Details a later event knows and the first one did not (OpenClaw sends them piecemeal)."""
    # A session's events mostly repeat the same details: filling from the same ones again
    # changes nothing (what was blank and given is set, a set field stays), so each set
    # of details is looked at once.
    seen: set[tuple[str, ...]] = set()
    for event in events:
        details = (event.session_key, event.channel, event.cwd, event.project, event.developer)
        if details in seen:
            continue
        seen.add(details)
        for name, value, limit in (
            ("session_key", event.session_key, 300),
            ("channel", event.channel, 100),
            ("cwd", event.cwd, 1000),
            ("project", event.project, 500),
            ("developer", event.developer, 200),
        ):
            if value and not getattr(session, name):
                setattr(session, name, value[:limit])


def sessions_by_key(
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
            with_key.filter(status__in=OPEN_STATUSES).order_by("-last_event_at").first()
            or with_key.order_by("-last_event_at").first()
        )
    return resolved


def session_of(
    event: NormalizedEvent,
    sessions: dict[tuple[str, str], Session],
    by_key: dict[tuple[str, str], Session | None],
) -> Session | None:
    if event.session_external_id:
        return sessions[(event.source, event.session_external_id)]
    return by_key.get((event.source, event.session_key))
