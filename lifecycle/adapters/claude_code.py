"""Claude Code: the JSON a hook receives on stdin, as posted by the hook client or by an
``"type": "http"`` hook, mapped onto canonical events.

Claude Code names no agent: the agent is the token's gateway plus the project, and the
project is the git remote when the client sends one, else the full working directory.
The agent's identity is made from the raw project (credentials stripped from the remote)
and keyed (``base.as_key``); its name and the project shown are derived from the remote
and working directory redacted whole, never the other way round.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar, cast

from lifecycle.models import EventKind, Source
from sessionhub.text.redaction import keyed_form
from sessionhub.text.tails import reasoning_from_text

from .base import (
    EventInvalid,
    KeyPath,
    NormalizedEvent,
    as_key,
    derived_key,
    end_reason,
    event_identifier,
    first_present,
    identifier,
    normalize_git_remote,
    opt_str,
    parse_iso_time,
    require_dict,
    shown,
    usage_facts,
)

_T = TypeVar("_T")
_START_SOURCES = {"startup", "clear", "fork"}
_AGENT_ID_LENGTH = 300  # Agent.external_id


# A prompt Claude Code writes itself when a background task (an Agent run in the
# background, a background shell) finishes: kept in the timeline as a notification,
# never counted as something the user asked.
_INJECTED_PROMPT_TAGS = ("<task-notification>",)


_SIMPLE_KINDS = {
    "SessionEnd": (EventKind.SESSION_END, ""),
    "PreCompact": (EventKind.COMPACTION_BEFORE, ""),
    "PostCompact": (EventKind.COMPACTION_AFTER, ""),
    "UserPromptSubmit": (EventKind.PROMPT, ""),
    "PreToolUse": (EventKind.TOOL_USE, "pre"),
    "PostToolUse": (EventKind.TOOL_USE, "post"),
    "PostToolUseFailure": (EventKind.TOOL_USE, "post"),
    "Stop": (EventKind.TURN_END, ""),
    "StopFailure": (EventKind.TURN_END, ""),
    "SubagentStop": (EventKind.TURN_END, ""),
    "Notification": (EventKind.NOTIFICATION, ""),
}


def _kind_of(hook: str, body: dict[str, Any]) -> tuple[str, str]:
    """(canonical kind, phase) for a hook name."""
    if hook == "SessionStart":
        source = body.get("source")
        if source == "resume":
            return EventKind.SESSION_RESUME, ""
        if source == "compact":
            return EventKind.COMPACTION_AFTER, ""
        return EventKind.SESSION_START, ""
    if hook == "UserPromptSubmit" and _injected(body.get("prompt")):
        return EventKind.NOTIFICATION, ""
    if hook == "SubagentStop" and _compaction_agent(body):
        return EventKind.COMPACTION_AFTER, ""
    return _SIMPLE_KINDS.get(hook, (EventKind.OTHER, ""))


def agent_identity(
    *, gateway: str, cwd: str, git_remote: str, fallback: str = "claude-code"
) -> tuple[str, str, str]:
    """(agent external id, agent name, project shown) of a Claude Code project (and of
    the other CLIs that follow its rule); ``fallback`` names an agent with no project.

    The identity is made from the raw facts (the remote with its credentials stripped,
    else the working directory) and keyed; the name and project shown are derived from
    the remote and working directory redacted whole. So redaction never decides which
    agent a session belongs to, and nothing shown is derived from an unredacted string.
    """
    identity = normalize_git_remote(git_remote) or cwd
    project = normalize_git_remote(shown(git_remote)) or shown(cwd)
    label = shown(gateway)
    external_id = keyed_form(f"{gateway}:{identity}", f"{label}:{project}", limit=_AGENT_ID_LENGTH)
    # Named as the project reads: the token's gateway is part of the identity, not the name
    # (the dashboard tells two agents of one project apart by their developer).
    name = project.rstrip("/").rsplit("/", 1)[-1] or fallback
    return external_id, name, project


def developer_of(extra: dict[str, Any], gateway: str, memo: dict[Any, Any] | None = None) -> str:
    """Who ran the session: the OS ``user@host`` the client reports, else the token's
    gateway label (a word of the wrong type counts as none). ``memo`` as for ``adapt``."""
    reported = extra.get("developer")
    if isinstance(reported, str) and reported.strip():
        return reported.strip()[:200]
    return _remembered(memo, ("gateway", gateway), lambda: shown(gateway)[:200])


def _injected(prompt: Any) -> bool:
    """Whether a UserPromptSubmit carries a notification Claude Code wrote, not the user."""
    return isinstance(prompt, str) and prompt.lstrip().startswith(_INJECTED_PROMPT_TAGS)


def _compaction_agent(body: dict[str, Any]) -> bool:
    """The SubagentStop of the agent that writes a compaction's summary: it names no agent
    type and its last words are the ``<summary>`` block. It is part of the compaction,
    not a turn (between PreCompact and ``SessionStart source=compact``)."""
    if body.get("agent_type") != "":
        return False
    last = body.get("last_assistant_message")
    return isinstance(last, str) and "<summary>" in last


# Where a stored tool call's input lies (``first_present``).
TOOL_INPUT: tuple[KeyPath, ...] = (("tool_input",),)


def tool_io(payload: dict[str, Any]) -> tuple[Any, Any]:
    """A tool call's input and output (or its error) as Claude Code's hook body has them."""
    return first_present(payload, TOOL_INPUT), payload.get("tool_response", payload.get("error"))


# What ``adapt`` derives from the strings every event of a session repeats (its id, its
# working directory and remote, the hook's name), kept per adapter: a batch is mostly
# one session's events. Bounded, for an adapter that lives longer than one request.
_MEMO_ENTRIES = 256


def _remembered(memo: dict[Any, Any] | None, key: tuple[str, ...], make: Callable[[], _T]) -> _T:
    """``make()``, or what it gave for ``key`` before (``make`` depends on ``key`` alone)."""
    if memo is None:
        return make()
    try:
        return cast(_T, memo[key])
    except KeyError:
        pass
    if len(memo) >= _MEMO_ENTRIES:
        memo.clear()
    found = memo[key] = make()
    return found


def adapt(
    body: Any, *, gateway: str, now: datetime, memo: dict[Any, Any] | None = None
) -> NormalizedEvent:
    """Validate and map one Claude Code hook body.

    ``memo``, when given (one dict for the events of a request), keeps the keyed and
    redacted forms of what events repeat, so that each is derived once; the result is
    the same without it."""
    body = require_dict(body, "$")
    hook = opt_str(body, "hook_event_name", "hook_event_name", max_length=100)
    if not hook:
        raise EventInvalid("hook_event_name", "is required", "required")
    session_id = identifier(body.get("session_id"), "session_id")
    extra = require_dict(body.get("sessionhub"), "sessionhub", optional=True)

    raw_id = extra.get("event_id")
    # The payload is the body as Claude Code wrote it: SessionHub's own block goes.
    raw = {k: v for k, v in body.items() if k != "sessionhub"} if "sessionhub" in body else body
    event_id = (
        as_key(event_identifier(raw_id, "sessionhub.event_id"))
        if raw_id is not None
        else derived_key(Source.CLAUDE_CODE, raw)
    )
    occurred_at = (
        parse_iso_time(extra["occurred_at"], "sessionhub.occurred_at", now)
        if extra.get("occurred_at") is not None
        else now
    )
    cwd = opt_str(body, "cwd", "cwd")
    raw_remote = opt_str(extra, "git_remote", "sessionhub.git_remote")
    agent_id, agent_name, project = _remembered(
        memo,
        ("agent", cwd, raw_remote),
        lambda: agent_identity(gateway=gateway, cwd=cwd, git_remote=raw_remote),
    )
    kind, phase = _kind_of(hook, body)
    facts = {
        **_lifecycle_facts(hook, kind, body),
        **_turn_facts(hook, kind, body, extra),
        **_context_facts(body, extra),
    }
    return NormalizedEvent(
        event_id=event_id,
        kind=kind,
        source=Source.CLAUDE_CODE,
        occurred_at=occurred_at,
        agent_external_id=agent_id,
        agent_name=agent_name,
        session_external_id=_remembered(memo, ("session", session_id), lambda: as_key(session_id)),
        hook=_remembered(memo, ("hook", hook), lambda: as_key(hook, limit=100)),
        phase=phase,
        channel="cli",
        cwd=cwd,
        project=project,
        developer=developer_of(extra, gateway, memo),
        facts=facts,
        payload=raw,
    )


def _lifecycle_facts(hook: str, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    """Starts, ends, prompts, tool calls and compactions."""
    facts: dict[str, Any] = {}
    if hook == "SessionStart":
        source = opt_str(body, "source", "source", max_length=40)
        facts["start_source"] = source
        if source == "clear":
            # A /clear start: the session follows the one just cleared in the project.
            facts["follows_cleared"] = True
        if kind == EventKind.SESSION_START and source and source not in _START_SOURCES:
            facts["start_source_unknown"] = True
    if kind == EventKind.SESSION_END:
        raw_reason = opt_str(body, "reason", "reason", max_length=100)
        facts["reason"] = end_reason(raw_reason)
        facts["reason_detail"] = raw_reason
    if kind == EventKind.PROMPT:
        facts["text"] = opt_str(body, "prompt", "prompt", max_length=1_000_000)
    if hook == "UserPromptSubmit" and kind == EventKind.NOTIFICATION:
        facts["injected"] = "task-notification"
    # A subagent's own hooks carry its id and type: its tool calls are its, not the parent's.
    subagent_id = opt_str(body, "agent_id", "agent_id", max_length=200)
    if subagent_id:
        facts["agent_id"] = subagent_id
        facts["agent_type"] = opt_str(body, "agent_type", "agent_type", max_length=200)
    if kind == EventKind.TOOL_USE:
        facts["tool_name"] = opt_str(body, "tool_name", "tool_name", max_length=200)
        facts["failed"] = hook == "PostToolUseFailure"
        if hook == "PostToolUse" and not subagent_id:
            change = task_list_change(
                facts["tool_name"], body.get("tool_input"), body.get("tool_response")
            )
            if change is not None:
                facts["task_list"] = change
    if kind == EventKind.COMPACTION_BEFORE:
        facts["trigger"] = opt_str(body, "trigger", "trigger", max_length=40)
    if hook in ("PostCompact", "SubagentStop") and kind == EventKind.COMPACTION_AFTER:
        # Claude Code's own summary of the conversation so far: memory worth keeping.
        summary = opt_str(body, "compact_summary", "compact_summary", max_length=10**6)
        summary = summary or opt_str(
            body, "last_assistant_message", "last_assistant_message", max_length=10**6
        )
        if summary:
            facts["compact_summary"] = summary
    return facts


def _turn_facts(
    hook: str, kind: str, body: dict[str, Any], extra: dict[str, Any]
) -> dict[str, Any]:
    """A turn's (or a session's) last words and reasoning, and whether it failed."""
    facts: dict[str, Any] = {}
    found = extra.get("turn")
    turn: dict[str, Any] = found if isinstance(found, dict) else {}
    if hook == "StopFailure":
        # A turn that an API error ended: no final message, whatever text came with it.
        facts["failed"] = True
        facts["error"] = opt_str(body, "error", "error", max_length=200) or "unknown"
        facts["final_message"] = ""
        facts["reasoning"] = ""
        facts.update(_error_details(turn))
        return facts
    if kind in (EventKind.TURN_END, EventKind.SESSION_END) and turn:
        # What the client read at the transcript's end that the hook does not say: an API
        # error (releases without StopFailure fire Stop after one), an interruption.
        error = turn.get("api_error")
        if isinstance(error, str) and error:
            facts["failed"] = True
            facts["error"] = error[:200]
            facts.update(_error_details(turn))
        elif turn.get("interrupted") is True:
            facts["interrupted"] = True
    if facts.get("failed") and kind == EventKind.TURN_END:
        facts["final_message"] = ""
        facts["reasoning"] = ""
    elif kind in (EventKind.TURN_END, EventKind.SESSION_END):
        # The client reads the transcript on SessionEnd too: a session can end in the
        # middle of a turn, with no Stop to carry its last words.
        final = opt_str(body, "last_assistant_message", "last_assistant_message", max_length=10**6)
        final = final or opt_str(
            extra, "final_message", "sessionhub.final_message", max_length=10**6
        )
        tagged, visible = reasoning_from_text(final)
        reasoning = opt_str(extra, "reasoning_tail", "sessionhub.reasoning_tail", max_length=10**6)
        if (kind == EventKind.TURN_END or visible or reasoning or tagged) and not facts.get(
            "failed"
        ):
            facts["final_message"] = keep_ends(visible)
            facts["reasoning"] = reasoning or tagged
    if kind == EventKind.TURN_END:
        facts["subagent"] = hook == "SubagentStop"
        usage = usage_facts(extra.get("usage"))
        if usage is not None and hook == "Stop":
            facts["usage"] = usage
        # Claude Code's Stop closes a turn the user may never follow up: the session's
        # memory is distilled there, not only at its end.
        facts["summarize"] = True
    return facts


def _error_details(turn: dict[str, Any]) -> dict[str, Any]:
    """The HTTP status and type of an API error, as the client read them."""
    details: dict[str, Any] = {}
    status = turn.get("status")
    if type(status) is int and 100 <= status < 1000:
        details["error_status"] = status
    kind = turn.get("type")
    if isinstance(kind, str) and kind:
        details["error_type"] = kind[:100]
    return details


def _context_facts(body: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """What the client adds: what it trimmed, and the model."""
    facts: dict[str, Any] = {}
    trimmed = extra.get("trimmed")
    if isinstance(trimmed, dict) and trimmed:
        # What the client cut from oversized strings (path → characters), so the stored
        # event says it is not whole.
        facts["client_trimmed"] = {
            str(k)[:200]: v for k, v in list(trimmed.items())[:50] if type(v) is int
        }
    # The session this one continues under a new id (a fork, a resume of a release that
    # minted new ids, a conversation opening with a continuation summary), as the client
    # read it from the transcript.
    earlier = extra.get("resumed_from")
    if isinstance(earlier, str) and earlier and earlier != body.get("session_id"):
        facts["resumed_from"] = as_key(identifier(earlier, "sessionhub.resumed_from"))
    # Headless (-p) sessions name no model on SessionStart: the client reads it from the
    # transcript.
    model = opt_str(body, "model", "model", max_length=200)
    model = model or opt_str(extra, "model", "sessionhub.model", max_length=200)
    if model:
        facts["model"] = model
    return facts


# What a final message keeps when it is longer than a stored string: its head says what
# it is about, its end says what was done.
FINAL_HEAD = 1500
FINAL_KEPT = 8000


def keep_ends(text: str, kept: int = FINAL_KEPT, head: int = FINAL_HEAD) -> str:
    """``text`` whole when it fits in ``kept`` characters, else its head and its end with
    a marker between them (cut at whitespace where there is some)."""
    if len(text) <= kept:
        return text
    marker = f"\n[… {len(text) - kept} characters left out …]\n"
    start = text[:head].rsplit(None, 1)[0] if " " in text[:head] else text[:head]
    tail_from = len(text) - (kept - len(start) - len(marker))
    space = text.find(" ", tail_from)
    end = text[space + 1 :] if 0 <= space < tail_from + 200 else text[tail_from:]
    return start + marker + end


# Claude Code's task-list tools: TodoWrite writes the whole list each time; TaskCreate and
# TaskUpdate (later releases) change one item, named by the id TaskCreate answers with.
_TASK_CREATED = "created successfully"
_TASK_LIST_LIMIT = 100
_TASK_TEXT_LIMIT = 300


def task_list_change(tool: str, tool_input: Any, response: Any) -> dict[str, Any] | None:
    """A change to the session's task list, as a plain fact (``memory.features.
    task_list_state`` folds them), from one task-list tool call; None for other tools."""
    if not isinstance(tool_input, dict):
        return None
    if tool == "TodoWrite":
        todos = tool_input.get("todos")
        if not isinstance(todos, list):
            return None
        items = [
            {"text": _task_text(item.get("content")), "status": _task_status(item.get("status"))}
            for item in todos[:_TASK_LIST_LIMIT]
            if isinstance(item, dict) and _task_text(item.get("content"))
        ]
        return {"op": "replace", "items": items}
    if tool == "TaskCreate":
        text = _task_text(tool_input.get("subject"))
        if not text:
            return None
        return {"op": "create", "id": _created_id(response), "text": text, "status": "pending"}
    if tool == "TaskUpdate":
        task_id = tool_input.get("taskId")
        if not isinstance(task_id, (str, int)) or isinstance(task_id, bool):
            return None
        change: dict[str, Any] = {"op": "update", "id": str(task_id)[:40]}
        if tool_input.get("status") is not None:
            change["status"] = _task_status(tool_input.get("status"))
        if _task_text(tool_input.get("subject")):
            change["text"] = _task_text(tool_input.get("subject"))
        return change
    return None


def _task_text(value: Any) -> str:
    return " ".join(value.split())[:_TASK_TEXT_LIMIT] if isinstance(value, str) else ""


def _task_status(value: Any) -> str:
    return value.strip().lower()[:20] if isinstance(value, str) and value.strip() else "pending"


def _created_id(response: Any) -> str:
    """The id TaskCreate gave its task: ``{"task": {"id": ...}}``, or the number in its
    text answer ("Task #3 created successfully: ..."); '' when it says neither."""
    if isinstance(response, dict):
        task = response.get("task")
        if isinstance(task, dict) and isinstance(task.get("id"), (str, int)):
            return str(task["id"])[:40]
        response = response.get("content") or response.get("text")
    if isinstance(response, str) and _TASK_CREATED in response and "#" in response:
        digits = response.split("#", 1)[1].split(" ", 1)[0]
        return digits[:40] if digits.isdigit() else ""
    return ""
