"""What the coding CLIs whose command hooks took Claude Code's shape share (Codex CLI,
Gemini CLI): a JSON object on the hook's stdin with ``session_id``, ``transcript_path``,
``cwd`` and ``hook_event_name``, posted as it came, plus the ``sessionhub`` block the hook
client adds (event id, time, git remote, and what it read from the CLI's transcript).

Identity follows Claude Code's rule (``claude_code.agent_identity``): the token's gateway
label plus the project, the git remote when the client sends one, else the working
directory. Each CLI's own adapter maps hook names onto kinds and adds its facts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lifecycle.models import EventKind
from sessionhub.text.tails import reasoning_from_text

from .base import (
    EventInvalid,
    NormalizedEvent,
    as_key,
    derived_key,
    event_identifier,
    identifier,
    opt_count,
    opt_str,
    parse_iso_time,
    require_dict,
)
from .claude_code import agent_identity, developer_of


@dataclass(frozen=True, slots=True)
class HookCall:
    """One hook call, validated: who, when, and the body as the CLI wrote it."""

    hook: str
    session_id: str
    event_id: str
    occurred_at: datetime
    cwd: str
    agent_external_id: str
    agent_name: str
    project: str
    extra: dict[str, Any]
    body: dict[str, Any]
    developer: str = ""

    def event(
        self,
        *,
        source: str,
        kind: str,
        phase: str = "",
        facts: dict[str, Any],
        payload: dict[str, Any] | None = None,
    ) -> NormalizedEvent:
        return NormalizedEvent(
            event_id=self.event_id,
            kind=kind,
            source=source,
            occurred_at=self.occurred_at,
            agent_external_id=self.agent_external_id,
            agent_name=self.agent_name,
            session_external_id=as_key(self.session_id),
            hook=as_key(self.hook, limit=100),
            phase=phase,
            channel="cli",
            cwd=self.cwd,
            project=self.project,
            developer=self.developer,
            facts=facts,
            payload=self.body if payload is None else payload,
        )


def read(
    body: Any,
    *,
    source: str,
    gateway: str,
    now: datetime,
    fallback_name: str,
    time_field: str = "",
) -> HookCall:
    """Validate the fields every such hook carries. ``time_field`` names the CLI's own
    timestamp in the body, used when the client sent none (a body posted as it came)."""
    body = require_dict(body, "$")
    hook = opt_str(body, "hook_event_name", "hook_event_name", max_length=100)
    if not hook:
        raise EventInvalid("hook_event_name", "is required", "required")
    session_id = identifier(body.get("session_id"), "session_id")
    extra = require_dict(body.get("sessionhub"), "sessionhub", optional=True)
    # The payload is the body as the CLI wrote it: SessionHub's own block goes.
    raw = {k: v for k, v in body.items() if k != "sessionhub"} if "sessionhub" in body else body
    raw_id = extra.get("event_id")
    event_id = (
        as_key(event_identifier(raw_id, "sessionhub.event_id"))
        if raw_id is not None
        else derived_key(source, raw)
    )
    if extra.get("occurred_at") is not None:
        occurred_at = parse_iso_time(extra["occurred_at"], "sessionhub.occurred_at", now)
    elif time_field and body.get(time_field) is not None:
        occurred_at = parse_iso_time(body[time_field], time_field, now)
    else:
        occurred_at = now
    cwd = opt_str(body, "cwd", "cwd")
    remote = opt_str(extra, "git_remote", "sessionhub.git_remote")
    agent_id, agent_name, project = agent_identity(
        gateway=gateway, cwd=cwd, git_remote=remote, fallback=fallback_name
    )
    return HookCall(
        hook=hook,
        session_id=session_id,
        event_id=event_id,
        occurred_at=occurred_at,
        cwd=cwd,
        agent_external_id=agent_id,
        agent_name=agent_name,
        project=project,
        extra=extra,
        body=raw,
        developer=developer_of(extra, gateway),
    )


def start_facts(call: HookCall) -> tuple[str, dict[str, Any]]:
    """(kind, facts) of a ``SessionStart``: ``resume`` reopens the session, ``clear``
    starts one that follows the cleared session, ``compact`` is the end of a compaction."""
    source = opt_str(call.body, "source", "source", max_length=40)
    facts: dict[str, Any] = {"start_source": source}
    if source == "resume":
        return EventKind.SESSION_RESUME, facts
    if source == "compact":
        return EventKind.COMPACTION_AFTER, facts
    if source == "clear":
        facts["follows_cleared"] = True
    elif source and source != "startup":
        facts["start_source_unknown"] = True
    return EventKind.SESSION_START, facts


def turn_facts(call: HookCall, final_field: str) -> dict[str, Any]:
    """A turn's last words (the CLI's own field, else what the client read from the
    transcript) and reasoning (the client's tail, else text tagged as thinking)."""
    final = opt_str(call.body, final_field, final_field, max_length=10**6)
    final = final or opt_str(
        call.extra, "final_message", "sessionhub.final_message", max_length=10**6
    )
    tagged, visible = reasoning_from_text(final)
    reasoning = opt_str(call.extra, "reasoning_tail", "sessionhub.reasoning_tail", max_length=10**6)
    return {"final_message": visible, "reasoning": reasoning or tagged}


def context_facts(call: HookCall) -> dict[str, Any]:
    """What the client adds beside the CLI's own fields: what it trimmed, the model and
    the session's token count as the transcript has them."""
    facts: dict[str, Any] = {}
    trimmed = call.extra.get("trimmed")
    if isinstance(trimmed, dict) and trimmed:
        facts["client_trimmed"] = {
            str(k)[:200]: v for k, v in list(trimmed.items())[:50] if type(v) is int
        }
    model = opt_str(call.body, "model", "model", max_length=200)
    model = model or opt_str(call.extra, "model", "sessionhub.model", max_length=200)
    if model:
        facts["model"] = model
    tokens = opt_count(call.extra.get("token_count"), "sessionhub.token_count")
    if tokens is not None:
        facts["token_count"] = tokens
    return facts


_CONTEXT_BLOCK = re.compile(r"\A\s*(?:<hook_context>.*?</hook_context>\s*)+", re.S)


def without_hook_context(prompt: str) -> str:
    """A prompt without the ``<hook_context>`` blocks a CLI put before the user's words
    (the context hooks returned, SessionHub's own preamble among them)."""
    return _CONTEXT_BLOCK.sub("", prompt, count=1)
