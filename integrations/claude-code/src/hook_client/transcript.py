"""Reading Claude Code's transcript: the final message and reasoning tail of a
turn, its model, how it ended, its token usage, and the session it continues.
"""

from __future__ import annotations

import json
import os

from .constants import TAIL_CHARS, TRANSCRIPT_WINDOW, TRANSCRIPT_WINDOW_MAX

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator


def read_transcript(path: str, sidechain: bool | None = False) -> tuple[str | None, str | None]:
    """Return (final assistant text, reasoning tail) from a Claude Code transcript.

    Only the end of the file is read. ``sidechain`` selects main-conversation lines
    (False), subagent lines (True) or all of them (None).
    """
    try:
        size = os.path.getsize(path)
    except (OSError, TypeError, ValueError):
        return None, None
    window = TRANSCRIPT_WINDOW
    while True:
        records, truncated = _read_tail_records(path, size, window)
        final, tail = _summarise(records, sidechain)
        if (final and tail) or not truncated or window >= TRANSCRIPT_WINDOW_MAX:
            return final, tail
        window *= 4  # a very long last message: look further back, within a cap


def _read_tail_records(
    path: str, size: int, window: int, kinds: tuple[str, ...] = ("assistant",)
) -> tuple[list[dict], bool]:
    """Parse the whole JSON lines of these record types found in the last `window` bytes
    of the file."""
    start = max(0, size - window)
    with open(path, "rb") as handle:
        handle.seek(start)
        data = handle.read(size - start)
    if start > 0:
        newline = data.find(b"\n")
        data = data[newline + 1 :] if newline >= 0 else b""
    records = []
    marks = [f'"{kind}"'.encode() for kind in kinds]
    for line in data.split(b"\n"):
        # Cheap filter: only lines of these types matter, and a half-written last line
        # fails to parse and is skipped.
        if not any(mark in line for mark in marks):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("type") in kinds:
            records.append(record)
    return records, start > 0


def _summarise(records: list[dict], sidechain: bool | None) -> tuple[str | None, str | None]:
    """Join split messages by id, then pick the last text and the thinking tail."""
    order: list[str] = []
    blocks_by_id: dict[str, list[dict]] = {}
    for index, record in enumerate(records):
        if sidechain is not None and bool(record.get("isSidechain")) != sidechain:
            continue
        message = record.get("message")
        if not isinstance(message, dict) or _api_error(record, message):
            continue
        content = message.get("content")
        if isinstance(content, str):
            blocks = [{"type": "text", "text": content}]
        elif isinstance(content, list):
            blocks = [b for b in content if isinstance(b, dict)]
        else:
            continue
        key = str(message.get("id") or record.get("uuid") or f"line-{index}")
        if key not in blocks_by_id:
            blocks_by_id[key] = []
            order.append(key)
        blocks_by_id[key].extend(blocks)

    final = None
    for key in reversed(order):
        texts = [
            b["text"]
            for b in blocks_by_id[key]
            if b.get("type") == "text" and isinstance(b.get("text"), str) and b["text"].strip()
        ]
        if texts:
            final = "\n\n".join(t.strip() for t in texts)
            break

    thoughts: list[str] = []
    collected = 0
    for key in reversed(order):
        for block in reversed(blocks_by_id[key]):
            thought = block.get("thinking") if block.get("type") == "thinking" else None
            if isinstance(thought, str) and thought.strip():
                thoughts.append(thought.strip())
                collected += len(thought)
        if collected > TAIL_CHARS:
            break
    tail = tail_at_word_boundary("\n\n".join(reversed(thoughts)), TAIL_CHARS)
    return final, tail or None


_TAIL_BREAKS = ("\n", ". ", "! ", "? ")
# Words that make a secret nearby recognisable (``password =``, ``Bearer``, ``-----BEGIN``,
# ``docker login -p``...): a cut just after one would keep the secret without them.
_NAMING_WORDS = tuple(
    "pass pwd secret token key auth bearer basic cred begin login discord cookie session".split()
)
TAIL_STRETCH = 4  # a tail may reach back this many times TAIL_CHARS to a paragraph start


def _may_name_a_secret(piece: str) -> bool:
    """Whether a piece of text holds an operator, a quote, a --flag or a naming word."""
    lowered = piece.lower()
    return (
        any(c in piece for c in "=:\"'`")
        or lowered.startswith("-")
        or " -" in lowered
        or any(word in lowered for word in _NAMING_WORDS)
    )


def _api_error(record: dict, message: dict) -> bool:
    """Claude Code's own text for a failed API call ("API Error: ..."): never final words."""
    return bool(record.get("isApiErrorMessage")) or message.get("model") == "<synthetic>"


def api_error_record(path: str) -> dict | None:
    """The newest main-conversation assistant line, when it is Claude Code's text for a
    failed API call (the turn ended with StopFailure); else None."""
    for record in reversed(_transcript_window(path)):
        message = record.get("message")
        if record.get("isSidechain") or not isinstance(message, dict):
            continue
        return record if _api_error(record, message) else None
    return None


def _transcript_window(path: str, kinds: tuple[str, ...] = ("assistant",)) -> list[dict]:
    """The records of these types in the transcript's last TRANSCRIPT_WINDOW bytes; []
    when unreadable."""
    try:
        size = os.path.getsize(path)
        records, _ = _read_tail_records(path, size, TRANSCRIPT_WINDOW, kinds)
    except (OSError, TypeError, ValueError):
        return []
    return records


def transcript_model(path: str) -> str | None:
    """The model of the newest real assistant message (headless sessions name it nowhere
    else)."""
    for record in reversed(_transcript_window(path)):
        message = record.get("message")
        if isinstance(message, dict) and not _api_error(record, message):
            model = message.get("model")
            if isinstance(model, str) and model:
                return model[:200]
    return None


# How much of a transcript's head is read for the session it continues: a forked or
# resumed transcript names it in its first records, but Claude Code may write large
# bookkeeping records (system prompt and tool schemas) before them.
TRANSCRIPT_HEAD = 512 * 1024
CONTINUATION_OPENING = "This session is being continued from a previous conversation"


def transcript_predecessor(path: str, own_id: str) -> str | None:
    """The id of the earlier session a transcript continues, from its first records: a
    ``forkedFrom`` session, a copied record that still names another session (a resume
    that minted a new id copies the conversation so), the session a copied answer was
    requested in (a fork), or the transcript a continuation summary names. None when the
    transcript names no other session (or cannot be read)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(TRANSCRIPT_HEAD)
    except (OSError, TypeError, ValueError):
        return None
    lines = data.split(b"\n")
    if len(data) == TRANSCRIPT_HEAD:
        lines = lines[:-1]  # the last line may be cut
    own = own_id.encode("utf-8", "replace")
    for line in lines:
        # Cheap filter, for the hot path: a record of this session names it in every id it
        # holds; only a record that names something else, or a summary, is parsed.
        if not (
            b"forkedFrom" in line
            or b"continued from a previous" in line
            or (b"essionId" in line and line.count(b"essionId") > line.count(own))
        ):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        found = _named_session(record, own_id)
        if found:
            return found
    return None


def _named_session(record: dict, own_id: str) -> str | None:
    """Another session a transcript record names, if any."""
    forked = record.get("forkedFrom")
    if isinstance(forked, dict) and _other_id(forked.get("sessionId"), own_id):
        return forked["sessionId"]
    if record.get("type") in ("user", "assistant", "system"):
        for key in ("sessionId", "requestSessionId"):
            if _other_id(record.get(key), own_id):
                return record[key]
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        content = " ".join(
            b.get("text", "")
            for b in content
            if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    summary = (
        record.get("type") == "user"
        and isinstance(content, str)
        and (record.get("isCompactSummary") or content.lstrip().startswith(CONTINUATION_OPENING))
    )
    if summary and isinstance(content, str):
        for named in _transcript_ids(content):
            if named != own_id:
                return named
    return None


def _other_id(value: object, own_id: str) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 200 and value != own_id


def _transcript_ids(text: str) -> list[str]:
    """Session ids of the ``<uuid>.jsonl`` transcript paths a text names."""
    found = []
    at = text.find(".jsonl")
    while at != -1:
        candidate = text[max(0, at - 36) : at]
        if _uuid_shaped(candidate):
            found.append(candidate)
        at = text.find(".jsonl", at + 6)
    return found


def _uuid_shaped(text: str) -> bool:
    if len(text) != 36 or any(text[i] != "-" for i in (8, 13, 18, 23)):
        return False
    return all(c in "0123456789abcdefABCDEF" for c in text.replace("-", ""))


INTERRUPTED_PREFIX = "[Request interrupted by user"


def transcript_turn_state(path: str) -> dict | None:
    """How the main conversation's last turn ended, when the transcript says more than
    the hook: an API error Claude Code wrote in the model's place (releases without
    StopFailure fire Stop after it), or the user interrupting the turn. None otherwise."""
    for record in _records_from_the_end(path):
        if record.get("isSidechain"):
            continue
        message = record.get("message")
        if not isinstance(message, dict):
            continue
        if record.get("type") == "user":
            content = message.get("content")
            texts = (
                [content]
                if isinstance(content, str)
                else [b.get("text", "") for b in content or [] if isinstance(b, dict)]
                if isinstance(content, list)
                else []
            )
            if any(isinstance(t, str) and t.startswith(INTERRUPTED_PREFIX) for t in texts):
                return {"interrupted": True}
            if any(isinstance(t, str) and t.strip() for t in texts):
                return None  # a prompt after the last answer: nothing to say of that answer
            continue
        if _api_error(record, message):
            return api_error_state(record)
        return None
    return None


USAGE_FIELDS = (
    ("input_tokens", "input"),
    ("output_tokens", "output"),
    ("cache_read_input_tokens", "cache_read"),
    ("cache_creation_input_tokens", "cache_write"),
)


def transcript_turn_usage(path: str) -> dict | None:
    """The tokens the main conversation's last turn used: the ``usage`` of each assistant
    message since the user's last prompt, summed (input, output, cache reads and writes)
    with the model. Claude Code writes one line per content block of a message, each with
    the message's usage so far: the last line of each message id counts, once."""
    by_message: dict = {}
    model = ""
    for record in _records_from_the_end(path):
        if record.get("isSidechain"):
            continue
        message = record.get("message")
        if not isinstance(message, dict):
            continue
        if record.get("type") == "user":
            content = message.get("content")
            if isinstance(content, str) and content.strip():
                break  # the prompt that opened the turn
            if isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") == "text" for b in content
            ):
                break
            continue
        usage = message.get("usage")
        if not isinstance(usage, dict) or message.get("model") == "<synthetic>":
            continue
        key = message.get("id") or id(record)
        if key not in by_message:  # newest first: the first line met is the message's last
            by_message[key] = usage
            model = model or str(message.get("model") or "")
    if not by_message:
        return None
    total: dict = {name: 0 for _, name in USAGE_FIELDS}
    for usage in by_message.values():
        for field, name in USAGE_FIELDS:
            value = usage.get(field)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                total[name] += value
    total["messages"] = len(by_message)
    if model:
        total["model"] = model[:200]
    return total


def _records_from_the_end(path: str) -> Iterator[dict]:
    """The user and assistant records of the transcript's last TRANSCRIPT_WINDOW bytes,
    newest first, each parsed only when asked for (the caller stops at the first that
    tells it what it wants)."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            handle.seek(max(0, size - TRANSCRIPT_WINDOW))
            data = handle.read()
    except (OSError, TypeError, ValueError):
        return
    lines = data.split(b"\n")
    if size > TRANSCRIPT_WINDOW:
        lines = lines[1:]  # the first line may be cut
    for line in reversed(lines):
        if b'"assistant"' not in line and b'"user"' not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a half-written last line
        if isinstance(record, dict) and record.get("type") in ("assistant", "user"):
            yield record


def api_error_state(record: dict) -> dict:
    """What an API error record says of the error: its kind, HTTP status and type."""
    state: dict = {"api_error": str(record.get("error") or "unknown")[:100]}
    status = record.get("apiErrorStatus")
    if isinstance(status, int) and not isinstance(status, bool):
        state["status"] = status
    kind = record.get("apiErrorType")
    if isinstance(kind, str) and kind:
        state["type"] = kind[:100]
    return state


def tail_at_word_boundary(text: str, limit: int = TAIL_CHARS) -> str:
    """Return the trailing `limit` characters of text, starting on a whole word, but
    never between a secret and what names it (``password = "...``, ``Bearer ...``, a
    key's BEGIN line): when the 200 characters before the cut name one, the tail reaches
    back to the start of the paragraph, else the line, the cut falls in (up to
    TAIL_STRETCH times `limit`) for the server to redact it whole; failing that, it
    starts at the next line or sentence."""
    text = text.strip()
    if len(text) <= limit:
        return text
    start = len(text) - limit
    space = next((i for i in range(start, len(text)) if text[i].isspace()), len(text))
    if text[start - 1].isspace():
        space = start
    kept = text[space:].lstrip()
    first_word = kept.split(None, 1)[0] if kept else ""
    if not _may_name_a_secret(text[max(0, start - 200) : space] + " " + first_word):
        return kept
    floor = max(0, len(text) - TAIL_STRETCH * limit)
    for boundary in ("\n\n", "\n"):
        at = text.rfind(boundary, floor, start)
        if at != -1:
            return text[at:].strip()
    if floor == 0:
        return text
    ends = [(text.find(b, start), len(b)) for b in _TAIL_BREAKS]
    after = [at + size for at, size in ends if at != -1]
    return text[min(after) :].strip() if after else ""


def _normalise_text(text: str) -> str:
    """Collapse whitespace for loose comparison."""
    return " ".join(text.split())
