"""Reasoning tails: the last words of an agent's thinking when a turn ends.

Reasoning comes from structured thinking blocks first (Claude Code transcripts, pi-ai
``thinking`` blocks); failing those, from text wrapped in ``<think>``-style tags. The
visible answer is never mixed in: tags are stripped from it to give the final message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

_THINK_TAG = re.compile(
    r"<(think|thinking|thought|antthinking)\b[^>]*>(.*?)(?:</\1\s*>|\Z)", re.IGNORECASE | re.DOTALL
)
_WORD = re.compile(r"\S+")


def split_think_tags(text: str) -> tuple[str, str]:
    """(reasoning inside think-style tags, visible text without them)."""
    reasoning = [m.group(2).strip() for m in _THINK_TAG.finditer(text)]
    visible = _THINK_TAG.sub("", text).strip()
    return "\n".join(r for r in reasoning if r), visible


def tail_words(text: str, max_tokens: int) -> str:
    """The last ``max_tokens`` whitespace-separated words: always cut on a word boundary.

    Words stand in for tokens: close enough for a ~100-token budget and needs no
    tokenizer on the hot path. The text is the reasoning as stored, redacted whole at
    ingestion before any cut, so a cut here cannot part a secret from the name that made
    it recognisable (the hook client's own 2,000-character cut avoids that itself).
    """
    if max_tokens <= 0 or not text:
        return ""
    words = _WORD.findall(text)
    return " ".join(words[-max_tokens:])


def _blocks(content: Any) -> Iterable[dict[str, Any]]:
    if isinstance(content, str):
        yield {"type": "text", "text": content}
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, dict):
                yield block
            elif isinstance(block, str):
                yield {"type": "text", "text": block}


def reasoning_and_final(messages: Iterable[Any]) -> tuple[str, str]:
    """From a pi-ai/Anthropic-style message list: (reasoning text, final assistant text).

    Each assistant message gives its reasoning from its thinking blocks or, when it has
    none, from think-style tags inside its text; the pieces are joined in order. The final
    message is the visible text of the last assistant message that has any.
    """
    pieces: list[str] = []
    final = ""
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        thinking: list[str] = []
        tagged: list[str] = []
        visible_parts: list[str] = []
        for block in _blocks(message.get("content")):
            kind = block.get("type")
            if kind in ("thinking", "reasoning"):
                value = block.get("thinking") or block.get("text") or ""
                if isinstance(value, str) and value.strip():
                    thinking.append(value.strip())
            elif kind == "text" and isinstance(block.get("text"), str):
                reasoning, visible = split_think_tags(block["text"])
                if reasoning:
                    tagged.append(reasoning)
                if visible:
                    visible_parts.append(visible)
        pieces.extend(thinking or tagged)
        if visible_parts:
            final = "\n".join(visible_parts)
    return "\n".join(pieces), final


def reasoning_from_text(text: str) -> tuple[str, str]:
    """For a single assistant message given as text: (tagged reasoning, visible text)."""
    return split_think_tags(text or "")
