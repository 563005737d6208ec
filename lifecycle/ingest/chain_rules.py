"""Which session follows which, and which sessions a new start replaces: a pure function
of the sessions a batch touches and the rows read for it (no database here).

The rule, in the order ingestion has always applied it. The batch's sessions are taken
one after the other, each with its starts and its ends that name a successor in time
order. Once a session has been taken (it is "settled"), the rules see it as the batch
left it; before that, they see it as it was stored.

- A start, in this order: a resume names the session it resumed from, if the session
  named none; a session that follows nothing yet follows the one it names (by external
  id, same source), else the latest started of those that name it as their successor;
  then its claim, its /clear link and its replacements, as below.
- Any other event that names the session it resumed from (a forked transcript is written
  at its first turn, so the client learns it after the start) does what a start does
  with that name: the session names it if it named none, and follows it if it follows
  nothing yet.
- A session's first start, when it followed nothing as the batch came in, claims the
  sessions of its source that name it as where they resumed from; an end that names a
  successor claims that successor. A claim links every settled session that fits it and
  follows nothing; stored sessions outside the batch that fit take the first claim that
  fits (``claims_of``: written before the rows the rules read are read); after the last
  start, a session of the batch that still follows nothing takes the first claim that
  fits it.
- A start that follows a /clear (``follows_cleared``), for a session that still follows
  nothing: it follows the session of the same agent that ended by /clear within the
  window around its start, the latest ended, among those nothing follows yet.
- A start of a session with a key closes, as replaced, every open session of the same
  agent and key started before it (taken in id order), and follows the first of them
  if it still follows nothing. What a close leaves of a session is ``close``'s answer
  (it may refold the session's log); a session closed once in the batch is not closed
  again, its end being stored already.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from ..models import EndReason


@dataclass(frozen=True, slots=True)
class Known:
    """A session as the rules see it. ``previous`` is the id of the session it follows;
    ``followed`` says whether a stored session followed it when it was read."""

    pk: Any
    source: str
    external_id: str
    agent_id: Any = None
    session_key: str = ""
    is_open: bool = True
    started_at: datetime | None = None
    ended_at: datetime | None = None
    end_reason: str = ""
    previous: Any = None
    previous_external_id: str = ""
    successor_external_id: str = ""
    last_event_at: datetime | None = None
    followed: bool = False


@dataclass(frozen=True, slots=True)
class Step:
    """One event of the batch that can link sessions: a start (with what it says of where
    it comes from), another event that names where the session comes from, or an end that
    names the session that continues it."""

    at: datetime
    starts: bool
    resumed_from: str = ""
    follows_cleared: bool = False
    next_session_id: str = ""


@dataclass(frozen=True, slots=True)
class Arrival:
    """A session of the batch as its new events left it, and its steps in time order."""

    session: Known
    steps: tuple[Step, ...] = ()


@dataclass(frozen=True, slots=True)
class Claim:
    """Sessions of ``source`` whose ``field`` is ``value`` and that follow nothing follow
    ``by``."""

    by: Any
    source: str
    field: str
    value: str

    def fits(self, session: Known) -> bool:
        return (
            session.pk != self.by
            and session.source == self.source
            and getattr(session, self.field) == self.value
        )


@dataclass(frozen=True, slots=True)
class Close:
    """A session ended as replaced by a new start."""

    pk: Any
    at: datetime
    replaced_by: Any


def ended_by_replacement(session: Known, at: datetime) -> Known:
    """What closing a session as replaced at ``at`` leaves when nothing in its log comes
    after ``at``: an open session ends then, a closed one stays as it is."""
    if not session.is_open:
        return session
    return replace(session, is_open=False, end_reason=EndReason.REPLACED, ended_at=at)


Closing = Callable[[Known, datetime], Known]


@dataclass(frozen=True, slots=True)
class Decisions:
    """What to write: ``links`` (session of the batch → the session it now follows),
    ``resumed_from`` (session of the batch → the external id it now names as where it
    resumed from), and the sessions to close, in order."""

    links: dict[Any, Any] = field(default_factory=dict)
    resumed_from: dict[Any, str] = field(default_factory=dict)
    closes: tuple[Close, ...] = ()


def claims_of(batch: Sequence[Arrival]) -> dict[tuple[Any, int], Claim]:
    """The claims the batch makes, by (session, index of the step making it), in the
    order they are made: the first that fits a session is the one it takes."""
    claims: dict[tuple[Any, int], Claim] = {}
    for arrival in batch:
        session = arrival.session
        claiming = session.previous is None
        for index, step in enumerate(arrival.steps):
            if step.starts and claiming:
                claims[(session.pk, index)] = Claim(
                    session.pk, session.source, "previous_external_id", session.external_id
                )
                claiming = False
            elif not step.starts and step.next_session_id:
                claims[(session.pk, index)] = Claim(
                    session.pk, session.source, "external_id", step.next_session_id
                )
    return claims


def first_claim(claims: Iterable[Claim], session: Known) -> Claim | None:
    return next((c for c in claims if c.fits(session)), None)


def newest_first(sessions: Iterable[Known], key: str, *, nulls_first: bool) -> list[Known]:
    """By ``key``, latest first, an empty value first or last as the database orders it
    (``nulls_first`` on PostgreSQL); equal values keep their order."""
    sessions = list(sessions)
    present = [s for s in sessions if getattr(s, key) is not None]
    present.sort(key=lambda s: getattr(s, key), reverse=True)
    missing = [s for s in sessions if getattr(s, key) is None]
    return missing + present if nulls_first else present + missing


def decide(
    batch: Sequence[Arrival],
    stored: Mapping[Any, Known],
    siblings: Sequence[Known],
    *,
    window: timedelta,
    nulls_first: bool,
    close: Closing = ended_by_replacement,
) -> Decisions:
    """The links and closes the module's rule gives. ``batch`` in the order its sessions
    are taken; ``stored``: the rows read once the claims are written (the batch's
    sessions as stored, the sessions they may follow, the /clear candidates);
    ``siblings``: the open sessions the keyed starts may replace, as stored; ``close``:
    what closing a session as replaced at a time leaves of it (a close landing before the
    session's last event refolds its log, which only the caller has)."""
    chain = _Chain(batch, stored, siblings, window=window, nulls_first=nulls_first, close=close)
    for arrival in batch:
        pk = arrival.session.pk
        chain.settled.add(pk)
        for index, step in enumerate(arrival.steps):
            claim = chain.claims.get((pk, index))
            if step.starts:
                chain.start(pk, step, claim)
            elif step.resumed_from:
                chain.named(pk, step)
            else:
                chain.claim_settled(claim)
    chain.late_claims()
    return chain.decisions(batch)


class _Chain:
    """The working state of ``decide``: the batch's sessions as they stand so far."""

    def __init__(
        self,
        batch: Sequence[Arrival],
        stored: Mapping[Any, Known],
        siblings: Sequence[Known],
        *,
        window: timedelta,
        nulls_first: bool,
        close: Closing,
    ) -> None:
        self.now = {a.session.pk: a.session for a in batch}
        self.stored = stored
        self.siblings = {s.pk: s for s in siblings}
        self.window = window
        self.nulls_first = nulls_first
        self.close = close
        self.settled: set[Any] = set()
        self.closes: list[Close] = []
        self.claims = claims_of(batch)
        self.by_name = {(s.source, s.external_id): s.pk for s in stored.values()}
        self.followed = {pk for pk, s in stored.items() if s.followed}

    def link(self, pk: Any, previous: Any) -> None:
        self.now[pk] = replace(self.now[pk], previous=previous)

    def as_seen(self, rows: Iterable[Known]) -> list[Known]:
        """The rows as stored but the settled sessions, then those as they stand."""
        return [s for s in rows if s.pk not in self.settled] + [self.now[pk] for pk in self.settled]

    def start(self, pk: Any, step: Step, claim: Claim | None) -> None:
        if step.resumed_from and not self.now[pk].previous_external_id:
            self.now[pk] = replace(self.now[pk], previous_external_id=step.resumed_from)
        if self.now[pk].previous is None:
            self.link(pk, self.predecessor(self.now[pk]))
        self.claim_settled(claim)
        if step.follows_cleared:
            self.link_cleared(self.now[pk])
        if self.now[pk].session_key:
            self.replace_open(self.now[pk], step.at)

    def named(self, pk: Any, step: Step) -> None:
        """A later event names the session this one continues: as a start would."""
        if not self.now[pk].previous_external_id:
            self.now[pk] = replace(self.now[pk], previous_external_id=step.resumed_from)
        if self.now[pk].previous is None:
            self.link(pk, self.predecessor(self.now[pk]))

    def claim_settled(self, claim: Claim | None) -> None:
        """A claim as it is made links the settled sessions it fits."""
        if claim is None:
            return
        for pk in self.settled:
            if self.now[pk].previous is None and claim.fits(self.now[pk]):
                self.link(pk, claim.by)

    def predecessor(self, session: Known) -> Any:
        """The one it resumed from, else the latest started that names it as successor."""
        named = self.by_name.get((session.source, session.previous_external_id))
        if session.previous_external_id and named is not None and named != session.pk:
            return named
        naming = (
            s
            for s in self.as_seen(self.stored.values())
            if s.source == session.source
            and s.successor_external_id == session.external_id
            and s.pk != session.pk
        )
        found = newest_first(naming, "started_at", nulls_first=self.nulls_first)
        return found[0].pk if found else None

    def link_cleared(self, session: Known) -> None:
        """Follow the session of the agent just ended by /clear that nothing follows."""
        if session.previous is not None or session.started_at is None:
            return
        earliest = session.started_at - self.window
        latest = session.started_at + self.window
        followed = self.followed | {self.now[pk].previous for pk in self.settled}
        # As the database lists them (latest started first), then by end.
        rows = [self.stored[pk] for pk in self.stored if pk not in followed]
        ordered = newest_first(rows, "started_at", nulls_first=self.nulls_first)
        cleared = (
            s
            for s in (self.now[r.pk] if r.pk in self.settled else r for r in ordered)
            if s.pk != session.pk
            and s.agent_id == session.agent_id
            and s.end_reason == EndReason.CLEAR
            and s.ended_at is not None
            and earliest <= s.ended_at <= latest
        )
        found = newest_first(cleared, "ended_at", nulls_first=self.nulls_first)
        if found:
            self.link(session.pk, found[0].pk)

    def replace_open(self, session: Known, at: datetime) -> None:
        """Close the open sessions of the same agent and key started before ``at``."""
        replaced = sorted(
            (
                s
                for s in self.as_seen(self.siblings.values())
                if s.pk != session.pk
                and s.agent_id == session.agent_id
                and s.session_key == session.session_key
                and s.is_open
                and s.started_at is not None
                and s.started_at < at
            ),
            key=lambda s: s.pk,
        )
        for old in replaced:
            if old.pk in self.now:
                self.settled.add(old.pk)
            # Closed once here, its end is stored: closing it again does nothing.
            if all(c.pk != old.pk for c in self.closes):
                if old.pk in self.now:
                    self.now[old.pk] = self.close(self.now[old.pk], at)
                else:
                    self.siblings[old.pk] = self.close(old, at)
                self.closes.append(Close(old.pk, at, session.pk))
            if self.now[session.pk].previous is None:
                self.link(session.pk, old.pk)

    def late_claims(self) -> None:
        """A session settled after a claim that fits it takes the first such claim."""
        for pk, session in self.now.items():
            if session.previous is None:
                claim = first_claim(self.claims.values(), session)
                if claim is not None:
                    self.link(pk, claim.by)

    def decisions(self, batch: Sequence[Arrival]) -> Decisions:
        before = {a.session.pk: a.session for a in batch}
        return Decisions(
            links={
                pk: s.previous for pk, s in self.now.items() if s.previous != before[pk].previous
            },
            resumed_from={
                pk: s.previous_external_id
                for pk, s in self.now.items()
                if s.previous_external_id != before[pk].previous_external_id
            },
            closes=tuple(self.closes),
        )
