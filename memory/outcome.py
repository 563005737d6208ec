"""How a session's last turn ended: finished, stopped while doing something, or failed.

Real sessions often end on words that announce work instead of reporting it ("Now let me
restart the full build…"): the user left, the context ran out, or the model handed the
turn back early. The next session must hear that the build never ran, not that it was
completed. A turn that an API error ended failed, whatever text came before it.

A pure function of the session's turns in order; the pipeline stores its answer on the
summary, and the summary and the preamble say it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

FINISHED = "finished"
STOPPED = "stopped"
FAILED = "failed"

# The opening of a sentence that announces what comes next. Courtesies that only look
# like it ("let me know", "I'll be glad to…") are left out below.
_INTENTION = re.compile(
    r"^\W*(?:(?:now|next|then|ok(?:ay)?|alright|great|good|perfect|first|so)[,!.]?\s+)*"
    r"(?:let me|let's|let us|i'll|i will|i'm going to|i am going to|going to|i need to|"
    r"we need to|i should|time to|i can now)\b"
    r"|^\W*(?:接下来|下一步|现在让我|让我|我来|我将|我会|次に|これから|続いて)",
    re.IGNORECASE,
)
_COURTESY = re.compile(
    r"\b(?:let me know|i'?ll be (?:glad|happy)|i will be (?:glad|happy)|i'?ll wait)\b",
    re.IGNORECASE,
)
_SENTENCES = re.compile(r"(?<=[.!?])\s+|(?<=[。\uff01\uff1f])|\n+")
DETAIL_LIMIT = 240


@dataclass(frozen=True)
class Outcome:
    """The last turn's end: ``state`` (finished, stopped, failed; empty when the session
    had no turn) and what it was doing or what failed."""

    state: str = ""
    detail: str = ""


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCES.split(text or "") if s and s.strip()]


def is_intention(sentence: str) -> bool:
    """Whether a sentence announces work rather than reports it."""
    sentence = sentence.strip()
    if not sentence or _COURTESY.search(sentence):
        return False
    return bool(_INTENTION.match(sentence)) or (
        sentence.endswith(":") and bool(re.match(r"(?i)^\W*(?:now|next|first|then)\b", sentence))
    )


def _clip(text: str, limit: int = DETAIL_LIMIT) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[: limit - 1].rsplit(" ", 1)[0] + "…"


def judge_final(final: str) -> Outcome:
    """A turn's outcome from its final message: stopped when its last sentence is an
    intention (a question back to the user is an answer), else finished."""
    said = sentences(final)
    if not said:
        return Outcome(FINISHED, "")
    last = said[-1]
    if last.endswith(("?", "\uff1f")):
        return Outcome(FINISHED, "")
    if is_intention(last):
        return Outcome(STOPPED, _clip(last))
    return Outcome(FINISHED, "")


def failure_detail(facts: dict[str, Any]) -> str:
    """ "API error: overloaded (HTTP 529)" from what the gateway said of the error."""
    error = str(facts.get("error_type") or facts.get("error") or "").strip()
    if error.endswith("_error") and error != "api_error":
        error = error[: -len("_error")]
    status = facts.get("error_status")
    words = error.replace("_", " ") if error and error != "unknown" else "an error"
    if isinstance(status, int) and not isinstance(status, bool):
        words += f" (HTTP {status})"
    return _clip(f"API error: {words}")


def last_outcome(steps: Iterable[tuple[str, dict[str, Any]]]) -> Outcome:
    """The outcome of a session's last turn from its steps in order: ``("prompt",
    facts)``, ``("turn", facts)`` (a turn's end) and ``("end", facts)`` (the session's
    end). A prompt no turn answered is a turn that stopped, unless the end says the turn
    failed or was interrupted: the end's final words may be an earlier turn's."""
    outcome = Outcome()
    answered = True
    last_prompt = ""
    for kind, facts in steps:
        if kind == "prompt":
            answered = False
            last_prompt = str(facts.get("text") or "")
            continue
        if facts.get("subagent"):
            continue  # a subagent's end is no turn of the session
        if kind == "end" and (answered or not (facts.get("failed") or facts.get("interrupted"))):
            continue
        if facts.get("failed"):
            outcome = Outcome(FAILED, failure_detail(facts))
        elif facts.get("interrupted"):
            outcome = Outcome(STOPPED, "interrupted by the user")
        elif facts.get("final_message"):
            outcome = judge_final(str(facts["final_message"]))
        elif kind == "turn":
            outcome = Outcome(FINISHED, "")
        else:
            continue
        answered = True
    if not answered:
        prompt = _clip(last_prompt, 120)
        return Outcome(STOPPED, f"no answer to: {prompt}" if prompt else "no answer")
    return outcome
