"""Did memory help? For each preamble a session was handed (a ContinuityRecord) and each
MCP answer it got (an McpCall), which of its items the session then used.

The items of a preamble are the lines that hand the session something to act on: each
pending task and next step, each hot topic, each file or command it names, and each
pin of the team it quotes. An MCP answer's items are the task ids, files and pins it
names. Whether the session used an item is judged best-effort, by text, against what
the session did after it got it (its prompts, its tool calls' inputs, its final
messages and summary):

- a task or a next step: *closed* when the session's task list closed its id or its
  summary reports it done (the test the preamble itself applies, ``preamble.Later``), or
  *worked on* when its id, or two thirds of its content words, come up in the session;
- a file: *touched* when a tool call's input names it (its path, or its file name);
- a command: *ran* when a tool call's input holds it;
- a hot topic: *came up* when the session's prompts or tool inputs hold the word;
- a pin: *followed* when half of its content words (its label's when it has no content)
  come up in the session — a rule a session follows leaves its words in what it did.

Judged in the memory pipeline each time the session is summarized (at each turn end of
Claude Code, and at its end): the figure grows with the session and is final at its end.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Sum
from django.utils import timezone

from lifecycle.models import Session
from sessionhub.models import Team

from . import features as feature_lib
from .continuity.decide import Evidence, Later
from .continuity.render import LEAD_MARKER
from .models import ContinuityRecord, McpCall, Pin, SessionFeatures, Summary
from .outcome import FINISHED

TASK, STEP, TOPIC, FILE, COMMAND, PIN = "task", "next step", "topic", "file", "command", "pin"

_TASK_LINE = re.compile(r"^- (?:\[(task-\d+)\] )?(.*?)(?: \((?:<1h|\d+[hd]) ago\))?$")
_TASK_ID = re.compile(r"\btask-\d{1,9}\b", re.IGNORECASE)
_EXTENSIONS = (
    "py|js|jsx|ts|tsx|go|rs|java|kt|rb|php|c|h|cc|cpp|cs|swift|md|rst|json|yaml|yml|toml|"
    "sql|sh|html|css|scss|txt|cfg|ini|lock|xml|proto|tf"
)
# A path with a folder (src/app/models.py, webhooks/retry.py) or a file name with a
# known extension (README.md); never a URL's host or a version number.
_PATH = re.compile(
    rf"(?<![\w/.@:-])(?:(?:[\w.-]+/)+[\w.-]+\.(?:{_EXTENSIONS})|[\w-]+\.(?:{_EXTENSIONS}))\b"
)
_COMMAND = re.compile(r"`([^`\n]{3,80})`")


@dataclass(frozen=True, slots=True)
class Item:
    """One thing a preamble or an answer offered the session."""

    kind: str
    text: str
    task_id: str = ""


@dataclass(slots=True)
class SessionWork:
    """What a session did, as the items are judged against it."""

    words: str  # prompts, tool inputs, final messages, summary: lower case
    tools: str  # tool inputs alone: lower case
    asked: str  # prompts and tool inputs: lower case
    stems: frozenset[str]
    asked_stems: frozenset[str]
    later: Later

    @classmethod
    def of(
        cls,
        texts: dict[str, Any],
        features: SessionFeatures | None,
        summary: Summary | None,
        cwd: str = "",
    ) -> SessionWork:
        prompts = " ".join(texts.get("prompts") or [])
        tools = " ".join(texts.get("tools") or [])
        if cwd:  # every tool input repeats the working directory: it names no item
            tools = tools.replace(cwd, " ")
        finals = " ".join(texts.get("finals") or [])
        completed = summary.completed if summary is not None else ""
        evidence = Evidence()
        if completed:
            evidence.add(feature_lib.completion_facts_of(completed))
        if summary is not None and summary.outcome == FINISHED and summary.request:
            evidence.add(feature_lib.completion_facts([summary.request]))
        done = frozenset(features.done_tasks or []) if features is not None else frozenset()
        words = " ".join([prompts, tools, finals, completed])
        return cls(
            words=words.lower(),
            tools=tools.lower(),
            asked=f"{prompts} {tools}".lower(),
            stems=feature_lib.content_stems(words),
            asked_stems=feature_lib.content_stems(f"{prompts} {tools}"),
            later=Later(done, evidence, evidence.count),
        )


def _files_and_commands(text: str) -> list[Item]:
    found: list[Item] = []
    for match in _COMMAND.finditer(text):
        command = match.group(1).strip()
        if not _PATH.fullmatch(command):
            found.append(Item(COMMAND, command))
    for match in _PATH.finditer(text):
        found.append(Item(FILE, match.group(0)))
    return found


def preamble_items(record: ContinuityRecord) -> list[Item]:
    """The items of a served preamble, each once, read back from its text (and the pins
    it quoted from the record)."""
    items: list[Item] = []
    section = ""
    for raw in record.preamble.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("HOT TOPICS:"):
            topics = line.split(":", 1)[1]
            items += [Item(TOPIC, t.strip()) for t in topics.split(",") if t.strip()]
            continue
        if line.startswith(("ACTIVE PROJECTS:", "WORKING MEMORY RESTORED", "[SESSION")):
            continue
        if not line.startswith("- ") and line.endswith(":"):
            section = line
            continue
        if section.startswith("PINNED BY YOUR TEAM"):
            continue  # the record's curated_pins, below
        if section == "PENDING TASKS:":
            match = _TASK_LINE.match(line)
            if match:
                items.append(Item(TASK, match.group(2), match.group(1) or ""))
                items += _files_and_commands(match.group(2))
            continue
        if line.startswith("- next:"):
            steps = line.split(":", 1)[1]
            for step in steps.split(";"):
                if step.strip(" …"):
                    items.append(Item(STEP, step.strip(" …")))
        items += _files_and_commands(line)
    for pin in record.curated_pins or []:
        items.append(Item(PIN, f"{pin.get('label', '')}: {pin.get('content', '')}".strip(": ")))
    return _once(items)


def answer_items(call: McpCall, pins: dict[int, Pin]) -> list[Item]:
    """The items of an MCP answer: the task ids and files it names, and the pins it
    returned."""
    items = [
        Item(TASK, m.group(0).lower(), m.group(0).lower()) for m in _TASK_ID.finditer(call.answer)
    ]
    items += [i for i in _files_and_commands(call.answer) if i.kind == FILE]
    for pk in call.returned_pins or []:
        pin = pins.get(pk)
        if pin is not None:
            items.append(Item(PIN, f"{pin.label}: {pin.content}".strip(": ")))
    return _once(items)


def _once(items: Iterable[Item]) -> list[Item]:
    seen: set[tuple[str, str]] = set()
    kept = []
    for item in items:
        key = (item.kind, item.task_id or item.text.lower())
        if item.text and key not in seen:
            seen.add(key)
            kept.append(item)
    return kept


def judge(item: Item, work: SessionWork) -> str:
    """How the session used the item ('' when it did not)."""
    if item.kind in (TASK, STEP):
        text = LEAD_MARKER.sub("", item.text)
        if work.later.finished(text, item.task_id):
            return "closed it"
        if item.task_id and item.task_id.lower() in work.words:
            return "worked on it"
        stems = feature_lib.content_stems(feature_lib.without_task_ids(text))
        if stems and len(stems & work.stems) >= feature_lib.two_thirds(stems):
            return "worked on it"
        return ""
    if item.kind == FILE:
        # The path, or the file's name as a whole name (refunds.py is not
        # test_refunds.py): after a separator, and not followed by more of a name.
        name = item.text.lower()
        pattern = rf"(?:^|[\s/\\\"'=:]){re.escape(name.rsplit('/', 1)[-1])}(?![\w.-])"
        return "touched it" if name in work.tools or re.search(pattern, work.tools) else ""
    if item.kind == COMMAND:
        return "ran it" if item.text.lower() in work.tools else ""
    if item.kind == TOPIC:
        stems = feature_lib.content_stems(item.text)
        if item.text.lower() in work.asked or (stems and stems <= work.asked_stems):
            return "came up"
        return ""
    if item.kind == PIN:
        label, _, content = item.text.partition(": ")
        stems = feature_lib.content_stems(content or label)
        if stems and len(stems & work.stems) * 2 >= len(stems):
            return "followed it"
        return ""
    return ""


def _verdict(items: list[Item], work: SessionWork, now: datetime) -> dict[str, Any]:
    judged = []
    for item in items:
        how = judge(item, work)
        entry = {"kind": item.kind, "text": item.text[:300], "used": bool(how), "how": how}
        if item.task_id:
            entry["task_id"] = item.task_id
        judged.append(entry)
    return {
        "items": judged,
        "offered": len(judged),
        "used": sum(1 for j in judged if j["used"]),
        "computed_at": now.isoformat(),
    }


def usage_judge(
    session: Session,
    texts: dict[str, Any],
    features: SessionFeatures | None,
    summary: Summary | None,
    now: datetime | None = None,
) -> int:
    """Judge every preamble the session was handed and every MCP answer it got against
    what it did; the number of records judged."""
    now = now or timezone.now()
    records = list(
        ContinuityRecord.objects.filter(session=session, delivered_at__isnull=False).exclude(
            preamble=""
        )
    )
    calls = list(McpCall.objects.filter(session=session, is_error=False))
    if not records and not calls:
        return 0
    work = SessionWork.of(texts, features, summary, session.cwd)
    for record in records:
        verdict = _verdict(preamble_items(record), work, now)
        ContinuityRecord.objects.filter(pk=record.pk).update(
            usage=verdict, items_offered=verdict["offered"], items_used=verdict["used"]
        )
    if calls:
        pin_ids = {pk for call in calls for pk in call.returned_pins or [] if isinstance(pk, int)}
        pins = Pin.objects.in_bulk(list(pin_ids)) if pin_ids else {}
        for call in calls:
            verdict = _verdict(answer_items(call, pins), work, now)
            McpCall.objects.filter(pk=call.pk).update(
                usage=verdict, items_offered=verdict["offered"], items_used=verdict["used"]
            )
    return len(records) + len(calls)


@dataclass(frozen=True, slots=True)
class UsageFigure:
    """The team's figure: of the items handed to its sessions, how many they used."""

    offered: int
    used: int
    records: int
    mcp_offered: int
    mcp_used: int

    @property
    def percent(self) -> int | None:
        return round(100 * self.used / self.offered) if self.offered else None

    @property
    def mcp_percent(self) -> int | None:
        return round(100 * self.mcp_used / self.mcp_offered) if self.mcp_offered else None


def usage_figure(team: Team, *, days: int = 7, now: datetime | None = None) -> UsageFigure:
    """Preamble items used by the sessions handed them, over the last ``days`` days (two
    aggregate queries, on the partial index of judged records and the MCP calls' one)."""
    since = (now or timezone.now()) - timedelta(days=days)
    records = ContinuityRecord.objects.filter(
        team=team, created_at__gte=since, items_offered__isnull=False
    ).aggregate(offered=Sum("items_offered"), used=Sum("items_used"), n=Count("id"))
    calls = McpCall.objects.filter(
        team=team, created_at__gte=since, items_offered__isnull=False
    ).aggregate(offered=Sum("items_offered"), used=Sum("items_used"))
    return UsageFigure(
        offered=records["offered"] or 0,
        used=records["used"] or 0,
        records=records["n"] or 0,
        mcp_offered=calls["offered"] or 0,
        mcp_used=calls["used"] or 0,
    )
