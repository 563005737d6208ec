"""Session features for scoring: hot topics, active projects and pending tasks.

Pure functions over text; the pipeline feeds them a session's prompts, the values of its
tool inputs, its final messages, the state of its task list and the agent's pins.

Keywords are content words: never JSON keys (tool inputs give their values only), never
identifiers (hex strings, pieces of ids, snake_case names, tokens that mix many digits
into letters) or redaction markers. Chinese and Japanese text, which puts no spaces
between words, gives its runs of Han characters as overlapping pairs (bigrams: a word is
most often two characters, and a pair that crosses two words is rare enough across
sessions to weigh little) and its runs of katakana and Hangul as whole words; kana used
as grammar (hiragana) separates them.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

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


# Runs of the CJK scripts: Han ideographs (with the iteration mark), katakana (with the
# prolonged sound mark) and Hangul syllables; hiragana and CJK punctuation separate them.
_HAN = "\u3005\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_HAN}]+|[\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f]+|[\uac00-\ud7af]+")
_HAN_CHAR = re.compile(f"[{_HAN}]")
# Han characters that are grammar rather than content (particles, pronouns, the copula and
# a few verbs of request): they break a run, so no pair holds one.
_HAN_GRAMMAR = frozenset(
    "的了是在和与及或把被给对从向我你他她它们这那个也都就要会能吗呢吧啊请帮再还又很"
)
# Pairs that say how to do work rather than what it is about.
_CJK_STOP = frozenset(
    "继续 处理 问题 一下 可以 需要 进行 现在 然后 已经 没有 什么 怎么 如何 一些 其他 "
    "以及 因为 所以 确认 対応 お願 下さ 場合 機能 修正".split()
)


_HAN_BREAK = re.compile(
    "|".join(sorted(_CJK_STOP, key=len, reverse=True)) + f"|[{''.join(_HAN_GRAMMAR)}]"
)


def has_cjk(text: str) -> bool:
    """Whether a text holds a run of the CJK scripts."""
    return _CJK_RUN.search(text) is not None


def cjk_words(text: str) -> list[str]:
    """The CJK keywords of a text, in order: bigrams of Han runs (a run of two is itself),
    katakana and Hangul runs whole (two characters or more)."""
    found: list[str] = []
    for match in _CJK_RUN.finditer(text):
        run = match.group(0)
        if not _HAN_CHAR.match(run):
            if len(run) >= 2 and run not in _CJK_STOP:
                found.append(run)
            continue
        for piece in _HAN_BREAK.split(run):
            pairs = (
                [piece] if len(piece) == 2 else [piece[i : i + 2] for i in range(len(piece) - 1)]
            )
            found.extend(pairs)
    return found


def identifier_like(word: str) -> bool:
    """Whether a (lowercased) word is an identifier rather than a content word: a
    snake_case name, a hex string or a piece of a UUID, or a token that mixes several
    digits into letters (``toolu_01ab…``, ``bpxrficyzx9a4t2qe7``)."""
    if "_" in word or _HEXISH.match(word):
        return True
    digits = sum(c.isdigit() for c in word)
    if not digits:
        return False
    if _HEX_PARTS.match(word) and len(word) >= 6:
        return True
    return digits >= 2 and len(word) >= 8


_HEX_PARTS = re.compile(r"^[0-9a-f]+(?:-[0-9a-f]+)*$")


def keywords(texts: Iterable[str]) -> Counter[str]:
    """Word counts without stop words, numbers, identifiers or redaction markers; CJK text
    gives its bigrams and katakana words (``cjk_words``)."""
    counts: Counter[str] = Counter()
    for text in texts:
        if not text:
            continue
        text = without_markers(text)
        for match in _WORD.finditer(text):
            word = match.group(0).lower().strip("-'")
            if len(word) < 3 or len(word) > 40 or word in STOP_WORDS or identifier_like(word):
                continue
            counts[word] += 1
        if not text.isascii():
            counts.update(cjk_words(text))
    return counts


def hot_topics(texts: Iterable[str], limit: int = HOT_TOPIC_COUNT) -> list[str]:
    """The top keywords, most frequent first, ties by first appearance. A CJK pair counts
    only when two of the texts hold it: a pair that straddles two words is rarely said
    twice, a word is."""
    texts = list(texts)
    counts = keywords(texts)
    if any(not t.isascii() for t in texts if t):
        seen: Counter[str] = Counter()
        for text in texts:
            if text and not text.isascii():
                seen.update(set(cjk_words(text)))
        for word in list(counts):
            if not word.isascii() and seen[word] < 2:
                del counts[word]
    return [word for word, _ in counts.most_common(limit)]


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
# Explicit markers of something left to do. Words such as "incomplete" or "in progress"
# describe work ("look for incomplete implementations" is a step of a plan), not a task.
_MARKER = re.compile(r"(?:\bTODO\b|\bFIXME\b|\[TASK\])[:\s]*")
# A sentence that hands on what is left ("Next: ...", "Remaining: ..."): the words after
# the colon are the task.
_HANDOFF = re.compile(
    r"(?:^|(?<=[\s.!?。]))"
    r"(?:next(?: steps?)?|remaining|still to do|left to do|follow[- ]up)\s*:\s*",
    re.IGNORECASE,
)
_DONE = re.compile(
    r"\b(?:done|completed?|finished|closed|merged|resolved|shipped)\b", re.IGNORECASE
)
# Words of a sentence that reports a result, for intentions named without a task id: a
# word of this list anywhere, or a sentence that opens on a verb in the past ("Backfilled
# the statistics", "I moved the job").
_RESULT = re.compile(
    r"\b(?:done|completed?|finished|closed|merged|resolved|shipped|fixed|updated|added|"
    r"landed|deployed|implemented|removed|wrote|written|released|bumped|renamed|migrated)\b"
    r"|^\W*(?:i |we )?(?!(?:need|seed|feed|speed|embed|exceed|proceed)\b)[a-z]{3,}ed\b"
    # Chinese and Japanese: "already", "completed", verbs in the past.
    r"|已经?|完成|修好|改好|了[。\uff0c,.!\uff01]|しました|ました[。]?",
    re.IGNORECASE,
)
# A sentence that states an intention rather than a result, even with a "done" word in it
# ("next: get the fix merged").
_INTENT = re.compile(
    r"^\W*(?:(?:next(?: step)?s?|todo|fixme|remaining|follow[- ]up|then|still|need to|"
    r"we need|i need|should|must|will|later|pending)\b"
    r"|接下来|下一步|还需|还要|待办|次に|これから|残り)",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s|(?<=[。\uff01\uff1f])|\n")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?;])\s+|(?<=[。\uff01\uff1f\uff1b])|\n+")
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
    text = without_markers(text)
    for match in _WORD.finditer(text):
        word = match.group(0).lower().strip("-'")
        if len(word) < 3 or word in STOP_WORDS or word in _INTENT_WORDS or _HEXISH.match(word):
            continue
        found.add(stem(word))
    if not text.isascii():
        found.update(cjk_words(text))
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


def _names_as_words(text: str) -> str:
    """A text with its snake_case names read as words (``RELEASE_NOTES`` as "RELEASE
    NOTES"): a step that names a file is done when a result names what the file holds."""
    return text.replace("_", " ") if "_" in text else text


# Words that say what kind of work a step is, not what it is about. A result that names
# some kind of work and the things a step is about finishes it whatever the verbs:
# "mention the change in RELEASE_NOTES.md" is done when "Release notes updated" is said.
_KIND_OF_WORK = frozenset(
    stem(word)
    for word in "add adds added adding mention change update edit include document describe".split()
)


def two_thirds(terms: AbstractSet[str]) -> int:
    """How many of some terms a result must hold: two thirds, rounded up, at least one."""
    return max(1, -(-2 * len(terms) // 3))


def names_kind_of_work(stems: AbstractSet[str]) -> bool:
    return not stems.isdisjoint(_KIND_OF_WORK)


@functools.lru_cache(maxsize=4096)
def step_terms(step: str) -> tuple[frozenset[str], frozenset[str]]:
    """What ``superseded`` looks for of a step in later results: its content stems (names
    read as words, task ids left out), and, when some of them name the kind of work, the
    others: what it is about (else empty)."""
    terms = content_stems(_names_as_words(without_task_ids(step)))
    about = terms - _KIND_OF_WORK
    return terms, (about if about != terms else frozenset())


def covers(terms: frozenset[str], about: frozenset[str], stems: AbstractSet[str]) -> bool:
    """Whether a result's stems cover a step's ``step_terms``: two thirds of its terms, or,
    when both name a kind of work, two thirds of what the step is about."""
    if terms and len(terms & stems) >= two_thirds(terms):
        return True
    return bool(about) and names_kind_of_work(stems) and len(about & stems) >= two_thirds(about)


def completion_facts(sentences: Iterable[str]) -> list[Completion]:
    """What ``superseded`` compares of each sentence reporting a result, computed once."""
    return [
        (
            frozenset(m.group(1).lower() for m in _TASK_ID.finditer(sentence)),
            content_stems(_names_as_words(sentence)),
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
    done, or a later sentence reporting a result covers its words (``covers``)."""
    ids = {m.group(1).lower() for m in _TASK_ID.finditer(step)}
    if ids and ids & {i.lower() for i in done_ids}:
        return True
    terms, about = step_terms(step)
    for completion in completions:
        later_ids, stems = (
            completion_facts([completion])[0] if isinstance(completion, str) else completion
        )
        if ids and ids & later_ids:
            return True
        if covers(terms, about, stems):
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


# Text that is not prose: fenced code, and lines of logs or output (a stack frame, a line
# that starts with a timestamp or a shell prompt, npm's errors). A TODO in pasted code is
# the code's, not the user's; so is one on a line of code that says it is a comment.
_FENCE = re.compile(r"```.*?(?:```|$)", re.S)
_LOG_LINE = re.compile(
    r"^\s*(?:\$ |> |at |File \"|\d{4}-\d\d-\d\d[T ]\d|npm (?:ERR|WARN)|Traceback \()"
)
_COMMENT_LINE = re.compile(r"\s*(?://|#|/\*|\*|--|<!--)")


def prose(text: str) -> str:
    """A text without its fenced code and its lines of logs or output."""
    if "```" in text:
        text = _FENCE.sub("\n", text)
    return "\n".join(line for line in text.split("\n") if not _LOG_LINE.match(line))


def _in_comment(text: str, at: int) -> bool:
    """Whether position ``at`` of a text is on a line that opens as a code comment."""
    start = text.rfind("\n", 0, at) + 1
    return bool(_COMMENT_LINE.match(text, start))


# --- the session's own task list -----------------------------------------------------

# Statuses of a task-list item that mean it is over.
_CLOSED_STATUSES = frozenset({"completed", "done", "deleted", "cancelled", "canceled"})


@dataclass(frozen=True)
class ListedTask:
    """An item of the session's task list, in its last state."""

    key: str
    text: str
    status: str

    @property
    def open(self) -> bool:
        return self.status not in _CLOSED_STATUSES


def task_list_state(changes: Iterable[dict[str, Any]]) -> list[ListedTask]:
    """The last state of a session's task list from its changes, in order. A change is
    ``{"op": "replace", "items": [{"text", "status"}]}`` (the whole list written again),
    ``{"op": "create", "id", "text", "status"}`` or ``{"op": "update", "id", "status",
    "text"}`` (one item); ``deleted`` removes an item."""
    items: dict[str, ListedTask] = {}
    for change in changes:
        op = change.get("op")
        if op == "replace":
            items = {}
            for item in change.get("items") or []:
                text = str(item.get("text") or "").strip()
                if text:
                    key = "list:" + text.lower()[:80]
                    items[key] = ListedTask(key, text, str(item.get("status") or "pending"))
        elif op == "create":
            text = str(change.get("text") or "").strip()
            key = f"list#{change.get('id') or len(items) + 1}"
            if text:
                items[key] = ListedTask(key, text, str(change.get("status") or "pending"))
        elif op == "update":
            key = f"list#{change.get('id')}"
            current = items.get(key)
            status = str(change.get("status") or (current.status if current else "pending"))
            if status == "deleted":
                items.pop(key, None)
                continue
            text = str(change.get("text") or (current.text if current else "")).strip()
            if text:
                items[key] = ListedTask(key, text, status)
    return list(items.values())


def _covers(text: str, other: str) -> bool:
    """Whether two task texts name the same work: two thirds of the words of either."""
    a, b = content_stems(without_task_ids(text)), content_stems(without_task_ids(other))
    if not a or not b:
        return False
    common = len(a & b)
    return common >= -(-2 * len(a) // 3) or common >= -(-2 * len(b) // 3)


def task_states(
    sources: Iterable[tuple[str, str]], listed: Iterable[ListedTask] = ()
) -> tuple[list[PendingTask], set[str]]:
    """(pending tasks, ids said to be done) from the session's task list (its last state)
    and (source, text) pairs, in order: its pins, prompts and final messages.

    The task list comes first: its open items are pending, its closed items are not.
    Then a ``task-NNN`` id, or a sentence marked TODO / FIXME / [TASK], or the words after
    "Next:" / "Remaining:", in the prose of the texts (not in pasted code or logs). A
    later sentence that names the same task id with a word such as "done" or "merged"
    closes it; a later sentence reporting a result that covers a marked sentence's words
    ("Changelog updated" after "TODO: update the changelog") closes that one, and so does
    a closed item of the task list. A marked sentence that names an open item of the list
    is that item.
    """
    listed = list(listed)
    found: dict[str, PendingTask] = {
        item.key: PendingTask(item.key, item.text, "task_list") for item in listed if item.open
    }
    closed_items = [item.text for item in listed if not item.open]
    open_items = [item.text for item in listed if item.open]
    opened_at: dict[str, int] = {}
    done: set[str] = set()
    completions: list[tuple[int, str]] = []  # (position of its text, sentence)
    for position, (source, raw) in enumerate(sources):
        text = prose(raw) if raw else ""
        if not text.strip():
            continue
        completions += [(position, sentence) for sentence in completion_sentences([text])]
        for match in _TASK_ID.finditer(text):
            if _in_comment(text, match.start()):
                continue
            task_id = match.group(1).lower()
            sentence = _sentence_around(text, match.start(), match.end())
            if _DONE.search(sentence) and not _MARKER.search(sentence):
                found.pop(task_id, None)
                done.add(task_id)
                continue
            done.discard(task_id)
            found.setdefault(task_id, PendingTask(task_id, sentence, source))
        notes = [
            _sentence_around(text, m.start(), m.end())
            for m in _MARKER.finditer(text)
            if not _in_comment(text, m.start())
        ] + [
            text[m.end() : _sentence_end(text, m.end())].strip()
            for m in _HANDOFF.finditer(text)
            if not _in_comment(text, m.start())
        ]
        for sentence in notes:
            if not sentence or _TASK_ID.search(sentence):
                continue  # empty, or already counted under its id
            if any(_covers(sentence, item) for item in open_items + closed_items):
                continue  # an item of the task list, open or closed
            key = "note:" + sentence.lower()[:80]
            if key not in found and not any(_covers(sentence, t.text) for t in found.values()):
                found[key] = PendingTask(key, sentence, source)
                opened_at[key] = position
    for key, position in opened_at.items():
        later = [sentence for at, sentence in completions if at > position]
        if later and superseded(found[key].text, later):
            del found[key]
    return list(found.values()), done


def _sentence_end(text: str, start: int, limit: int = 200) -> int:
    """Where the sentence that goes on at ``start`` ends."""
    match = _SENTENCE_END.search(text, start)
    return min(match.start() if match else len(text), start + limit)


# --- the words of a tool call ------------------------------------------------------------

# Keys of a tool's input whose values say what it did; when one of them names a file, the
# rest (the file's content, the strings an edit replaces) is not what the session is about.
_PATH_KEYS = ("file_path", "filePath", "path", "notebook_path")
# Values that are states, modes and ids, not words about the work.
_SKIP_KEYS = frozenset(
    "status activeForm active_form priority id taskId task_id subagent_type model mode type "
    "run_in_background isAsync is_error timeout offset limit old_string new_string replace_all "
    "content_hash signature".split()
)


def tool_words(value: Any, limit: int = 2000) -> str:
    """The words a tool call's input holds: its string values, never its keys, without
    states, ids and file contents (for a file, its path and what is searched)."""
    if isinstance(value, str):
        return value[:limit]
    if not isinstance(value, (dict, list)):
        return ""
    if isinstance(value, dict) and any(k in value for k in _PATH_KEYS):
        keep = [
            str(value[k]) for k in (*_PATH_KEYS, "pattern", "query", "description") if k in value
        ]
        return " ".join(keep)[:limit]
    out: list[str] = []
    size = 0
    stack: list[Any] = [value]
    while stack and size < limit:
        item = stack.pop(0)
        if isinstance(item, dict):
            stack.extend(
                v
                for k, v in item.items()
                if k not in _SKIP_KEYS and not str(k).endswith(("_id", "Id"))
            )
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            out.append(item)
            size += len(item)
    return " ".join(out)[:limit]
