"""Session summaries: an extractive summarizer that needs no model, and an optional
OpenAI-compatible chat endpoint whose every failure falls back to it."""

from __future__ import annotations

import http.client
import json
import logging
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from .features import completion_sentences, superseded

logger = logging.getLogger(__name__)

SECTIONS = ("request", "investigated", "learned", "completed", "next_steps")
SECTION_LIMIT = 1200

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(])|\n+")
_NEXT = re.compile(r"^(?:next(?: step)?s?\b|todo\b|remaining\b|follow[- ]up\b|then\b)", re.I)
_LEARNED = re.compile(
    r"\b(?:root cause|because|the (?:issue|problem|bug|fix) (?:is|was)|turns out|found that|"
    r"learned|realized|the cause)\b",
    re.I,
)


@dataclass
class SummaryInput:
    """What a summary is built from, all already redacted."""

    prompts: list[str] = field(default_factory=list)
    observations: list[tuple[str, str]] = field(default_factory=list)  # (tool, input digest)
    reasoning: list[str] = field(default_factory=list)
    final_message: str = ""
    pending: list[str] = field(default_factory=list)


@dataclass
class SummaryDraft:
    """Five sections and how they were made."""

    request: str = ""
    investigated: str = ""
    learned: str = ""
    completed: str = ""
    next_steps: str = ""
    method: str = "extractive"
    fallback_reason: str = ""
    llm_tokens: int = 0

    def sections(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in SECTIONS}


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text or "") if s and s.strip()]


def _clip(text: str, limit: int = SECTION_LIMIT) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut + " …"


def summarize_extractive(data: SummaryInput) -> SummaryDraft:
    """A summary from the session's own words: no model, deterministic."""
    request = " / ".join(p.strip() for p in data.prompts[:3] if p.strip())

    seen: set[str] = set()
    steps: list[str] = []
    for tool, digest in data.observations:
        line = f"{tool} {digest}".strip() if digest else tool
        if line not in seen:
            seen.add(line)
            steps.append(line)
    investigated = "; ".join(steps[:12])
    if len(steps) > 12:
        investigated += f"; and {len(steps) - 12} more"

    final_sentences = _sentences(data.final_message)
    completed = " ".join(s for s in final_sentences if not _NEXT.match(s))
    next_steps = [s for s in final_sentences if _NEXT.match(s)]

    # An intention is only a next step if nothing later finished it: the sentences after
    # it in its turn, the later turns' reasoning and the final message are the evidence.
    final_done = completion_sentences([data.final_message])
    learned: list[str] = []
    for index, text in enumerate(data.reasoning):
        sentences = _sentences(text)
        later_turns = completion_sentences(data.reasoning[index + 1 :]) + final_done
        for position, sentence in enumerate(sentences):
            if _NEXT.match(sentence):
                later = completion_sentences(sentences[position + 1 :]) + later_turns
                if sentence not in next_steps and not superseded(sentence, later):
                    next_steps.append(sentence)
            elif _LEARNED.search(sentence) and sentence not in learned:
                learned.append(sentence)
    for task in data.pending:
        if all(task not in s for s in next_steps) and not superseded(task, final_done):
            next_steps.append(task)

    return SummaryDraft(
        request=_clip(request),
        investigated=_clip(investigated),
        learned=_clip(" ".join(learned[-4:])),
        completed=_clip(completed),
        next_steps=_clip(" ".join(next_steps)),
    )


# --- the LLM path ------------------------------------------------------------------------


class LlmUnavailable(Exception):
    """The configured endpoint failed, timed out or answered something unusable.

    ``tokens`` is what the call cost anyway (an unusable answer is still billed), so the
    daily budget counts it.
    """

    def __init__(self, message: str, tokens: int = 0) -> None:
        super().__init__(message)
        self.tokens = tokens


# Rough characters per token, to charge the budget when an endpoint reports no usage.
_CHARS_PER_TOKEN = 4


def _tokens_used(answer: Any, sent: bytes, received: bytes) -> int:
    """Tokens the answer says it cost; estimated from the sizes when it says nothing usable
    (some local servers omit ``usage``), so the budget is never bypassed."""
    usage = answer.get("usage") if isinstance(answer, dict) else None
    total = usage.get("total_tokens") if isinstance(usage, dict) else None
    if isinstance(total, int) and not isinstance(total, bool) and total > 0:
        return total
    return max(1, (len(sent) + len(received)) // _CHARS_PER_TOKEN)


_PROMPT = (
    "You summarize one AI coding-agent session for the team's memory. Answer with a JSON "
    "object only, with the string keys request, investigated, learned, completed and "
    "next_steps, each at most three sentences. 'completed' must reflect the agent's final "
    "message. Never include secrets."
)


def llm_config() -> dict[str, Any] | None:
    config = settings.SESSIONHUB.get("LLM") or {}
    if not config.get("URL") or not config.get("MODEL"):
        return None
    return config


def summarize_llm(data: SummaryInput, config: dict[str, Any]) -> SummaryDraft:
    """Ask an OpenAI-compatible ``/chat/completions`` endpoint; LlmUnavailable on any failure."""
    request = _llm_request(data, config)
    sent = request.data if isinstance(request.data, bytes) else b""
    try:
        with urllib.request.urlopen(request, timeout=float(config.get("TIMEOUT", 20))) as response:  # noqa: S310
            received = response.read()
    # HTTPException: a reply that is not HTTP at all, or cut short (IncompleteRead).
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        raise LlmUnavailable(f"{exc.__class__.__name__}: {exc}"[:280]) from exc
    try:
        answer = json.loads(received.decode("utf-8"))
    except ValueError as exc:  # not JSON (an HTML error page, a proxy's text...)
        raise LlmUnavailable(f"unusable answer: {exc}"[:280]) from exc
    tokens = _tokens_used(answer, sent, received)
    try:
        sections = _answer_sections(answer)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise LlmUnavailable(f"unusable answer: {exc}"[:280], tokens=tokens) from exc
    draft = SummaryDraft(method=str(config["MODEL"])[:200], llm_tokens=tokens)
    for name in SECTIONS:
        value = sections.get(name)
        if isinstance(value, list):
            value = " ".join(str(v) for v in value if v is not None)
        elif value is None:
            value = ""
        setattr(draft, name, _clip(str(value)))
    if not draft.completed and data.final_message:
        draft.completed = _clip(data.final_message)
    return draft


def _llm_request(data: SummaryInput, config: dict[str, Any]) -> urllib.request.Request:
    material = {
        "prompts": data.prompts[:10],
        "tool_uses": [f"{t} {d}" for t, d in data.observations[:40]],
        "reasoning": data.reasoning[-5:],
        "final_message": data.final_message,
        "pending_tasks": data.pending,
    }
    body = {
        "model": config["MODEL"],
        "messages": [
            {"role": "system", "content": _PROMPT},
            {"role": "user", "content": json.dumps(material, ensure_ascii=False)},
        ],
        "temperature": 0,
        "max_tokens": int(config.get("MAX_TOKENS", 600)),
    }
    url = config["URL"].rstrip("/") + "/chat/completions"
    return urllib.request.Request(  # noqa: S310 - the URL is the operator's own setting
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"}
        | ({"Authorization": f"Bearer {config['API_KEY']}"} if config.get("API_KEY") else {}),
        method="POST",
    )


def _answer_sections(answer: Any) -> dict[str, Any]:
    """The summary's sections from a chat completion. Checked step by step: any JSON can
    come back, and no shape of it may escape as anything but the errors the caller turns
    into LlmUnavailable (the summarizer falls back on exactly that)."""
    content = answer["choices"][0]["message"]["content"]
    if not isinstance(content, str):
        raise TypeError(f"content is {type(content).__name__}, not text")
    content = content.strip()
    if content.startswith("```"):
        content = content.strip("`").removeprefix("json").strip()
    sections = json.loads(content)
    if not isinstance(sections, dict):
        raise TypeError("not an object")
    return sections
