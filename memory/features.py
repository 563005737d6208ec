"""Session features for scoring: hot topics, active projects and pending tasks.

Pure functions over text; the pipeline feeds them a session's prompts, tool inputs,
final messages, reasoning and the agent's pins.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

HOT_TOPIC_COUNT = 20

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*(?:[-'][A-Za-z0-9_]+)*")
_HEXISH = re.compile(r"^(?:[0-9a-f]{7,}|[a-z]{0,2}\d+[a-z\d]*)$")
# Redaction's markers ([REDACTED:aws_access_key]) say a secret was there: not a topic.
_REDACTION_MARKER = re.compile(r"\[REDACTED:[^\]]*\]")

_STOP_WORDS_TEXT = """
    a about above after again against all also am an and any are aren as at be because
    been before being below between both but by can cannot could did didn do does doesn
    doing don down during each else ever few for from further get got had has hasn have
    having he her here hers herself him himself his how however i if in into is isn it
    its itself just let like ll me might more most must my myself need no nor not now of
    off on once only or other our ours ourselves out over own please re same shall she
    should so some such than that the their theirs them themselves then there these they
    this those through to too under until up upon us use used using very via was wasn we
    were weren what when where which while who whom why will with won would yes yet you
    your yours yourself yourselves one two three next new make made see look looks done
    okay ok sure thing things way want think know now still well really much many every
    way maybe something anything nothing true false none null self def return import
    from class function const var let str int http https www com org file files line
    lines code run runs running test tests
"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())


def keywords(texts: Iterable[str]) -> Counter[str]:
    """Word counts without stop words, numbers or hex-like tokens."""
    counts: Counter[str] = Counter()
    for text in texts:
        if not text:
            continue
        if "[REDACTED:" in text:
            text = _REDACTION_MARKER.sub(" ", text)
        for match in _WORD.finditer(text):
            word = match.group(0).lower().strip("-'")
            if len(word) < 3 or len(word) > 40 or word in STOP_WORDS or _HEXISH.match(word):
                continue
            counts[word] += 1
    return counts


def hot_topics(texts: Iterable[str], limit: int = HOT_TOPIC_COUNT) -> list[str]:
    """The top keywords, most frequent first, ties by first appearance."""
    return [word for word, _ in keywords(texts).most_common(limit)]


def keyword_set(text: str) -> set[str]:
    """The keywords of one text (for a new session's first prompt)."""
    return set(keywords([text]))


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    first, second = set(a), set(b)
    if not first or not second:
        return 0.0
    return len(first & second) / len(first | second)


# --- pending tasks -----------------------------------------------------------------------

_TASK_ID = re.compile(r"\b(task-\d{1,9})\b", re.IGNORECASE)
_MARKER = re.compile(r"(?:\bTODO\b|\bFIXME\b|\[TASK\]|\bin[- ]progress\b|\bincomplete\b)[:\s]*")
_DONE = re.compile(
    r"\b(?:done|completed?|finished|closed|merged|resolved|shipped)\b", re.IGNORECASE
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s|\n")


@dataclass(frozen=True)
class PendingTask:
    """A task a session left open."""

    task_id: str
    text: str
    source: str

    def as_dict(self) -> dict[str, str]:
        return {"id": self.task_id, "text": self.text, "source": self.source}


def _sentence_around(text: str, start: int, end: int, limit: int = 200) -> str:
    left = max((m.end() for m in _SENTENCE_END.finditer(text, 0, start)), default=0)
    right_match = _SENTENCE_END.search(text, end)
    right = right_match.start() if right_match else len(text)
    return text[left:right].strip()[:limit]


def task_states(sources: Iterable[tuple[str, str]]) -> tuple[list[PendingTask], set[str]]:
    """(pending tasks, ids said to be done) from (source, text) pairs, in order.

    A task is a ``task-NNN`` id, or a sentence marked TODO / [TASK] / in-progress /
    incomplete. A later sentence that names the same task id with a word such as
    "done" or "merged" closes it.
    """
    found: dict[str, PendingTask] = {}
    done: set[str] = set()
    for source, text in sources:
        if not text:
            continue
        for match in _TASK_ID.finditer(text):
            task_id = match.group(1).lower()
            sentence = _sentence_around(text, match.start(), match.end())
            if _DONE.search(sentence) and not _MARKER.search(sentence):
                found.pop(task_id, None)
                done.add(task_id)
                continue
            done.discard(task_id)
            found.setdefault(task_id, PendingTask(task_id, sentence, source))
        for match in _MARKER.finditer(text):
            sentence = _sentence_around(text, match.start(), match.end())
            if _TASK_ID.search(sentence):
                continue  # already counted under its id
            key = "note:" + sentence.lower()[:80]
            found.setdefault(key, PendingTask(key, sentence, source))
    return list(found.values()), done


def pending_tasks(sources: Iterable[tuple[str, str]]) -> list[PendingTask]:
    """The tasks still open in (source, text) pairs."""
    return task_states(sources)[0]


def project_name(path_or_remote: str) -> str:
    """A short display name for a project path or remote."""
    return path_or_remote.rstrip("/").rsplit("/", 1)[-1] if path_or_remote else ""
