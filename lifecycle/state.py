"""The session state machine, as a fold over the session's events in occurred-at order.

``start → (suspend → resume)* → end``. The fold is the single definition of a session's
state: ingestion applies new events to the stored state when they come after everything
seen so far, and refolds the whole log when a late event lands in the past. Both give
the same result because the fold only ever looks at events in order.

Rules: the first start (or resume) starts the session; a later start is a resume; an end
ends it; every event is counted. A resume stamped after the end reopens the session
(``claude --resume`` / ``--continue`` keep the session id): it is active again, the time
between the end and the resume counts like a suspension, and the next end moves
``ended_at``. Any other event that lands after the end, or a start stamped before it,
reopens nothing. A session's first event starts it, whatever its kind (a gateway may send
no start at all). A prompt, tool use or turn on a suspended session resumes it (a gateway
may send no resume after a restart). A session is a background one while every run that
said what set it off was a background run (a heartbeat); one run of the user's makes it
the user's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Field

from .models import USER_TRIGGER, EndReason, EventKind, Session, SessionStatus

FOLD_FIELDS = (
    "status",
    "started_at",
    "ended_at",
    "suspended_at",
    "first_event_at",
    "last_event_at",
    "end_reason",
    "end_detail",
    "recovered",
    "has_start",
    "in_compaction",
    "suspend_count",
    "suspended_seconds",
    "event_count",
    "prompt_count",
    "turn_count",
    "tool_use_count",
    "compaction_count",
    "reported_message_count",
    "token_count",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "model",
    "trigger",
)
# A turn's usage fact (``adapters.base.usage_facts``) → the session's sums.
USAGE_COLUMNS = (
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("cache_read", "cache_read_tokens"),
    ("cache_write", "cache_write_tokens"),
)

_STARTS = {EventKind.SESSION_START, EventKind.SESSION_RESUME}
_COMPACTIONS = {EventKind.COMPACTION_BEFORE, EventKind.COMPACTION_AFTER}
# Events that may land inside a compaction without ending it: a tool use, notification or
# other hook of the turn before, sent by an asynchronous hook and stamped late. Anything
# else (a prompt, a turn's end, a start or end) means the compaction is over, so a later
# "after" is another compaction.
_DURING_COMPACTION = _COMPACTIONS | {EventKind.TOOL_USE, EventKind.NOTIFICATION, EventKind.OTHER}
# The agent at work: on a suspended session, proof that it is back.
_ACTIVITY = {EventKind.PROMPT, EventKind.TOOL_USE, EventKind.TURN_END}


@dataclass(frozen=True, slots=True)
class FoldEvent:
    """What the fold needs of one event."""

    kind: str
    occurred_at: datetime
    phase: str = ""
    facts: dict[str, Any] = field(default_factory=dict)
    order: int = 0


def reset(session: Session) -> None:
    """Back to the state before any event."""
    for name in FOLD_FIELDS:
        field = Session._meta.get_field(name)
        assert isinstance(field, Field)  # FOLD_FIELDS are concrete columns
        setattr(session, name, field.get_default())


def _wake(session: Session, at: datetime) -> None:
    """A suspended session is active again: the time it slept is counted."""
    if session.suspended_at is not None:
        session.suspended_seconds += max(0.0, (at - session.suspended_at).total_seconds())
    session.suspended_at = None
    session.status = SessionStatus.ACTIVE


def _end(session: Session, event: FoldEvent) -> None:
    if session.status == SessionStatus.SUSPENDED and session.suspended_at is not None:
        # It slept until it ended.
        session.suspended_seconds += (event.occurred_at - session.suspended_at).total_seconds()
    session.suspended_at = None
    reason = event.facts.get("reason") or EndReason.UNKNOWN
    session.end_reason = reason
    session.end_detail = str(event.facts.get("reason_detail") or "")[:100]
    session.ended_at = event.occurred_at
    session.recovered = reason == EndReason.CRASHED
    session.status = SessionStatus.CRASHED if session.recovered else SessionStatus.ENDED


def _reopen(session: Session, at: datetime) -> bool:
    """A resume after the end: active again, the gap recorded as a suspension."""
    if session.ended_at is None or at <= session.ended_at:
        return False
    session.suspended_seconds += (at - session.ended_at).total_seconds()
    session.suspend_count += 1
    session.suspended_at = None
    session.ended_at = None
    session.end_reason = Session._meta.get_field("end_reason").get_default()
    session.end_detail = ""
    session.recovered = False
    session.status = SessionStatus.ACTIVE
    return True


def apply(session: Session, event: FoldEvent) -> None:
    """Apply one event, assumed to come after every event already applied."""
    _stamp(session, event)
    _count(session, event)
    _transition(session, event)


def _stamp(session: Session, event: FoldEvent) -> None:
    """The session's times, event count and what the event says of it (model, tokens...)."""
    at = event.occurred_at
    if session.first_event_at is None or at < session.first_event_at:
        session.first_event_at = at
    if session.last_event_at is None or at > session.last_event_at:
        session.last_event_at = at
    if session.started_at is None:
        session.started_at = at
    session.event_count += 1

    facts = event.facts
    if facts.get("model"):
        session.model = str(facts["model"])[:200]
    usage = facts.get("usage")
    if isinstance(usage, dict):
        for key, column in USAGE_COLUMNS:
            count = usage.get(key)
            if isinstance(count, int):
                setattr(session, column, getattr(session, column) + count)
        session.token_count = (
            session.input_tokens
            + session.output_tokens
            + session.cache_read_tokens
            + session.cache_write_tokens
        )
    if facts.get("token_count") is not None:
        session.token_count = facts["token_count"]
    if facts.get("message_count") is not None:
        session.reported_message_count = facts["message_count"]
    # What started the run (not Claude Code's compaction "trigger", a fact of its own).
    if facts.get("run_trigger") and session.trigger != USER_TRIGGER:
        session.trigger = str(facts["run_trigger"])[:40]


def _count(session: Session, event: FoldEvent) -> None:
    """Prompts, tool uses, turns and compactions."""
    kind = event.kind
    if kind not in _DURING_COMPACTION:
        session.in_compaction = False

    if kind == EventKind.PROMPT:
        session.prompt_count += 1
    elif kind == EventKind.TOOL_USE and event.phase != "pre":
        session.tool_use_count += 1
    elif kind == EventKind.TURN_END and event.phase != "final" and not event.facts.get("subagent"):
        # A subagent's end is its own, not a turn of the session.
        session.turn_count += 1
    elif kind == EventKind.COMPACTION_BEFORE:
        session.compaction_count += 1
        session.in_compaction = True
    elif kind == EventKind.COMPACTION_AFTER:
        # An "after" with no "before" still counts; several afters of one compaction
        # (PostCompact and SessionStart source=compact) count once.
        session.compaction_count += 0 if session.in_compaction else 1
        session.in_compaction = True


def _transition(session: Session, event: FoldEvent) -> None:
    """Active, suspended, ended: where the event moves the session."""
    kind, at = event.kind, event.occurred_at
    closed = session.status in (SessionStatus.ENDED, SessionStatus.CRASHED)
    if closed:
        if kind in _STARTS and session.has_start and _reopen(session, at):
            return
        if kind in _STARTS:
            # A start stamped after the end (a skewed clock) still is the session's start:
            # the next one must be stored as a resume. It reopens nothing.
            session.has_start = True
        return
    if kind in _STARTS:
        if not session.has_start:
            session.has_start = True
            session.started_at = at
        elif session.status == SessionStatus.SUSPENDED and session.suspended_at is not None:
            _wake(session, at)
    elif kind in _ACTIVITY and session.status == SessionStatus.SUSPENDED:
        _wake(session, at)
    elif kind == EventKind.SESSION_SUSPEND:
        if session.status == SessionStatus.ACTIVE:
            session.status = SessionStatus.SUSPENDED
            session.suspended_at = at
            session.suspend_count += 1
    elif kind == EventKind.SESSION_END:
        _end(session, event)


def fold(session: Session, events: list[FoldEvent]) -> None:
    """Recompute the session's state from its whole log."""
    reset(session)
    for event in sorted(events, key=lambda e: (e.occurred_at, e.order)):
        apply(session, event)
