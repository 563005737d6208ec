"""OpenAI's Codex CLI: the JSON a command hook receives on stdin (``hooks.json`` or the
``[hooks]`` tables of ``config.toml``), posted as it came by the hook client, mapped onto
canonical events.

What Codex CLI 0.171 does, said here as plain facts:

- Every hook carries ``session_id`` (the thread id, kept by ``codex exec resume`` and by a
  compaction), ``transcript_path`` (the rollout JSONL under ``~/.codex/sessions``),
  ``cwd``, ``hook_event_name``; most carry ``model``, ``permission_mode`` and the turn's
  ``turn_id``.
- ``SessionStart`` has ``source`` = ``startup``, ``resume``, ``clear`` or ``compact`` (the
  context was just compacted: part of the compaction, not a new start).
- ``PreCompact`` / ``PostCompact`` carry ``trigger`` (``auto``, ``manual``).
- ``PermissionRequest`` is Codex asking the user to approve a tool call: a notification.
- ``Stop`` carries ``last_assistant_message``: a turn's end, where memory is distilled.
  ``Interrupt`` is a turn the user stopped (Esc): a turn's end with no final words.
- ``SubagentStart`` / ``SubagentStop`` are a subagent's own life; its stop is a turn end
  of the subagent. ``PreModelRequest`` / ``PostModelRequest`` fire around each model call
  (``token_usage``, ``response_id``): kept as ``other``, as is any hook Codex adds later.
- ``SessionEnd`` (``reason``: ``other`` when ``codex exec`` finishes) ends the session; a
  later resume reopens it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from lifecycle.models import EventKind, Source

from . import cli_hooks
from .base import KeyPath, NormalizedEvent, end_reason, first_present, opt_str

_KINDS: dict[str, tuple[str, str]] = {
    "UserPromptSubmit": (EventKind.PROMPT, ""),
    "PreToolUse": (EventKind.TOOL_USE, "pre"),
    "PostToolUse": (EventKind.TOOL_USE, "post"),
    "PermissionRequest": (EventKind.NOTIFICATION, ""),
    "PreCompact": (EventKind.COMPACTION_BEFORE, ""),
    "PostCompact": (EventKind.COMPACTION_AFTER, ""),
    "Stop": (EventKind.TURN_END, ""),
    "SubagentStop": (EventKind.TURN_END, ""),
    "Interrupt": (EventKind.TURN_END, ""),
    "SessionEnd": (EventKind.SESSION_END, ""),
}


# Where a stored tool call's input lies (``first_present``).
TOOL_INPUT: tuple[KeyPath, ...] = (("tool_input",),)


def tool_io(payload: dict[str, Any]) -> tuple[Any, Any]:
    """A tool call's input and output as Codex's hook body has them."""
    return first_present(payload, TOOL_INPUT), payload.get("tool_response")


def adapt(body: Any, *, gateway: str, now: datetime) -> NormalizedEvent:
    """Validate and map one Codex CLI hook body."""
    call = cli_hooks.read(
        body, source=Source.CODEX, gateway=gateway, now=now, fallback_name="codex"
    )
    hook = call.hook
    if hook == "SessionStart":
        kind, facts = cli_hooks.start_facts(call)
        phase = ""
    else:
        kind, phase = _KINDS.get(hook, (EventKind.OTHER, ""))
        facts = _facts(call, kind)
    facts |= cli_hooks.context_facts(call)
    return call.event(source=Source.CODEX, kind=kind, phase=phase, facts=facts)


def _facts(call: cli_hooks.HookCall, kind: str) -> dict[str, Any]:
    body, hook = call.body, call.hook
    facts: dict[str, Any] = {}
    if kind == EventKind.PROMPT:
        facts["text"] = opt_str(body, "prompt", "prompt", max_length=1_000_000)
    elif kind == EventKind.TOOL_USE:
        facts["tool_name"] = opt_str(body, "tool_name", "tool_name", max_length=200)
        facts["failed"] = False  # Codex sends no hook for a failed call
    elif kind == EventKind.NOTIFICATION:
        facts["tool_name"] = opt_str(body, "tool_name", "tool_name", max_length=200)
        facts["notification"] = "permission_request"
    elif kind in (EventKind.COMPACTION_BEFORE, EventKind.COMPACTION_AFTER):
        facts["trigger"] = opt_str(body, "trigger", "trigger", max_length=40)
        summary = opt_str(
            call.extra, "compact_summary", "sessionhub.compact_summary", max_length=10**6
        )
        if summary and kind == EventKind.COMPACTION_AFTER:
            facts["compact_summary"] = summary
    elif kind == EventKind.TURN_END:
        facts |= cli_hooks.turn_facts(call, "last_assistant_message")
        if hook == "Interrupt":
            # Stopped by the user: whatever it said so far is no final answer.
            facts |= {"interrupted": True, "final_message": ""}
        facts["subagent"] = hook == "SubagentStop"
        # As Claude Code's Stop: a turn the user may never follow up, so the session's
        # memory is distilled here, not only at its end.
        facts["summarize"] = True
    elif kind == EventKind.SESSION_END:
        raw_reason = opt_str(body, "reason", "reason", max_length=100)
        facts |= {"reason": end_reason(raw_reason), "reason_detail": raw_reason}
        # A session can end in the middle of a turn: its last words are in the rollout.
        final = cli_hooks.turn_facts(call, "last_assistant_message")
        if final["final_message"] or final["reasoning"]:
            facts |= final
    # A subagent's hooks name it: its tool calls and turns are its, not the parent's.
    subagent_id = opt_str(body, "agent_id", "agent_id", max_length=200)
    if subagent_id:
        facts["agent_id"] = subagent_id
        facts["agent_type"] = opt_str(body, "agent_type", "agent_type", max_length=200)
    return facts
