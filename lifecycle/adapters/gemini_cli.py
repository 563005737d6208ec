"""Google's Gemini CLI: the JSON a command hook receives on stdin (``hooks`` of
``settings.json``), posted as it came by the hook client, mapped onto canonical events.

What Gemini CLI 0.61 does, said here as plain facts:

- Every hook carries ``session_id`` (kept by ``--resume``), ``transcript_path`` (the chat
  recording, JSONL, under ``~/.gemini/tmp/<project>/chats``), ``cwd``,
  ``hook_event_name`` and ``timestamp``. No hook names the model: the client reads it
  from the chat recording.
- ``SessionStart`` has ``source`` = ``startup``, ``resume`` or ``clear``; ``SessionEnd``
  has ``reason`` = ``exit``, ``clear``, ``logout``, ``prompt_input_exit`` or ``other``.
- ``BeforeAgent`` is the user's prompt. The context hooks returned at the session's start
  (SessionHub's preamble among them) is put before the prompt as ``<hook_context>``
  blocks, and the hook's ``prompt`` has them: they are not the user's words.
- ``AfterAgent`` (``prompt_response``) ends a turn, where memory is distilled.
- ``BeforeTool`` / ``AfterTool`` are a tool call (``tool_response``: ``llmContent``,
  ``returnDisplay``, ``error``).
- ``PreCompress`` fires before every model call, whether or not the history is then
  compressed. Only a compression that happened is a compaction: the client watches the
  chat recording and says so (``sessionhub.compacted``, with the summary); without the
  client's word a ``manual`` one counts (``/compress`` always compresses) and an
  ``auto`` one is a check, kept as ``other``.
- ``BeforeModel``, ``AfterModel`` (once per streamed chunk) and ``BeforeToolSelection``
  carry the whole request: kept as ``other`` with the model and the size of the
  conversation, never the conversation. Any hook Gemini CLI adds later is ``other`` too.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from lifecycle.models import EventKind, Source

from . import cli_hooks
from .base import KeyPath, NormalizedEvent, end_reason, first_present, opt_str

_KINDS: dict[str, tuple[str, str]] = {
    "BeforeAgent": (EventKind.PROMPT, ""),
    "AfterAgent": (EventKind.TURN_END, ""),
    "BeforeTool": (EventKind.TOOL_USE, "pre"),
    "AfterTool": (EventKind.TOOL_USE, "post"),
    "Notification": (EventKind.NOTIFICATION, ""),
    "SessionEnd": (EventKind.SESSION_END, ""),
}
_MODEL_HOOKS = {"BeforeModel", "AfterModel", "BeforeToolSelection"}


# Where a stored tool call's input lies (``first_present``).
TOOL_INPUT: tuple[KeyPath, ...] = (("tool_input",),)


def tool_io(payload: dict[str, Any]) -> tuple[Any, Any]:
    """A tool call's input and output (its error when it failed; else what the CLI showed
    the user, else what it gave the model)."""
    response = payload.get("tool_response")
    if isinstance(response, dict):
        for key in ("error", "returnDisplay", "llmContent"):
            value = response.get(key)
            if isinstance(value, str) and value.strip():
                return first_present(payload, TOOL_INPUT), value
    return first_present(payload, TOOL_INPUT), response


def adapt(body: Any, *, gateway: str, now: datetime) -> NormalizedEvent:
    """Validate and map one Gemini CLI hook body."""
    call = cli_hooks.read(
        body,
        source=Source.GEMINI_CLI,
        gateway=gateway,
        now=now,
        fallback_name="gemini-cli",
        time_field="timestamp",
    )
    hook, payload = call.hook, None
    phase = ""
    if hook == "SessionStart":
        kind, facts = cli_hooks.start_facts(call)
    elif hook == "PreCompress":
        kind, facts = _compression(call)
    elif hook in _MODEL_HOOKS:
        kind, facts, payload = EventKind.OTHER, {}, _without_conversation(call.body)
        request = call.body.get("llm_request")
        model = request.get("model") if isinstance(request, dict) else None
        if isinstance(model, str) and model:
            facts["model"] = model[:200]
    else:
        kind, phase = _KINDS.get(hook, (EventKind.OTHER, ""))
        facts = _facts(call, kind)
    facts |= cli_hooks.context_facts(call)
    return call.event(
        source=Source.GEMINI_CLI, kind=kind, phase=phase, facts=facts, payload=payload
    )


def _facts(call: cli_hooks.HookCall, kind: str) -> dict[str, Any]:
    body = call.body
    facts: dict[str, Any] = {}
    if kind == EventKind.PROMPT:
        prompt = opt_str(body, "prompt", "prompt", max_length=1_000_000)
        facts["text"] = cli_hooks.without_hook_context(prompt)
    elif kind == EventKind.TOOL_USE:
        facts["tool_name"] = opt_str(body, "tool_name", "tool_name", max_length=200)
        response = body.get("tool_response")
        facts["failed"] = isinstance(response, dict) and bool(response.get("error"))
    elif kind == EventKind.NOTIFICATION:
        facts["notification"] = opt_str(
            body, "notification_type", "notification_type", max_length=100
        )
    elif kind == EventKind.TURN_END:
        facts |= cli_hooks.turn_facts(call, "prompt_response")
        facts["summarize"] = True
    elif kind == EventKind.SESSION_END:
        raw_reason = opt_str(body, "reason", "reason", max_length=100)
        facts |= {"reason": end_reason(raw_reason), "reason_detail": raw_reason}
    return facts


def _compression(call: cli_hooks.HookCall) -> tuple[str, dict[str, Any]]:
    """A ``PreCompress``: a compaction when one happened, else a check (``other``)."""
    trigger = opt_str(call.body, "trigger", "trigger", max_length=40)
    facts: dict[str, Any] = {"trigger": trigger}
    said = call.extra.get("compacted")
    compacted = said if isinstance(said, bool) else trigger == "manual"
    if not compacted:
        return EventKind.OTHER, facts | {"compaction_check": True}
    summary = opt_str(call.extra, "compact_summary", "sessionhub.compact_summary", max_length=10**6)
    if summary:
        facts["compact_summary"] = summary
    return EventKind.COMPACTION_BEFORE, facts


def _without_conversation(body: dict[str, Any]) -> dict[str, Any]:
    """A model hook's body with the conversation it carries cut down to its size."""
    kept = dict(body)
    for key in ("llm_request", "llm_response"):
        value = kept.get(key)
        if isinstance(value, dict):
            part = {k: v for k, v in value.items() if k not in ("messages", "candidates")}
            for bulk in ("messages", "candidates"):
                if isinstance(value.get(bulk), list):
                    part[bulk] = {"count": len(value[bulk])}
            kept[key] = part
    return kept
