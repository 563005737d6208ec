"""Codex CLI and Gemini CLI, their events.

Codex CLI and Gemini CLI run command hooks much as Claude Code does: the hook's JSON on
stdin (``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``), context
returned as ``hookSpecificOutput.additionalContext``. Their hooks pass ``--gateway
codex`` or ``--gateway gemini-cli``; the event goes to that gateway's endpoint with the
same spool, deadline and queue. What differs is here: which transcript holds the final
message, the reasoning and the model (Codex's rollout JSONL under ~/.codex/sessions,
Gemini CLI's chat recording under ~/.gemini/tmp), which hook carries the prompt, and
Gemini CLI's PreCompress, which fires before every model call whether or not the history
is then compressed. How their hooks are registered is in ``cli_install``.
"""

from __future__ import annotations

import json
import os
import time

from .constants import CLAUDE_CODE, CLIENT, CODEX, GEMINI_CLI, TRANSCRIPT_WINDOW
from .deadline import Deadline
from .events import _event_name, _parse_hook, fit_event
from .logfile import log
from .transcript import tail_at_word_boundary

PROMPT_HOOKS = {
    CLAUDE_CODE: "UserPromptSubmit",
    CODEX: "UserPromptSubmit",
    GEMINI_CLI: "BeforeAgent",
}
# Hooks whose event carries what the CLI's transcript says of the turn or the session.
CODEX_TRANSCRIPT_EVENTS = frozenset({"Stop", "SubagentStop", "Interrupt", "SessionEnd"})
GEMINI_TRANSCRIPT_EVENTS = frozenset({"AfterAgent", "SessionEnd"})
# How long Gemini CLI's PreCompress waits for the CLI to show whether it compressed: the
# compression is two model calls; the wait ends as soon as the CLI records either.
GEMINI_COMPRESSION_WAIT = 180.0
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "fish"})

# Noted before a hook detaches, while the CLI still waits for it: the process that started
# the hook (the CLI, or the shell it ran the command in) and, for Gemini CLI's PreCompress,
# how far the chat recording went.
_noted: dict = {"parent": 0, "transcript_size": None}


def remember_cli_process(raw: bytes, gateway: str) -> None:
    """Note what a detached hook needs to know of the moment it was called."""
    _noted["parent"] = os.getppid()
    if gateway == GEMINI_CLI and b"PreCompress" in raw:
        hook = _parse_hook(raw)
        if hook is not None and _event_name(hook) == "PreCompress":
            _noted["transcript_size"] = _file_size(hook.get("transcript_path"))


def build_cli_event(hook: dict, deadline: Deadline, meta: dict, gateway: str) -> dict:
    """The hook body plus the ``sessionhub`` block, for Codex CLI or Gemini CLI."""
    meta["gateway"] = gateway
    name = _event_name(hook)
    try:
        if gateway == CODEX and name in CODEX_TRANSCRIPT_EVENTS | {"PostCompact"}:
            _codex_extras(hook, meta)
        elif gateway == GEMINI_CLI and name in GEMINI_TRANSCRIPT_EVENTS:
            _gemini_extras(hook, meta)
        elif gateway == GEMINI_CLI and name == "PreCompress":
            # Where the recording stood when the hook was called: what the CLI writes
            # after it says whether the history was compressed (``settle_cli_event``).
            size = _noted["transcript_size"]
            meta["transcript_size"] = (
                _file_size(hook.get("transcript_path")) if size is None else size
            )
    except Exception as exc:  # noqa: BLE001 - the transcript is optional extra data
        log(f"{gateway} transcript unreadable: {exc!r}")
    meta["client"] = CLIENT
    event = dict(hook)
    event["sessionhub"] = meta
    return fit_event(event)


def _codex_extras(hook: dict, meta: dict) -> None:
    name = _event_name(hook)
    path = hook.get("transcript_path")
    if name == "SubagentStop" and isinstance(hook.get("agent_transcript_path"), str):
        path = hook["agent_transcript_path"]
    if not isinstance(path, str) or not path:
        return
    found = codex_rollout(os.path.expanduser(path))
    if name == "PostCompact":
        if found["compact_summary"]:
            meta["compact_summary"] = found["compact_summary"]
        return
    last = hook.get("last_assistant_message")
    if found["final"] and not (isinstance(last, str) and last.strip()):
        meta["final_message"] = found["final"]
    if found["tail"]:
        meta["reasoning_tail"] = found["tail"]
    if found["model"] and not hook.get("model"):
        meta["model"] = found["model"]
    if found["tokens"] is not None:
        meta["token_count"] = found["tokens"]


def _gemini_extras(hook: dict, meta: dict) -> None:
    path = hook.get("transcript_path")
    if not isinstance(path, str) or not path:
        return
    found = gemini_chat(os.path.expanduser(path))
    last = hook.get("prompt_response")
    if found["final"] and not (isinstance(last, str) and last.strip()):
        meta["final_message"] = found["final"]
    if found["tail"]:
        meta["reasoning_tail"] = found["tail"]
    if found["model"]:
        meta["model"] = found["model"]


def user_prompt(hook: dict, gateway: str) -> str | None:
    """The user's words in a prompt hook: Gemini CLI puts the context hooks returned (the
    preamble among them) before them as ``<hook_context>`` blocks."""
    prompt = hook.get("prompt")
    if not isinstance(prompt, str):
        return None
    if gateway == GEMINI_CLI:
        import re

        prompt = re.sub(r"\A\s*(?:<hook_context>.*?</hook_context>\s*)+", "", prompt, flags=re.S)
    return prompt


def _jsonl_tail(path: str, window: int = TRANSCRIPT_WINDOW) -> list[dict]:
    """The JSON objects on the whole lines of a JSONL file's last ``window`` bytes."""
    size = os.path.getsize(path)
    start = max(0, size - window)
    with open(path, "rb") as handle:
        handle.seek(start)
        data = handle.read(size - start)
    if start > 0:
        newline = data.find(b"\n")
        data = data[newline + 1 :] if newline >= 0 else b""
    records = []
    for line in data.split(b"\n"):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # blank, or half written
        if isinstance(record, dict):
            records.append(record)
    return records


def _texts_of(parts: object, kinds: tuple[str, ...]) -> list[str]:
    if not isinstance(parts, list):
        return []
    return [
        p["text"]
        for p in parts
        if isinstance(p, dict) and p.get("type") in kinds and isinstance(p.get("text"), str)
    ]


def codex_rollout(path: str) -> dict:
    """What a Codex rollout's end says: the last assistant words (not a compaction's
    summary, which Codex records as the model's answer to its request), the reasoning
    tail, the model, the session's total tokens and the newest compaction's summary."""
    found: dict = {"final": None, "tail": None, "model": None, "tokens": None}
    found["compact_summary"] = None
    reasoning: list[str] = []
    for record in _jsonl_tail(path):
        kind, payload = record.get("type"), record.get("payload")
        if not isinstance(payload, dict):
            continue
        inner = payload.get("type")
        if kind == "turn_context" and isinstance(payload.get("model"), str):
            found["model"] = payload["model"][:200]
        elif kind == "event_msg" and inner == "token_count":
            usage = (payload.get("info") or {}).get("total_token_usage") or {}
            if isinstance(usage.get("total_tokens"), int):
                found["tokens"] = usage["total_tokens"]
        elif kind == "event_msg" and inner == "task_complete":
            last = payload.get("last_agent_message")
            if isinstance(last, str) and last.strip():
                found["final"] = last
        elif kind == "response_item" and inner == "message" and payload.get("role") == "assistant":
            text = "\n\n".join(
                t.strip() for t in _texts_of(payload.get("content"), ("output_text",))
            )
            if text:
                found["final"] = text
        elif kind == "response_item" and inner == "reasoning":
            raw = _texts_of(payload.get("content"), ("reasoning_text", "text"))
            reasoning += raw or _texts_of(payload.get("summary"), ("summary_text",))
        elif kind == "compacted":
            message = payload.get("message")
            found["compact_summary"] = found["final"] or (
                message if isinstance(message, str) else None
            )
            found["final"] = None  # that answer was the summary, not the agent's words
    found["tail"] = tail_at_word_boundary("\n\n".join(t.strip() for t in reasoning if t.strip()))
    found["tail"] = found["tail"] or None
    return found


def gemini_chat(path: str) -> dict:
    """What a Gemini CLI chat recording's end says: the last words of the model, its
    thoughts since the user's last prompt and the model that answered."""
    found: dict = {"final": None, "tail": None, "model": None}
    thoughts: list[str] = []
    seen: dict[str, int] = {}  # a message is written again as it grows: the last copy holds
    for record in _jsonl_tail(path):
        kind = record.get("type")
        if kind == "user" and _gemini_user_words(record.get("content")):
            thoughts, seen = [], {}  # a new prompt: the turn's thoughts start again
        if kind != "gemini":
            continue
        if isinstance(record.get("model"), str) and record["model"]:
            found["model"] = record["model"][:200]
        content = record.get("content")
        text = content if isinstance(content, str) else " ".join(_texts_of(content, ("text",)))
        if text.strip():
            found["final"] = text.strip()
        mine = [
            ": ".join(
                x for x in (t.get("subject"), t.get("description")) if isinstance(x, str) and x
            )
            for t in record.get("thoughts") or []
            if isinstance(t, dict)
        ]
        key = str(record.get("id"))
        if key in seen:
            del thoughts[seen[key] :]
        seen[key] = len(thoughts)
        thoughts += [t for t in mine if t]
    found["tail"] = tail_at_word_boundary("\n\n".join(thoughts)) or None
    return found


def _gemini_user_words(content: object) -> bool:
    """Whether a user record is a prompt (text), not a tool's answer or the CLI's context."""
    if isinstance(content, str):
        return bool(content.strip())
    for part in content if isinstance(content, list) else []:
        text = part.get("text") if isinstance(part, dict) else None
        if (
            isinstance(text, str)
            and text.strip()
            and not text.lstrip().startswith("<session_context>")
        ):
            return True
    return False


def _file_size(path: object) -> int:
    try:
        return os.path.getsize(os.path.expanduser(path)) if isinstance(path, str) else 0
    except OSError:
        return 0


def cli_event_waits(hook: dict, gateway: str) -> bool:
    """Whether the event must wait for the CLI before it is sent: Gemini CLI's
    PreCompress, which is a compaction only if the CLI then compresses."""
    return gateway == GEMINI_CLI and _event_name(hook) == "PreCompress"


def settle_cli_event(hook: dict, event: dict, gateway: str) -> dict:
    """Gemini CLI's PreCompress, once the chat recording shows what followed it: the
    history rewritten with a summary (compressed), or the model's next answer (not)."""
    meta = event["sessionhub"]
    start = meta.pop("transcript_size", 0)
    path = hook.get("transcript_path")
    compacted, summary = False, ""
    if isinstance(path, str) and path:
        compacted, summary = watch_gemini_compression(
            os.path.expanduser(path), start, _cli_pid(), GEMINI_COMPRESSION_WAIT
        )
    meta["compacted"] = compacted
    if summary:
        meta["compact_summary"] = summary
    return fit_event(event)


def watch_gemini_compression(path: str, start: int, pid: int, limit: float) -> tuple[bool, str]:
    """(compressed, summary): read what the CLI records after ``start`` until it decides;
    (False, '') when it exits or ``limit`` seconds pass first."""
    until = time.monotonic() + limit
    offset, pending = start, b""
    while True:
        alive = _process_alive(pid)
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                data = handle.read()
        except OSError:
            data = b""
        offset += len(data)
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            rewritten = record.get("$set")
            messages = rewritten.get("messages") if isinstance(rewritten, dict) else None
            if isinstance(messages, list):
                return True, _gemini_summary(messages)
            if record.get("type") == "gemini":
                return False, ""
        if not alive or time.monotonic() >= until:
            return False, ""
        time.sleep(0.1)


def _gemini_summary(messages: list) -> str:
    """The summary a compression put first in the history: the first user text after the
    CLI's own session context."""
    for message in messages:
        if not isinstance(message, dict) or message.get("type") != "user":
            continue
        content = message.get("content")
        parts = [{"text": content}] if isinstance(content, str) else content
        texts = [
            p["text"].strip()
            for p in (parts if isinstance(parts, list) else [])
            if isinstance(p, dict) and isinstance(p.get("text"), str) and p["text"].strip()
        ]
        text = "\n".join(texts)
        if text and not text.startswith("<session_context>"):
            return text
    return ""


def _cli_pid() -> int:
    """The CLI that started the hook: the parent, or the parent's parent when the parent
    is the shell the CLI ran the hook's command in (0 when unknown)."""
    pid = int(_noted["parent"])
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as handle:
            if handle.read().strip() not in SHELLS:
                return pid
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return pid


def _process_alive(pid: int) -> bool:
    if pid <= 1:
        return True  # unknown: only the time limit ends the wait
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process: it exists
    return True
