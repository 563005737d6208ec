"""The generic API: events already in SessionHub's canonical shape.

``{"event_id", "kind", "occurred_at", "agent_id", "session_id", ...}``; see the OpenAPI
schema for every field. Any gateway without its own adapter posts these.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from lifecycle.models import EventKind, Source
from sessionhub.text.tails import reasoning_from_text

from .base import (
    EventInvalid,
    KeyPath,
    NormalizedEvent,
    as_key,
    end_reason,
    event_identifier,
    first_present,
    identifier,
    normalize_git_remote,
    opt_count,
    opt_str,
    parse_iso_time,
    require_dict,
    shown,
    usage_facts,
)

KNOWN_FIELDS = {
    "event_id",
    "kind",
    "occurred_at",
    "source",
    "agent_id",
    "agent_name",
    "session_id",
    "session_key",
    "channel",
    "cwd",
    "project",
    "git_remote",
    "model",
    "reason",
    "previous_session_id",
    "next_session_id",
    "text",
    "final_message",
    "reasoning",
    "tool_name",
    "phase",
    "message_count",
    "token_count",
    "usage",
    "developer",
    "payload",
}
_SOURCES = {Source.GENERIC, Source.CLAUDE_CODE, Source.OPENCLAW, Source.CODEX, Source.GEMINI_CLI}
_FACT_LENGTHS = {"text": 10**6, "tool_name": 200, "model": 200}


# Where a stored tool call's input lies (``first_present``): "input", else "params".
TOOL_INPUT: tuple[KeyPath, ...] = (("input",), ("params",))


def tool_io(payload: dict[str, Any]) -> tuple[Any, Any]:
    """A tool call's input and output in a canonical event's free-form payload."""
    return first_present(payload, TOOL_INPUT), payload.get("output", payload.get("result"))


def adapt(body: Any, *, now: datetime) -> NormalizedEvent:
    """Validate one canonical event."""
    body = require_dict(body, "$")
    unknown = sorted(set(body) - KNOWN_FIELDS)
    if unknown:
        raise EventInvalid(unknown[0], "is not a known field", "unknown_field")
    event_id = as_key(event_identifier(body.get("event_id")))
    kind = opt_str(body, "kind", "kind", max_length=40)
    if kind not in EventKind.values:
        raise EventInvalid(
            "kind", f"must be one of {', '.join(EventKind.values)}", "invalid_choice"
        )
    source = opt_str(body, "source", "source", max_length=20) or Source.GENERIC
    if source not in _SOURCES:
        raise EventInvalid(
            "source",
            "must be generic, claude-code, openclaw, codex or gemini-cli",
            "invalid_choice",
        )
    occurred_at = (
        parse_iso_time(body["occurred_at"], "occurred_at", now)
        if body.get("occurred_at") is not None
        else now
    )
    agent_id = identifier(body.get("agent_id"), "agent_id")
    session_id = identifier(body.get("session_id"), "session_id")
    phase = opt_str(body, "phase", "phase", max_length=8)
    if phase not in ("", "pre", "post", "final"):
        raise EventInvalid("phase", "must be pre, post or final", "invalid_choice")
    payload = require_dict(body.get("payload"), "payload", optional=True)
    # Shown strings only: the project is redacted whole before a remote is normalised.
    project = normalize_git_remote(shown(opt_str(body, "git_remote", "git_remote"))) or opt_str(
        body, "project", "project", max_length=500
    )
    cwd = opt_str(body, "cwd", "cwd")

    facts = _facts(body, kind, source)
    return NormalizedEvent(
        event_id=event_id,
        kind=kind,
        source=source,
        occurred_at=occurred_at,
        agent_external_id=as_key(agent_id, limit=300),
        agent_name=opt_str(body, "agent_name", "agent_name", max_length=300) or shown(agent_id),
        session_external_id=as_key(session_id),
        session_key=as_key(opt_str(body, "session_key", "session_key", max_length=300), limit=300),
        hook="",
        phase=phase,
        channel=opt_str(body, "channel", "channel", max_length=100),
        cwd=cwd,
        project=project or cwd,
        developer=opt_str(body, "developer", "developer", max_length=200),
        facts=facts,
        payload=payload,
    )


def _facts(body: dict[str, Any], kind: str, source: str) -> dict[str, Any]:
    """The event's facts from its known fields (a field of the wrong type is refused)."""
    facts: dict[str, Any] = {}
    reason = opt_str(body, "reason", "reason", max_length=100)
    if kind == EventKind.SESSION_END:
        facts["reason"] = end_reason(reason)
        facts["reason_detail"] = reason
    elif kind == EventKind.SESSION_SUSPEND:
        facts["reason"] = reason or "suspend"
    for key in ("previous_session_id", "next_session_id"):
        value = identifier(body.get(key), key, required=False)
        if value:
            facts["resumed_from" if key == "previous_session_id" else key] = as_key(value)
    for key in ("message_count", "token_count"):
        count = opt_count(body.get(key), key)
        if count is not None:
            facts[key] = count
    for key in ("text", "tool_name", "model"):
        value = opt_str(body, key, key, max_length=_FACT_LENGTHS[key])
        if value:
            facts[key] = value
    # Checked whatever the kind: a known field of the wrong type is refused, not dropped.
    final_message = opt_str(body, "final_message", "final_message", max_length=10**6)
    reasoning = opt_str(body, "reasoning", "reasoning", max_length=10**6)
    if kind == EventKind.TURN_END:
        usage = usage_facts(body.get("usage"))
        if usage is not None:
            facts["usage"] = usage
        tagged, visible = reasoning_from_text(final_message)
        facts["final_message"] = visible
        facts["reasoning"] = reasoning or tagged
        if source == Source.CLAUDE_CODE:
            # An event that says it is Claude Code's follows Claude Code's rule: a turn's
            # end is where its memory is distilled.
            facts["summarize"] = True
    return facts
