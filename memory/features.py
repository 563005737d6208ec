"""Session features for scoring: hot topics, active projects and pending tasks.

Pure functions over text; the pipeline feeds them a session's prompts, tool inputs,
final messages, reasoning and the agent's pins.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

HOT_TOPIC_COUNT = 20

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*(?:[-'][A-Za-z0-9_]+)*")
_HEXISH = re.compile(r"^(?:[0-9a-f]{7,}|[a-z]{0,2}\d+[a-z\d]*)$")

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


# A redaction marker, ``[REDACTED:aws_access_key]``: its words say what was hidden, not what
# a session was about, so they never count as keywords.
_REDACTION_MARKER = re.compile(r"\[REDACTED:[A-Za-z0-9_.-]*\]")


def without_markers(text: str) -> str:
    """``text`` with its redaction markers blanked out."""
    return _REDACTION_MARKER.sub(" ", text) if "[REDACTED:" in text else text


def keywords(texts: Iterable[str]) -> Counter[str]:
    """Word counts without stop words, numbers, hex-like tokens or redaction markers."""
    counts: Counter[str] = Counter()
    for text in texts:
        if not text:
            continue
        for match in _WORD.finditer(without_markers(text)):
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


def jaccard(a: AbstractSet[str], b: AbstractSet[str]) -> float:
    """Shared over all: len(a & b) / len(a | b), 0 when either is empty; the union is counted,
    never built (continuity scores a few hundred candidates per request)."""
    if not a or not b:
        return 0.0
    common = len(a & b)
    return common / (len(a) + len(b) - common)


# --- pending tasks -----------------------------------------------------------------------

_TASK_ID = re.compile(r"\b(task-\d{1,9})\b", re.IGNORECASE)
_MARKER = re.compile(r"(?:\bTODO\b|\bFIXME\b|\[TASK\]|\bin[- ]progress\b|\bincomplete\b)[:\s]*")
_DONE = re.compile(
    r"\b(?:done|completed?|finished|closed|merged|resolved|shipped)\b", re.IGNORECASE
)
# Words of a sentence that reports a result, for intentions named without a task id.
_RESULT = re.compile(
    r"\b(?:done|completed?|finished|closed|merged|resolved|shipped|fixed|updated|added|"
    r"landed|deployed|implemented|removed|wrote|written|released|bumped|renamed|migrated)\b",
    re.IGNORECASE,
)
# A sentence that states an intention rather than a result, even with a "done" word in it
# ("next: get the fix merged").
_INTENT = re.compile(
    r"^\W*(?:next(?: step)?s?|todo|fixme|remaining|follow[- ]up|then|still|need to|"
    r"we need|i need|should|must|will|later|pending)\b",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s|\n")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?;])\s+|\n+")
# Words of a next step that say it is a next step, not what it is about.
_INTENT_WORDS = frozenset(
    "next step steps todo fixme remaining follow then still need needs should must later "
    "left pending progress incomplete task tasks".split()
)


def stem(word: str) -> str:
    """A crude stem, enough to see "update" in "updated" and "changelog" in "changelogs"."""
    word = word.lower()
    for suffix in ("ing", "ed", "es", "e", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


@functools.lru_cache(maxsize=4096)
def content_stems(text: str) -> frozenset[str]:
    """The stems of a text's content words (no stop words, no intent words, no markers).

    Cached: continuity asks it of the same task texts and sentences again and again."""
    found = set()
    for match in _WORD.finditer(without_markers(text)):
        word = match.group(0).lower().strip("-'")
        if len(word) < 3 or word in STOP_WORDS or word in _INTENT_WORDS or _HEXISH.match(word):
            continue
        found.add(stem(word))
    return frozenset(found)


def states_completion(sentence: str) -> bool:
    """Whether a sentence reports something finished (not an intention to finish it)."""
    return (
        bool(_RESULT.search(sentence))
        and not _INTENT.match(sentence)
        and not _MARKER.search(sentence)
    )


def completion_sentences(texts: Iterable[str]) -> list[str]:
    """The sentences of some texts that report something finished."""
    return [
        sentence.strip()
        for text in texts
        if text
        for sentence in _SENTENCE_SPLIT.split(text)
        if sentence.strip() and states_completion(sentence)
    ]


Completion = tuple[frozenset[str], frozenset[str]]  # (task ids, content stems)


@functools.lru_cache(maxsize=4096)
def task_ids(text: str) -> frozenset[str]:
    """The ``task-NNN`` ids a text names, lowercased (cached, as ``content_stems``)."""
    return frozenset(m.group(1).lower() for m in _TASK_ID.finditer(text))


def without_task_ids(text: str) -> str:
    return _TASK_ID.sub(" ", text)


def completion_facts(sentences: Iterable[str]) -> list[Completion]:
    """What ``superseded`` compares of each sentence reporting a result, computed once."""
    return [
        (
            frozenset(m.group(1).lower() for m in _TASK_ID.finditer(sentence)),
            frozenset(content_stems(sentence)),
        )
        for sentence in sentences
    ]


@functools.lru_cache(maxsize=1024)
def completion_facts_of(text: str) -> tuple[Completion, ...]:
    """``completion_facts`` of a text's sentences reporting a result, cached by the text:
    continuity reads the same candidates' summaries request after request."""
    return tuple(completion_facts(completion_sentences([text])))


def superseded(
    step: str, completions: Iterable[str | Completion], done_ids: Iterable[str] = ()
) -> bool:
    """Whether later evidence finished an intention: a task id it names was said to be
    done, or a later sentence reporting a result covers (nearly) all its content words."""
    ids = {m.group(1).lower() for m in _TASK_ID.finditer(step)}
    if ids and ids & {i.lower() for i in done_ids}:
        return True
    terms = content_stems(_TASK_ID.sub(" ", step))
    needed = max(1, -(-2 * len(terms) // 3))  # at least two thirds, rounded up
    for completion in completions:
        later_ids, stems = (
            completion_facts([completion])[0] if isinstance(completion, str) else completion
        )
        if ids and ids & later_ids:
            return True
        if terms and len(terms & stems) >= needed:
            return True
    return False


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
    "done" or "merged" closes it; a later sentence reporting a result that covers a
    marked sentence's words ("Changelog updated" after "TODO: update the changelog")
    closes that one.
    """
    found: dict[str, PendingTask] = {}
    opened_at: dict[str, int] = {}
    done: set[str] = set()
    completions: list[tuple[int, str]] = []  # (position of its text, sentence)
    for position, (source, text) in enumerate(sources):
        if not text:
            continue
        completions += [(position, sentence) for sentence in completion_sentences([text])]
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
            if key not in found:
                found[key] = PendingTask(key, sentence, source)
                opened_at[key] = position
    for key, position in opened_at.items():
        later = [sentence for at, sentence in completions if at > position]
        if later and superseded(found[key].text, later):
            del found[key]
    return list(found.values()), done
