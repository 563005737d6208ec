"""OpenClaw: ``{"hook", "event", "ctx", "ts"}`` as the forwarding plugin posts each hook.

A ``session_end`` whose reason is ``shutdown`` or ``restart`` means the gateway stopped
and the session may come back: it is a suspend. ``agent_end`` can carry the whole
conversation; only what memory needs is kept (final text, reasoning, counts).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from lifecycle.models import EventKind, Source
from memory.tails import reasoning_and_final, reasoning_from_text

from .base import (
    EventInvalid,
    NormalizedEvent,
    as_key,
    derive_event_id,
    end_reason,
    event_identifier,
    identifier,
    opt_count,
    opt_str,
    parse_epoch_ms,
    require_dict,
    shown,
)

SUSPEND_REASONS = {"shutdown", "restart"}

_KINDS: dict[str, tuple[str, str]] = {
    "session_start": (EventKind.SESSION_START, ""),
    "session_resume": (EventKind.SESSION_RESUME, ""),
    "session_suspend": (EventKind.SESSION_SUSPEND, ""),
    "session_end": (EventKind.SESSION_END, ""),
    "before_compaction": (EventKind.COMPACTION_BEFORE, ""),
    "after_compaction": (EventKind.COMPACTION_AFTER, ""),
    "message_received": (EventKind.PROMPT, ""),
    "before_tool_call": (EventKind.TOOL_USE, "pre"),
    "after_tool_call": (EventKind.TOOL_USE, "post"),
    "agent_end": (EventKind.TURN_END, ""),
    # Fires just before agent_end on newer gateways: a turn end too, but only agent_end
    # counts as the turn.
    "before_agent_finalize": (EventKind.TURN_END, "final"),
}


def agent_from_session_key(key: str) -> str:
    """``agent:main:discord:...`` or ``main:discord:...`` → ``main``."""
    parts = key.split(":")
    if len(parts) >= 2 and parts[0] == "agent":
        return parts[1]
    return parts[0] if parts and parts[0] else ""


def _kind_of(hook: str) -> tuple[str, str]:
    if hook in _KINDS:
        return _KINDS[hook]
    if hook == "command" or hook.startswith("command:"):
        return EventKind.COMMAND, ""
    return EventKind.OTHER, ""


def _compact_agent_end(event: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(facts, stored payload) for an ``agent_end``: no whole histories in the log."""
    messages = event.get("messages")
    messages = messages if isinstance(messages, list) else []
    reasoning, final = reasoning_and_final(messages)
    roles: dict[str, int] = {}
    for message in messages:
        if isinstance(message, dict) and isinstance(message.get("role"), str):
            roles[message["role"]] = roles.get(message["role"], 0) + 1
    facts = {
        "final_message": final,
        "reasoning": reasoning,
        "messages_in_turn": len(messages),
        "success": event.get("success") if isinstance(event.get("success"), bool) else None,
    }
    error = event.get("error")
    if isinstance(error, str) and error:
        facts["error"] = error
    kept = {k: v for k, v in event.items() if k != "messages"}
    kept["messages"] = {"count": len(messages), "by_role": roles}
    return facts, kept


def adapt(body: Any, *, now: datetime) -> NormalizedEvent:
    """Validate and map one OpenClaw hook call."""
    body = require_dict(body, "$")
    hook = opt_str(body, "hook", "hook", max_length=100)
    if not hook:
        raise EventInvalid("hook", "is required", "required")
    event = require_dict(body.get("event"), "event", optional=True)
    ctx = require_dict(body.get("ctx"), "ctx", optional=True)
    occurred_at = parse_epoch_ms(body["ts"], "ts", now) if body.get("ts") is not None else now

    raw_id = body.get("eventId", body.get("event_id"))
    event_id = as_key(
        event_identifier(raw_id, "eventId")
        if raw_id is not None
        else derive_event_id(
            Source.OPENCLAW, {k: body.get(k) for k in ("hook", "event", "ctx", "ts")}
        )
    )

    session_id = identifier(
        ctx.get("sessionId") or event.get("sessionId"), "ctx.sessionId", required=False
    )
    session_key = opt_str(ctx, "sessionKey", "ctx.sessionKey", max_length=300) or opt_str(
        event, "sessionKey", "event.sessionKey", max_length=300
    )
    if not session_key:
        session_key = opt_str(ctx, "conversationId", "ctx.conversationId", max_length=300)
    agent_id = identifier(ctx.get("agentId"), "ctx.agentId", required=False)
    agent_id = agent_id or agent_from_session_key(session_key)
    if not session_id and not session_key:
        raise EventInvalid("ctx.sessionId", "a session id or session key is required", "required")
    if not agent_id:
        raise EventInvalid("ctx.agentId", "an agent id or session key is required", "required")

    kind, phase = _kind_of(hook)
    facts: dict[str, Any] = {}
    payload_event = event
    if hook == "session_start":
        resumed_from = identifier(event.get("resumedFrom"), "event.resumedFrom", required=False)
        if resumed_from:
            facts["resumed_from"] = as_key(resumed_from)
    elif hook in ("session_end", "session_suspend"):
        raw_reason = opt_str(event, "reason", "event.reason", max_length=100)
        if hook == "session_suspend" or raw_reason in SUSPEND_REASONS:
            kind = EventKind.SESSION_SUSPEND
            facts["reason"] = raw_reason or "suspend"
        else:
            facts["reason"] = end_reason(raw_reason)
            facts["reason_detail"] = raw_reason
            next_id = identifier(event.get("nextSessionId"), "event.nextSessionId", required=False)
            if next_id:
                facts["next_session_id"] = as_key(next_id)
        count = opt_count(event.get("messageCount"), "event.messageCount")
        if count is not None:
            facts["message_count"] = count
    elif hook in ("before_compaction", "after_compaction"):
        tokens = opt_count(event.get("tokenCount"), "event.tokenCount")
        if tokens is not None:
            facts["token_count"] = tokens
    elif hook == "message_received":
        content = event.get("content")
        facts["text"] = content if isinstance(content, str) else ""
    elif hook in ("before_tool_call", "after_tool_call"):
        facts["tool_name"] = opt_str(event, "toolName", "event.toolName", max_length=200)
        facts["failed"] = bool(event.get("error"))
    elif hook == "agent_end":
        facts, payload_event = _compact_agent_end(event)
    elif hook == "before_agent_finalize":
        text = opt_str(
            event, "lastAssistantMessage", "event.lastAssistantMessage", max_length=10**6
        )
        reasoning, visible = reasoning_from_text(text)
        facts = {"final_message": visible, "reasoning": reasoning}

    channel = opt_str(ctx, "channelId", "ctx.channelId", max_length=100) or opt_str(
        ctx, "messageProvider", "ctx.messageProvider", max_length=100
    )
    workspace = opt_str(ctx, "workspaceDir", "ctx.workspaceDir")
    payload = {"event": payload_event, "ctx": ctx}
    return NormalizedEvent(
        event_id=event_id,
        kind=kind,
        source=Source.OPENCLAW,
        occurred_at=occurred_at,
        agent_external_id=as_key(agent_id, limit=300),
        agent_name=shown(agent_id),
        session_external_id=as_key(session_id),
        session_key=as_key(session_key, limit=300),
        hook=as_key(hook, limit=100),
        phase=phase,
        channel=channel,
        cwd=workspace,
        project=workspace,
        facts=facts,
        payload=payload,
    )
