"""How sessions follow one another (a resume, a /clear, a reset): read what the rules in
``chain_rules`` need, let them decide, write what they decided.

The same few statements whatever the number of sessions in the batch: one UPDATE of the
stored sessions that follow one of the batch's (the claims), one read of the sessions
the rules look at, one locking read of the open sessions the starts may replace, and,
only when a later start of the batch could tell, one read of the events of the sessions
a start may close. Then ``session_close`` for each session the rules close; the links
go out with the batch's sessions, written by the caller.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Case, Exists, OuterRef, Q, Value, When

from sessionhub.models import Team

from .. import state
from ..models import OPEN_STATUSES, EndReason, EventKind, LifecycleEvent, Session
from .chain_rules import (
    Arrival,
    Claim,
    Closing,
    Decisions,
    Known,
    Step,
    claims_of,
    decide,
    ended_by_replacement,
)
from .fold import session_close

_STARTS = (EventKind.SESSION_START, EventKind.SESSION_RESUME)
# The id of the end SessionHub stores when a start replaces a session (then the session's id).
_REPLACED = "sessionhub:replaced:"
_REPLACED_FACTS = {"reason": EndReason.REPLACED}
_NEWEST = 2**63  # an end stored now has the newest row id of its session's log


def sessions_link(
    team: Team, written: dict[Any, Session], new_by_session: dict[Any, list[state.FoldEvent]]
) -> None:
    """Link the batch's sessions into their chains and close the sessions their starts
    replace. ``written``: the batch's sessions as their new events left them (the caller
    writes them afterwards); ``new_by_session``: those events, in the order the sessions
    are taken."""
    batch = [_arrival(written[pk], events) for pk, events in new_by_session.items()]
    claims = claims_of(batch)
    starting = [a for a in batch if any(step.starts for step in a.steps)]
    # Sessions that name where they come from: their starts, or a later event that does
    # (a forked transcript is written at its first turn, after its start).
    naming = [a for a in batch if any(step.starts or step.resumed_from for step in a.steps)]
    if not naming and not claims:
        return
    _claims_write(team, written, list(claims.values()))
    stored = _candidates_read(team, written, naming)
    siblings = _open_siblings_lock(starting)
    decisions = decide(
        batch,
        stored,
        [_known(s) for s in siblings],
        window=settings.SESSIONHUB["CLEAR_LINK_WINDOW"],
        nulls_first=connection.features.nulls_order_largest,
        close=_closing(team, written, siblings, starting),
    )
    _apply(decisions, written, {s.pk: s for s in siblings})


def _arrival(session: Session, events: Iterable[state.FoldEvent]) -> Arrival:
    """A session of the batch and its steps: its starts, its ends naming a successor."""
    steps = []
    for event in events:
        if event.kind in _STARTS:
            steps.append(
                Step(
                    at=event.occurred_at,
                    starts=True,
                    resumed_from=event.facts.get("resumed_from") or "",
                    follows_cleared=bool(event.facts.get("follows_cleared")),
                )
            )
        elif event.kind == EventKind.SESSION_END and event.facts.get("next_session_id"):
            successor = event.facts["next_session_id"]
            steps.append(Step(at=event.occurred_at, starts=False, next_session_id=successor))
        elif event.facts.get("resumed_from"):
            steps.append(
                Step(at=event.occurred_at, starts=False, resumed_from=event.facts["resumed_from"])
            )
    return Arrival(_known(session), tuple(steps))


def _known(session: Session, *, followed: bool = False) -> Known:
    return Known(
        pk=session.pk,
        source=session.source,
        external_id=session.external_id,
        agent_id=session.agent_id,
        session_key=session.session_key,
        is_open=session.is_open,
        started_at=session.started_at,
        ended_at=session.ended_at,
        end_reason=session.end_reason,
        previous=session.previous_session_id,
        previous_external_id=session.previous_external_id,
        successor_external_id=session.successor_external_id,
        last_event_at=session.last_event_at,
        followed=followed,
    )


def _claim_q(claim: Claim) -> Q:
    return Q(source=claim.source, **{claim.field: claim.value})


def _claims_write(team: Team, written: dict[Any, Session], claims: list[Claim]) -> None:
    """Stored sessions outside the batch that follow nothing take the first claim that
    fits them, in one UPDATE (the batch's own sessions take theirs from the rules)."""
    if not claims:
        return
    match = Q()
    for claim in claims:
        match |= _claim_q(claim)
    Session.objects.filter(match, team=team, previous_session__isnull=True).exclude(
        pk__in=list(written)
    ).update(previous_session=Case(*(When(_claim_q(c), then=Value(c.by)) for c in claims)))


def _candidates_read(
    team: Team, written: dict[Any, Session], starting: list[Arrival]
) -> dict[Any, Known]:
    """In one read, as stored: the batch's sessions, the sessions the starting (or naming)
    ones may follow (those they name, those naming one of them as successor) and the
    sessions a /clear start may follow; each with whether a session follows it. Nothing
    when every one of them already follows one."""
    window = settings.SESSIONHUB["CLEAR_LINK_WINDOW"]
    query = Q()
    for arrival in starting:
        session = arrival.session
        if session.previous is not None:
            continue
        named = {session.previous_external_id}
        named.update(step.resumed_from for step in arrival.steps)
        named.discard("")
        query |= Q(source=session.source, successor_external_id=session.external_id)
        if named:
            query |= Q(source=session.source, external_id__in=named)
        if session.started_at is not None and any(s.follows_cleared for s in arrival.steps):
            query |= Q(
                agent_id=session.agent_id,
                end_reason=EndReason.CLEAR,
                ended_at__gte=session.started_at - window,
                ended_at__lte=session.started_at + window,
            )
    if not query:
        return {}
    rows = Session.objects.filter(query | Q(pk__in=list(written)), team=team).annotate(
        followed=Exists(Session.objects.filter(previous_session=OuterRef("pk")))
    )
    return {s.pk: _known(s, followed=s.followed) for s in rows}


def _open_siblings_lock(starting: list[Arrival]) -> list[Session]:
    """The open sessions a start may replace (same agent and key, started before it),
    for every start of the batch in one locking read."""
    latest: dict[tuple[Any, str], datetime] = {}
    for arrival in starting:
        session = arrival.session
        if session.session_key:
            pair = (session.agent_id, session.session_key)
            at = max(step.at for step in arrival.steps if step.starts)
            latest[pair] = max(latest.get(pair, at), at)
    if not latest:
        return []
    query = Q()
    for (agent_id, key), at in latest.items():
        query |= Q(agent_id=agent_id, session_key=key, started_at__lt=at)
    return list(
        Session.objects.select_for_update().filter(query, status__in=OPEN_STATUSES).order_by("pk")
    )


def _closing(
    team: Team, written: dict[Any, Session], siblings: list[Session], starting: list[Arrival]
) -> Closing:
    """What closing a session leaves, as ``session_close`` will leave it: nothing when its
    replaced end is stored already; its log refolded when the end lands before its last
    event. Only a later start of the batch can see the difference (one of the same agent
    and key, or a /clear start), so the logs are read, in one read, only then."""
    keyed = Counter(
        (a.session.agent_id, a.session.session_key)
        for a in starting
        for step in a.steps
        if step.starts and a.session.session_key
    )
    closable = {s.pk for s in siblings} | {
        pk for pk, s in written.items() if (s.agent_id, s.session_key) in keyed
    }
    cleared = any(step.follows_cleared for a in starting for step in a.steps)
    if not closable or not (cleared or any(n > 1 for n in keyed.values())):
        return ended_by_replacement
    ids = {f"{_REPLACED}{pk}": pk for pk in closable}
    rows = list(
        LifecycleEvent.objects.filter(
            Q(session_id__in=list(closable)) | Q(team=team, event_id__in=list(ids))
        ).values_list("session_id", "event_id", "kind", "occurred_at", "phase", "facts", "id")
    )
    replaced = {ids[event_id] for _, event_id, *_ in rows if event_id in ids}
    logs: dict[Any, list[state.FoldEvent]] = defaultdict(list)
    for session_id, _, kind, at, phase, facts, order in rows:
        logs[session_id].append(state.FoldEvent(kind, at, phase, facts or {}, order))

    def close(session: Known, at: datetime) -> Known:
        if session.pk in replaced:
            return session
        if session.last_event_at is None or at >= session.last_event_at:
            return ended_by_replacement(session, at)
        # The end is the newest row of the log: it comes last among events of its time.
        end = state.FoldEvent(EventKind.SESSION_END, at, facts=_REPLACED_FACTS, order=_NEWEST)
        folded = Session()
        state.fold(folded, [*logs[session.pk], end])
        return replace(
            session,
            is_open=folded.is_open,
            started_at=folded.started_at,
            ended_at=folded.ended_at,
            end_reason=folded.end_reason,
            last_event_at=folded.last_event_at,
        )

    return close


def _apply(decisions: Decisions, written: dict[Any, Session], siblings: dict[Any, Session]) -> None:
    """Write what the rules decided: the links in memory (the caller writes the batch's
    sessions), the closes at once, in order."""
    for pk, name in decisions.resumed_from.items():
        written[pk].previous_external_id = name
    for pk, previous in decisions.links.items():
        written[pk].previous_session_id = previous
    for close in decisions.closes:
        session = written[close.pk] if close.pk in written else siblings[close.pk]
        session_close(
            session=session,
            reason=EndReason.REPLACED,
            at=close.at,
            event_id=f"{_REPLACED}{close.pk}",
            facts={"replaced_by": str(close.replaced_by)},
        )
