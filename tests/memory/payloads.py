"""Gateway payloads for the memory tests, built from tests/fixtures the way the
gateways' clients send them (the model rows are in tests/factories.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.conftest import FIXTURES, claude_code_hooks, read_jsonl

# --- gateway payloads -----------------------------------------------------------------------

BASE_TIME = datetime(2026, 11, 20, 18, 0, tzinfo=UTC)
# The hook client keeps this many trailing characters of the transcript's thinking.
CLIENT_TAIL_CHARS = 2000
TRANSCRIPT_HOOKS = {"Stop", "SubagentStop", "SessionEnd"}


def transcript(scenario: str) -> list[dict[str, Any]]:
    return read_jsonl(FIXTURES / "claude-code" / scenario / "transcript.jsonl")


def _assistant_messages(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Assistant content blocks per message, split lines joined on ``message.id``."""
    order: list[str] = []
    blocks: dict[str, list[dict[str, Any]]] = {}
    for index, record in enumerate(records):
        if record.get("type") != "assistant":
            continue
        message = record["message"]
        key = message.get("id") or record.get("uuid") or f"line-{index}"
        if key not in blocks:
            order.append(key)
            blocks[key] = []
        content = message.get("content")
        blocks[key].extend(
            [{"type": "text", "text": content}] if isinstance(content, str) else content
        )
    return [blocks[key] for key in order]


def _cut_at_word(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[-limit:]
    if not text[-limit - 1].isspace() and " " in cut:
        cut = cut[cut.index(" ") :]
    return cut.strip()


def transcript_as_of(records: list[dict[str, Any]], final_text: str | None) -> tuple[str, str]:
    """(final assistant text, thinking tail) of a transcript as it stood when the assistant
    had just written ``final_text`` (the whole transcript when None)."""
    upto = len(records)
    if final_text is not None:
        for index, record in enumerate(records):
            content = record.get("message", {}).get("content")
            if record.get("type") == "assistant" and isinstance(content, list):
                texts = [b.get("text") for b in content if b.get("type") == "text"]
                if final_text in texts:
                    upto = index + 1
                    break
        else:
            raise AssertionError(f"no assistant text {final_text!r} in the transcript")
    messages = _assistant_messages(records[:upto])
    final = ""
    for blocks in reversed(messages):
        texts = [b["text"].strip() for b in blocks if b.get("type") == "text" and b["text"]]
        if texts:
            final = "\n\n".join(texts)
            break
    # The thinking of the latest assistant messages, newest first, until the client's
    # character budget is used up; then back in reading order.
    thoughts: list[str] = []
    collected = 0
    for blocks in reversed(messages):
        for block in reversed(blocks):
            if block.get("type") == "thinking" and block.get("thinking", "").strip():
                thoughts.append(block["thinking"].strip())
                collected += len(block["thinking"])
        if collected > CLIENT_TAIL_CHARS:
            break
    return final, _cut_at_word("\n\n".join(reversed(thoughts)), CLIENT_TAIL_CHARS)


def claude_code_as_sent(scenario: str, *, prefix: str = "") -> list[dict[str, Any]]:
    """A Claude Code scenario as the hook client posts it: every line with its
    ``sessionhub`` block (event id, time) and, at Stop and SessionEnd, the final message
    and reasoning tail read from the transcript."""
    records = transcript(scenario)
    lines = []
    for index, line in enumerate(claude_code_hooks(scenario)):
        extra: dict[str, Any] = {
            "event_id": f"{prefix}{scenario}-{index}",
            "occurred_at": (BASE_TIME + timedelta(seconds=30 * index)).isoformat(),
        }
        hook = line["hook_event_name"]
        if hook in TRANSCRIPT_HOOKS:
            final, tail = transcript_as_of(records, line.get("last_assistant_message"))
            if line.get("last_assistant_message"):
                final = line["last_assistant_message"]
            if final:
                extra["final_message"] = final
            if tail:
                extra["reasoning_tail"] = tail
        lines.append({**line, "sessionhub": extra})
    return lines


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
