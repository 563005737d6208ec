"""How sessions follow one another (a resume, a /clear, a reset), and folding a session's
events into its state."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Case, Q, Value, When

from sessionhub.models import Team

from .. import state
from ..models import EndReason, EventKind, Session, SessionStatus
from ..selectors import newest_first
from .fold import session_close

logger = logging.getLogger(__name__)

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
