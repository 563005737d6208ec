"""OpenClaw: ``{"hook", "event", "ctx", "ts"}`` as the forwarding plugin posts each hook.

A ``session_end`` whose reason is ``shutdown`` or ``restart`` means the gateway stopped
and the session may come back: it is a suspend. ``agent_end`` can carry the whole
conversation; only what memory needs is kept (final text, reasoning, counts), and only
of the turn itself: OpenClaw hands over the session's whole history, so the turn is what
follows its last user message.

What OpenClaw 2026.9 does that SessionHub's model does not, said here as plain facts:

- ``/new`` and ``/reset`` reset in place: the gateway keeps the session id and sends
  ``session_end {nextSessionId: <same id>}`` then ``session_start {resumedFrom: <same
  id>}``. That start carries ``opens_new_session``: a new session whatever the id.
- A run carries ``ctx.trigger`` (``user``, ``heartbeat``, ``cron``...): the fact
  ``run_trigger`` tells the user's own runs from background ones.
- ``agentId`` is ``main`` on every install: the agent is the gateway (the token's
  gateway name, plus the instance id the plugin sends) and the agent id.
- The user's words on the agent/CLI path come from ``before_prompt_build`` (the plugin
  forwards its prompt); ``message_received`` fires for channel messages only.
- ``session_end.messageCount`` is 0 when the gateway did not count: not a count.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from lifecycle.models import EventKind, Source
from sessionhub.text.tails import reasoning_and_final, reasoning_from_text

from .base import (
    EventInvalid,
    KeyPath,
    NormalizedEvent,
    as_key,
    derive_event_id,
    end_reason,
    event_identifier,
    first_present,
    identifier,
    opt_count,
    opt_str,
    parse_epoch_ms,
    require_dict,
    shown,
    usage_facts,
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
    "before_prompt_build": (EventKind.PROMPT, ""),
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


def _loose_str(container: dict[str, Any], key: str, limit: int) -> str:
    value = container.get(key)
    return value[:limit] if isinstance(value, str) else ""


def _kind_of(hook: str) -> tuple[str, str]:
    if hook in _KINDS:
        return _KINDS[hook]
    if hook == "command" or hook.startswith("command:"):
        return EventKind.COMMAND, ""
    return EventKind.OTHER, ""


def agent_identity(agent_id: str, gateway: str, instance: str) -> tuple[str, str]:
    """(external id, display name) of an OpenClaw agent: every install calls its default
    agent ``main``, so the gateway is part of the identity."""
    where = f"{gateway}/{instance}" if instance else gateway
    # Named as the agent is in OpenClaw: the gateway is who runs it (the session's
    # developer), shown beside the name only where two agents share it.
    return f"{where}:{agent_id}", agent_id


def turn_messages(messages: list[Any]) -> list[Any]:
    """The turn's own messages: from its last user message on (the whole list when the
    plugin already cut it there, or when there is no user message)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, dict) and message.get("role") == "user":
            return messages[index:]
    return messages


def _compact_agent_end(event: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(facts, stored payload) for an ``agent_end``: no whole histories in the log."""
    messages = event.get("messages")
    messages = turn_messages(messages if isinstance(messages, list) else [])
    reasoning, final = reasoning_and_final(messages)
    roles: dict[str, int] = {}
    for message in messages:
        if isinstance(message, dict) and isinstance(message.get("role"), str):
            roles[message["role"]] = roles.get(message["role"], 0) + 1
    told = event.get("turnMessageCount")  # the plugin sends the count when it cut the turn
    in_turn = told if isinstance(told, int) and not isinstance(told, bool) and told >= 0 else None
    facts = {
        "final_message": final,
        "reasoning": reasoning,
        "messages_in_turn": in_turn if in_turn is not None else len(messages),
        "success": event.get("success") if isinstance(event.get("success"), bool) else None,
    }
    # The plugin sums the whole turn's usage when it sends only its last messages.
    told_usage = event.get("turnUsage")
    usage = (
        turn_usage([{"role": "assistant", "usage": told_usage, "model": told_usage.get("model")}])
        if isinstance(told_usage, dict)
        else turn_usage(messages)
    )
    if usage is not None:
        facts["usage"] = usage
    error = event.get("error")
    if isinstance(error, str) and error:
        facts["error"] = error
    if facts["success"] is False or facts.get("error"):
        facts["failed"] = True  # the turn's outcome: memory.outcome reads it
    kept = {k: v for k, v in event.items() if k != "messages"}
    kept["messages"] = {"count": len(messages), "by_role": roles}
    return facts, kept


_PI_USAGE = (("input", "input"), ("output", "output"), ("cacheRead", "cache_read"))
_PI_USAGE_WRITE = ("cacheWrite", "cache_write")


def turn_usage(messages: list[Any]) -> dict[str, Any] | None:
    """The tokens of a turn's assistant messages (pi-ai's ``usage``: input, output,
    cacheRead, cacheWrite), summed, with the model of the last one."""
    total: dict[str, Any] = {}
    model = ""
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        usage = message.get("usage")
        if not isinstance(usage, dict):
            continue
        for key, name in (*_PI_USAGE, _PI_USAGE_WRITE):
            count = usage.get(key)
            if type(count) is int and count >= 0:
                total[name] = total.get(name, 0) + count
        if isinstance(message.get("model"), str):
            model = message["model"]
    if model:
        total["model"] = model
    return usage_facts(total)


# Where a stored tool call's input lies (``first_present``).
TOOL_INPUT: tuple[KeyPath, ...] = (("event", "params"),)


def tool_io(payload: dict[str, Any]) -> tuple[Any, Any]:
    """A tool call's parameters and result (or error) as the plugin forwards them."""
    inner = payload.get("event")
    if not isinstance(inner, dict):
        inner = {}
    return first_present(payload, TOOL_INPUT), inner.get("result", inner.get("error"))


def adapt(body: Any, *, now: datetime, gateway: str = "") -> NormalizedEvent:
    """Validate and map one OpenClaw hook call; ``gateway`` names the caller's token."""
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

    session_id, session_key, agent_external_id, agent_name = _whose(body, event, ctx, gateway)

    kind, phase = _kind_of(hook)
    kind, facts, payload_event = _hook_facts(hook, kind, event, session_id)
    # Context the gateway adds as it likes: a word of the wrong type is ignored, never a
    # reason to refuse the event.
    trigger = _loose_str(ctx, "trigger", 40)
    if trigger:
        facts["run_trigger"] = trigger
    model = _loose_str(ctx, "modelId", 200) or _loose_str(event, "modelId", 200)
    if model:
        facts["model"] = model

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
        agent_external_id=as_key(agent_external_id, limit=300),
        agent_name=shown(agent_name),
        session_external_id=as_key(session_id),
        session_key=as_key(session_key, limit=300),
        hook=as_key(hook, limit=100),
        phase=phase,
        channel=channel,
        cwd=workspace,
        project=workspace,
        developer=_developer(body, gateway),
        facts=facts,
        payload=payload,
    )


_UUID_SHAPED = re.compile(
    r"\A[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z"
)


def _developer(body: dict[str, Any], gateway: str) -> str:
    """Who runs the agent: the gateway instance's name when it was given one (an id the
    plugin made up says nothing of a person), else the token's gateway label."""
    instance = body.get("gateway")
    if isinstance(instance, str) and instance.strip() and not _UUID_SHAPED.match(instance):
        return shown(instance.strip())[:200]
    return shown(gateway)[:200]


def _whose(
    body: dict[str, Any], event: dict[str, Any], ctx: dict[str, Any], gateway: str
) -> tuple[str, str, str, str]:
    """(session id, session key, agent external id, agent name) of a hook call."""
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
    instance = identifier(body.get("gateway"), "gateway", required=False)
    agent_external_id, agent_name = (
        agent_identity(agent_id, gateway, instance) if gateway or instance else (agent_id, agent_id)
    )
    return session_id, session_key, agent_external_id, agent_name


def _hook_facts(
    hook: str, kind: str, event: dict[str, Any], session_id: str
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(kind, facts, event kept as payload) of one hook: a ``session_end`` may be a
    suspend, and ``agent_end`` keeps only what memory needs of the conversation."""
    facts: dict[str, Any] = {}
    payload_event = event
    if hook == "session_start":
        resumed_from = identifier(event.get("resumedFrom"), "event.resumedFrom", required=False)
        if resumed_from and resumed_from == session_id:
            facts["opens_new_session"] = True  # a reset in place
        elif resumed_from:
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
        if count:
            facts["message_count"] = count
    elif hook in ("before_compaction", "after_compaction"):
        tokens = opt_count(event.get("tokenCount"), "event.tokenCount")
        if tokens is not None:
            facts["token_count"] = tokens
    elif hook == "message_received":
        content = event.get("content")
        facts["text"] = content if isinstance(content, str) else ""
    elif hook == "before_prompt_build":
        prompt = event.get("prompt")
        facts["text"] = prompt if isinstance(prompt, str) else ""
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
    return kind, facts, payload_event
