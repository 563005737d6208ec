"""Hand-written sessions in the shapes of Claude Code 1.0.x, for the memory-quality corpus.

The pinned CLI cannot produce these, so they are written here, record by record, in the
shapes older releases used (and that transcripts committed to public repositories show):

- hooks without ``last_assistant_message`` (the client reads the final words from the
  transcript), no ``StopFailure`` (a turn that died on an API error still fires ``Stop``),
  ``SubagentStop`` without an agent id, the subagent's lines in the main transcript
  (``isSidechain``);
- one record per content block, the blocks of one message sharing its id;
- ``TodoWrite`` items with an ``id`` and a ``priority``;
- an API error as a ``<synthetic>`` assistant message with ``isApiErrorMessage``;
- ``--resume`` minting a new session id: the new transcript opens with the old one's title
  (``summary`` with a ``leafUuid``) and a copy of its conversation, the copied records
  still naming the old session id;
- a resumed conversation that had been compacted: it opens with the continuation summary,
  whose last lines name the earlier transcript's path.

Every session is a list of steps: a transcript record appended, or a hook fired (recorded
with the transcript's line count at that moment). Ids are fixed (uuid5 of a name), times
are scripted.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

VERSION = "1.0.80"
MODEL = "claude-sonnet-4-20250514"
PROJECT = "legacy-crm"
CWD = "{HOME}/src/legacy-crm"
FOLDER = "-tmp-sessionhub-corpus-home-src-legacy-crm"  # as Claude Code names it
TRANSCRIPTS = "{HOME}/.claude/projects/" + FOLDER
_NS = uuid.UUID("6f1d3c2e-8b7a-4e0f-9a51-0c2d4e6f8a10")


def uid(name: str) -> str:
    return str(uuid.uuid5(_NS, name))


class Builder:
    """One legacy session: its transcript records and its hooks, in order."""

    def __init__(self, name: str, hour: float, session_id: str | None = None) -> None:
        self.name = name
        self.hour = hour
        self.session_id = session_id or uid(name)
        self.path = f"{TRANSCRIPTS}/{self.session_id}.jsonl"
        self.lines: list[str] = []
        self.hooks: list[dict[str, Any]] = []
        self.minute = 0.0
        self.parent: str | None = None
        self.count = 0

    # -- time and ids
    def at(self, minute: float) -> Builder:
        self.minute = minute
        return self

    def _stamp(self) -> str:
        seconds = self.hour * 3600 + self.minute * 60
        return f"2026-03-0{1 + int(seconds // 86400)}T{_clock(seconds % 86400)}Z"

    def _next_uuid(self) -> str:
        self.count += 1
        return uid(f"{self.name}:{self.count}")

    # -- transcript records
    def record(self, record: dict[str, Any], *, session_id: str | None = None) -> str:
        record_uuid = record.get("uuid") or self._next_uuid()
        base = {
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": CWD,
            "sessionId": session_id or self.session_id,
            "version": VERSION,
            "gitBranch": "main",
        }
        full = {**base, **record, "uuid": record_uuid, "timestamp": self._stamp()}
        self.lines.append(json.dumps(full, ensure_ascii=False) + "\n")
        if not full.get("isSidechain"):
            self.parent = record_uuid
        self.minute += 0.05
        return record_uuid

    def raw_line(self, record: dict[str, Any]) -> None:
        self.lines.append(json.dumps(record, ensure_ascii=False) + "\n")

    def user(self, text: str, **extra: Any) -> str:
        return self.record({"type": "user", "message": {"role": "user", "content": text}, **extra})

    def assistant(
        self, blocks: list[dict[str, Any]], *, sidechain: bool = False, **extra: Any
    ) -> None:
        """A message written block by block, each record carrying the same message id."""
        message_id = "msg_" + uid(f"{self.name}:msg:{self.count}").replace("-", "")[:24]
        for block in blocks:
            self.record(
                {
                    "type": "assistant",
                    "isSidechain": sidechain,
                    "requestId": "req_" + message_id[4:],
                    "message": {
                        "id": message_id,
                        "type": "message",
                        "role": "assistant",
                        "model": MODEL,
                        "content": [block],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 2100, "output_tokens": 180},
                    },
                    **extra,
                }
            )

    def tool(
        self,
        name: str,
        tool_input: dict[str, Any],
        result: Any,
        *,
        text: str = "",
        think: str = "",
        sidechain: bool = False,
        hooks: bool = True,
    ) -> None:
        """A tool call and its result, with the PreToolUse/PostToolUse hooks around them."""
        tool_id = "toolu_" + uid(f"{self.name}:tool:{self.count}").replace("-", "")[:24]
        blocks: list[dict[str, Any]] = []
        if think:
            blocks.append({"type": "thinking", "thinking": think, "signature": "sig"})
        if text:
            blocks.append({"type": "text", "text": text})
        blocks.append({"type": "tool_use", "id": tool_id, "name": name, "input": tool_input})
        self.assistant(blocks, sidechain=sidechain)
        if hooks:
            self.hook("PreToolUse", tool_name=name, tool_input=tool_input)
        content = result if isinstance(result, str) else json.dumps(result)
        self.record(
            {
                "type": "user",
                "isSidechain": sidechain,
                "message": {
                    "role": "user",
                    "content": [
                        {"tool_use_id": tool_id, "type": "tool_result", "content": content}
                    ],
                },
                "toolUseResult": result,
            }
        )
        if hooks:
            self.hook("PostToolUse", tool_name=name, tool_input=tool_input, tool_response=result)

    def say(self, text: str, think: str = "") -> None:
        blocks: list[dict[str, Any]] = []
        if think:
            blocks.append({"type": "thinking", "thinking": think, "signature": "sig"})
        blocks.append({"type": "text", "text": text})
        self.assistant(blocks)

    def api_error(self, text: str) -> None:
        self.record(
            {
                "type": "assistant",
                "isApiErrorMessage": True,
                "message": {
                    "id": uid(f"{self.name}:err:{self.count}"),
                    "type": "message",
                    "role": "assistant",
                    "model": "<synthetic>",
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "stop_sequence",
                    "stop_sequence": "",
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                },
            }
        )

    # -- hooks
    def hook(self, event: str, **fields: Any) -> None:
        body = {
            "session_id": self.session_id,
            "transcript_path": self.path,
            "cwd": CWD,
            "hook_event_name": event,
            **fields,
        }
        self.hooks.append(
            {
                "session": self.name,
                "t": round(self.hour * 3600 + self.minute * 60, 3),
                "hook": body,
                "lines": {"transcript_path": len(self.lines)},
            }
        )
        self.minute += 0.02

    def prompt(self, text: str) -> None:
        self.hook("UserPromptSubmit", prompt=text)
        self.user(text)

    def stop(self) -> None:
        self.hook("Stop", stop_hook_active=False)


def _clock(seconds: float) -> str:
    whole = int(seconds)
    millis = int((seconds - whole) * 1000)
    return f"{whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}.{millis:03d}"


def _todos(*items: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "todos": [
            {"content": content, "status": status, "priority": priority, "id": str(n)}
            for n, (content, status, priority) in enumerate(items, 1)
        ]
    }


def _todo_result(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    return {"oldTodos": old.get("todos", []), "newTodos": new["todos"]}


def sessions() -> list[Builder]:
    out: list[Builder] = []

    # lc-01: a task list left half done, a plan in thinking, an intention at the end.
    s = Builder("lc-01", 0.5)
    s.hook("SessionStart", source="startup")
    s.prompt("Migrate the contacts table to the new address schema")
    first = _todos(
        ("Write the address migration", "in_progress", "high"),
        ("Update the ORM models to the new columns", "pending", "high"),
        ("Run the migration on staging", "pending", "medium"),
    )
    s.tool(
        "TodoWrite",
        first,
        _todo_result({}, first),
        think="Plan:\n1. Write the migration\n2. Look for any incomplete implementations in "
        "the models\n3. Run it on staging\nTODO: ask about the old zip codes",
    )
    s.tool(
        "Bash",
        {"command": "alembic revision -m 'address schema'"},
        {"stdout": "Generating migration", "stderr": "", "interrupted": False},
    )
    second = _todos(
        ("Write the address migration", "completed", "high"),
        ("Update the ORM models to the new columns", "in_progress", "high"),
        ("Run the migration on staging", "pending", "medium"),
    )
    s.tool("TodoWrite", second, _todo_result(first, second))
    s.say("The migration file is written. Now let me update the ORM models to the new columns.")
    s.stop()
    s.at(12).hook("SessionEnd", reason="prompt_input_exit")
    out.append(s)
    lc01 = s

    # lc-02: `claude --resume` of lc-01 in 1.0.x: a new session id; the new transcript
    # opens with lc-01's title and a copy of its conversation, still naming lc-01.
    s = Builder("lc-02", 2.5)
    s.raw_line(
        {"type": "summary", "summary": "Contacts address schema migration", "leafUuid": lc01.parent}
    )
    for line in lc01.lines:
        s.lines.append(line)
    s.parent = lc01.parent
    s.hook("SessionStart", source="resume")
    s.prompt("continue with the models")
    third = _todos(
        ("Write the address migration", "completed", "high"),
        ("Update the ORM models to the new columns", "completed", "high"),
        ("Run the migration on staging", "pending", "medium"),
    )
    s.tool(
        "Edit",
        {
            "file_path": "crm/models/contact.py",
            "old_string": "street = Column",
            "new_string": "address_line1 = Column",
        },
        {"filePath": "crm/models/contact.py"},
    )
    s.tool("TodoWrite", third, _todo_result(_todos(), third))
    s.say(
        "Updated the ORM models to the new address columns. "
        "Remaining: run the migration on staging."
    )
    s.stop()
    s.at(9).hook("SessionEnd", reason="prompt_input_exit")
    out.append(s)
    lc02 = s

    # lc-03: a turn that dies on an API error; 1.0.x has no StopFailure, Stop fires.
    s = Builder("lc-03", 8.0)
    s.hook("SessionStart", source="startup")
    s.prompt("Add an index on contacts.email")
    s.tool(
        "Bash",
        {"command": "grep -rn 'email' crm/models/contact.py"},
        {"stdout": "12:    email = Column(String(320))", "stderr": "", "interrupted": False},
    )
    s.api_error("API Error: 502 <html><head><title>502 Bad Gateway</title></head></html>")
    s.stop()
    s.at(4).hook("SessionEnd", reason="prompt_input_exit")
    out.append(s)

    # lc-04: lc-02's conversation had been compacted; resumed, it opens with the
    # continuation summary, which names lc-02's transcript (the records carry the new id).
    s = Builder("lc-04", 22.0)
    s.raw_line(
        {"type": "summary", "summary": "Contacts migration on staging", "leafUuid": lc02.parent}
    )
    s.record(
        {
            "type": "system",
            "subtype": "compact_boundary",
            "content": "Conversation compacted",
            "level": "info",
            "compactMetadata": {"trigger": "auto", "preTokens": 151200},
        }
    )
    s.user(
        "This session is being continued from a previous conversation that ran out of "
        "context. The conversation is summarized below:\nAnalysis:\nThe user is migrating "
        "the contacts table to a new address schema.\n\nSummary:\n1. Primary Request and "
        "Intent:\n   Migrate the contacts table to the new address schema.\n2. Pending "
        "Tasks:\n   - Run the migration on staging\n3. Current Work:\n   The ORM models are "
        "updated.\n\nIf you need specific details from before compaction (like exact code "
        "snippets, error messages, or content you generated), read the full transcript at: "
        f"{TRANSCRIPTS}/{lc02.session_id}.jsonl\nPlease continue the conversation from where "
        "we left off without asking the user any further questions.",
        isCompactSummary=True,
        isVisibleInTranscriptOnly=True,
    )
    s.hook("SessionStart", source="resume")
    s.prompt("run the migration on staging")
    s.tool(
        "Bash",
        {"command": "alembic upgrade head"},
        {"stdout": "Running upgrade -> 4f2a", "stderr": "", "interrupted": False},
    )
    s.say("Ran the migration on staging; 48,210 contacts moved to the new address columns.")
    s.stop()
    s.at(6).hook("SessionEnd", reason="prompt_input_exit")
    out.append(s)

    # lc-05: a subagent whose lines are in the main transcript; noise that is no task
    # (a comment in a command, a TODO in the tool's output).
    s = Builder("lc-05", 40.0)
    s.hook("SessionStart", source="startup")
    s.prompt("Find every place that still reads the old address fields")
    s.tool(
        "Task",
        {
            "description": "find old fields",
            "prompt": "Search the code for street and zip reads",
            "subagent_type": "general-purpose",
        },
        {
            "content": [
                {
                    "type": "text",
                    "text": "Three call sites: the CSV export, the search index, "
                    "the invoice header.",
                }
            ]
        },
        hooks=False,
    )
    s.hook(
        "PreToolUse",
        tool_name="Task",
        tool_input={
            "description": "find old fields",
            "prompt": "Search the code for street and zip reads",
            "subagent_type": "general-purpose",
        },
    )
    s.user("Search the code for street and zip reads", isSidechain=True)
    s.tool(
        "Bash",
        {"command": "grep -rn 'contact.street' crm/ # TODO check the vendored copy too"},
        {
            "stdout": "crm/export/csv.py:40:    row.append(contact.street)  # TODO: drop after "
            "migration\ncrm/search/index.py:22: doc['street'] = contact.street",
            "stderr": "",
            "interrupted": False,
        },
        sidechain=True,
    )
    s.assistant(
        [
            {
                "type": "text",
                "text": "Three call sites: the CSV export, the search index, the invoice header.",
            }
        ],
        sidechain=True,
    )
    s.hook("SubagentStop", stop_hook_active=False)
    s.hook(
        "PostToolUse",
        tool_name="Task",
        tool_input={
            "description": "find old fields",
            "prompt": "Search the code for street and zip reads",
            "subagent_type": "general-purpose",
        },
        tool_response={
            "content": [
                {
                    "type": "text",
                    "text": "Three call sites: the CSV export, the search index, "
                    "the invoice header.",
                }
            ]
        },
    )
    s.say(
        "Three call sites still read the old fields: the CSV export, the search index and "
        "the invoice header. TODO: update the CSV export first, it feeds the billing sync."
    )
    s.stop()
    s.at(5).hook("SessionEnd", reason="prompt_input_exit")
    out.append(s)

    # lc-06: a later question about the migration.
    s = Builder("lc-06", 45.0)
    s.hook("SessionStart", source="startup")
    s.prompt("Where are we with the contacts address migration?")
    s.say("The migration ran on staging; the CSV export still reads the old street field.")
    s.stop()
    s.at(2).hook("SessionEnd", reason="prompt_input_exit")
    out.append(s)

    # lc-07: the user interrupts a turn while a tool runs, then leaves (no Stop fires).
    s = Builder("lc-07", 47.0)
    s.hook("SessionStart", source="startup")
    s.prompt("Rename the address columns to match the public API")
    s.tool(
        "Bash",
        {"command": "alembic revision -m 'rename address columns'"},
        {"stdout": "Generating migration", "stderr": "", "interrupted": False},
        text="I'll write a migration that renames the columns, then update the serializers.",
    )
    s.user("[Request interrupted by user for tool use]")
    s.at(3).hook("SessionEnd", reason="prompt_input_exit")
    out.append(s)

    # lc-08: a plan in the final message, written as a numbered list and a question: no
    # step of it is a task until someone says so.
    s = Builder("lc-08", 50.0)
    s.hook("SessionStart", source="startup")
    s.prompt("Plan how to split the contacts table into people and companies")
    s.say(
        "Here is the plan:\n1. Add a companies table and move the company columns\n"
        "2. Look for any incomplete implementations in the export\n3. Point the search "
        "index at both tables\n\nShall I start with the companies table?",
        think="Plan:\n1. Read the models\n2. TODO: check the foreign keys",
    )
    s.stop()
    s.at(2).hook("SessionEnd", reason="prompt_input_exit")
    out.append(s)
    return out


_TRUTH: dict[str, dict[str, Any]] = {
    "lc-01": {
        "open_tasks": ["Update the ORM models to the new columns", "Run the migration on staging"],
        "outcome": "stopped",
        "doing": "update the ORM models",
    },
    "lc-02": {
        "open_tasks": ["Run the migration on staging"],
        "closes": [["lc-01", "Update the ORM models to the new columns"]],
        "predecessor": "lc-01",
        "start": ["lc-01"],
        "prompt": ["lc-01"],
    },
    "lc-03": {"outcome": "failed", "prompt": []},
    "lc-04": {
        "predecessor": "lc-02",
        "start": ["lc-02"],
        "prompt": ["lc-02"],
        "closes": [
            ["lc-02", "Run the migration on staging"],
            ["lc-01", "Run the migration on staging"],
        ],
    },
    "lc-05": {"open_tasks": ["update the CSV export"], "turns": 1, "prompt": []},
    "lc-06": {"prompt": ["lc-05", "lc-04"]},
    "lc-07": {"outcome": "stopped", "doing": "interrupted", "prompt": ["lc-04", "lc-02"]},
    "lc-08": {},
}

_BUILT: list[Builder] = []


def _built() -> list[Builder]:
    if not _BUILT:
        _BUILT.extend(sessions())
    return _BUILT


def recorded() -> list[dict[str, Any]]:
    """Every legacy session's hooks, as the recorder keeps them."""
    return [hook for session in _built() for hook in session.hooks]


def write_transcripts(target: Path) -> None:
    folder = target / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    for session in _built():
        (folder / f"{session.session_id}.jsonl").write_text("".join(session.lines))


def truth() -> dict[str, dict[str, Any]]:
    defaults = {
        "open_tasks": [],
        "outcome": "finished",
        "doing": "",
        "predecessor": None,
        "start": None,
        "prompt": None,
        "turns": None,
        "resumed": False,
        "closes": [],
    }
    return {
        s.name: {
            "session_id": s.session_id,
            "project": PROJECT,
            "hour": s.hour,
            "first_prompt": next(h["hook"]["prompt"] for h in s.hooks if "prompt" in h["hook"]),
            **defaults,
            **_TRUTH[s.name],
        }
        for s in _built()
    }
