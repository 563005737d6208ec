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

from .features import completion_sentences, prose, superseded
from .outcome import is_intention

logger = logging.getLogger(__name__)

SECTIONS = ("request", "investigated", "learned", "completed", "next_steps")
SECTION_LIMIT = 1200

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(])|(?<=[。\uff01\uff1f])|\n+")
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
    # The final messages of the session's turns, in order (the last is final_message).
    finals: list[str] = field(default_factory=list)
    # Items of the session's own task list that it closed.
    done_tasks: list[str] = field(default_factory=list)


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


REQUEST_PROMPTS = 3
PROMPT_LIMIT = 300


def keep_last_sentences(sentences: list[str], limit: int = SECTION_LIMIT) -> str:
    """The sentences joined; when they are too long, the first and as many of the last
    as fit: a long report opens with what it is about and ends with what was done."""
    text = " ".join(sentences)
    if len(text) <= limit or len(sentences) < 2:
        return text
    first = sentences[0] if len(sentences[0]) < limit // 4 else ""
    kept: list[str] = []
    room = limit - len(first) - 4
    for sentence in reversed(sentences[1:]):
        if len(sentence) + 1 > room:
            break
        kept.insert(0, sentence)
        room -= len(sentence) + 1
    return " … ".join(part for part in (first, " ".join(kept)) if part)


def request_of(prompts: list[str]) -> str:
    """What the user asked: the opening prompts in their own words, each without what was
    pasted into it (code, logs) and clipped on a word, joined by " / "."""
    parts = []
    for prompt in prompts[:REQUEST_PROMPTS]:
        words = " ".join(prose(prompt).split())
        if not words:
            continue
        if len(words) > PROMPT_LIMIT:
            words = words[:PROMPT_LIMIT].rsplit(" ", 1)[0] + " …"
        parts.append(words)
    return " / ".join(parts)


def _complete_sentence(sentence: str) -> bool:
    """A sentence that says something whole: not a lead-in to a list (ending with ":")."""
    return not sentence.rstrip().endswith((":", "\uff1a", ",", "-", "—"))


def summarize_extractive(data: SummaryInput) -> SummaryDraft:
    """A summary from the session's own words: no model, deterministic.

    The request is what the user typed (not what they pasted); what was completed comes
    from the final message (never a sentence that announces work, "Now let me…") and the
    items the session's task list closed; what was learned, from the final messages'
    complete sentences that state a finding; next steps, from the final message's hand-offs
    ("Next: …") and the tasks left open. The model's thinking is no source: it holds plans
    and half-sentences, not what happened."""
    request = request_of(data.prompts)

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

    final_sentences = _sentences(prose(data.final_message))
    done_words = [
        s
        for s in final_sentences
        if not _NEXT.match(s) and not is_intention(s) and _complete_sentence(s)
    ]
    closed = [t for t in data.done_tasks if not superseded(t, completion_sentences(done_words))]
    completed = keep_last_sentences(done_words)
    if closed:
        # One sentence that reports them all done: evidence, for a later preamble, that
        # each of them is finished.
        completed = (
            (completed + " " if completed else "") + "Tasks done: " + ", ".join(closed) + "."
        )

    next_steps = [s for s in final_sentences if _NEXT.match(s)]

    final_done = completion_sentences([data.final_message])
    learned: list[str] = []
    for text in data.finals or [data.final_message]:
        for sentence in _sentences(prose(text)):
            if (
                _LEARNED.search(sentence)
                and _complete_sentence(sentence)
                and not is_intention(sentence)
                and sentence not in learned
            ):
                learned.append(sentence)
    for task in data.pending:
        if all(task not in s for s in next_steps) and not superseded(task, final_done):
            next_steps.append(task)

    return SummaryDraft(
        request=_clip(request),
        investigated=_clip(investigated),
        learned=_clip(" ".join(learned[-4:])),
        completed=_clip(completed),
        next_steps=_clip(" ".join(_as_sentence(step) for step in next_steps)),
    )


def _as_sentence(text: str) -> str:
    """A step that ends as a sentence does, so that the steps read (and split) one by one."""
    text = text.strip()
    return text if text.endswith((".", "!", "?", "\u3002", "\uff01", "\uff1f")) else text + "."


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
