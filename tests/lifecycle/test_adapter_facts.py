"""What the adapters tell the rest of SessionHub about a gateway: facts on each event
and where a tool call's input and output lie, so no other module switches on the source."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lifecycle.adapters import EventInvalid, canonical, claude_code, openclaw, tool_io
from lifecycle.models import EventKind, Source

NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)


def cc(name: str, **fields: object) -> dict:
    return {"hook_event_name": name, "session_id": "s-1", "cwd": "/src/app", **fields}


def test_claude_code_turn_ends_are_where_memory_is_distilled() -> None:
    stop = claude_code.adapt(cc("Stop"), gateway="laptop", now=NOW)
    sub = claude_code.adapt(cc("SubagentStop", agent_type="explore"), gateway="laptop", now=NOW)
    prompt = claude_code.adapt(cc("UserPromptSubmit", prompt="hi"), gateway="laptop", now=NOW)
    assert (stop.kind, stop.facts["summarize"]) == (EventKind.TURN_END, True)
    assert (sub.kind, sub.facts["summarize"], sub.facts["subagent"]) == (
        EventKind.TURN_END,
        True,
        True,
    )
    assert "summarize" not in prompt.facts


def test_openclaw_and_generic_turn_ends_wait_for_the_session_end() -> None:
    end = openclaw.adapt(
        {
            "hook": "agent_end",
            "event": {"messages": []},
            "ctx": {"sessionId": "o-1", "agentId": "main"},
        },
        now=NOW,
    )
    generic = canonical.adapt(
        {"event_id": "e1", "kind": "turn_end", "agent_id": "a", "session_id": "g-1"}, now=NOW
    )
    assert end.kind == generic.kind == EventKind.TURN_END
    assert "summarize" not in end.facts
    assert "summarize" not in generic.facts


def test_a_canonical_event_that_says_it_is_claude_codes_follows_its_rule() -> None:
    event = canonical.adapt(
        {
            "event_id": "e1",
            "kind": "turn_end",
            "source": "claude-code",
            "agent_id": "a",
            "session_id": "g-1",
        },
        now=NOW,
    )
    assert event.facts["summarize"] is True


def test_a_canonical_fact_of_the_wrong_type_is_refused_whatever_the_kind() -> None:
    with pytest.raises(EventInvalid) as refused:
        canonical.adapt(
            {"event_id": "e1", "kind": "prompt", "agent_id": "a", "session_id": "g", "model": 3},
            now=NOW,
        )
    assert refused.value.field == "model"


@pytest.mark.parametrize(
    ("source", "payload", "expected"),
    [
        (
            Source.CLAUDE_CODE,
            {"tool_input": {"command": "ls"}, "tool_response": {"stdout": "a"}},
            ({"command": "ls"}, {"stdout": "a"}),
        ),
        (Source.CLAUDE_CODE, {"tool_input": {"x": 1}, "error": "boom"}, ({"x": 1}, "boom")),
        (
            Source.OPENCLAW,
            {"event": {"params": {"path": "a"}, "result": "ok"}, "ctx": {}},
            ({"path": "a"}, "ok"),
        ),
        (Source.OPENCLAW, {"event": {"params": {}, "error": "denied"}}, ({}, "denied")),
        (Source.GENERIC, {"input": "q", "output": "r"}, ("q", "r")),
        (Source.GENERIC, {"params": "q", "result": "r"}, ("q", "r")),
        (Source.GENERIC, None, (None, None)),
    ],
)
def test_tool_io_reads_each_gateways_payload(
    source: str, payload: dict | None, expected: tuple
) -> None:
    assert tool_io(source, payload) == expected


# --- what Claude Code's hooks say of a session's memory -----------------------------------


def test_task_list_tools_become_task_list_changes() -> None:
    todo = claude_code.adapt(
        cc(
            "PostToolUse",
            tool_name="TodoWrite",
            tool_input={
                "todos": [
                    {"content": " Add  the legend ", "status": "in_progress", "activeForm": "x"}
                ]
            },
            tool_response={"oldTodos": [], "newTodos": []},
        ),
        gateway="laptop",
        now=NOW,
    )
    assert todo.facts["task_list"] == {
        "op": "replace",
        "items": [{"text": "Add the legend", "status": "in_progress"}],
    }
    create = claude_code.adapt(
        cc(
            "PostToolUse",
            tool_name="TaskCreate",
            tool_input={"subject": "Write the parser", "description": "d", "activeForm": "w"},
            tool_response={"task": {"id": "3", "subject": "Write the parser"}},
        ),
        gateway="laptop",
        now=NOW,
    )
    assert create.facts["task_list"] == {
        "op": "create",
        "id": "3",
        "text": "Write the parser",
        "status": "pending",
    }
    assert claude_code.task_list_change(
        "TaskCreate", {"subject": "S"}, "Task #7 created successfully: S"
    ) == {
        "op": "create",
        "id": "7",
        "text": "S",
        "status": "pending",
    }
    update = claude_code.adapt(
        cc(
            "PostToolUse",
            tool_name="TaskUpdate",
            tool_input={"taskId": 3, "status": "completed"},
            tool_response={},
        ),
        gateway="laptop",
        now=NOW,
    )
    assert update.facts["task_list"] == {"op": "update", "id": "3", "status": "completed"}
    # A subagent's list is its own; a failed call changed nothing; other tools are no list.
    sub = claude_code.adapt(
        cc(
            "PostToolUse",
            tool_name="TodoWrite",
            agent_id="a1",
            agent_type="x",
            tool_input={"todos": []},
        ),
        gateway="laptop",
        now=NOW,
    )
    failed = claude_code.adapt(
        cc("PostToolUseFailure", tool_name="TaskCreate", tool_input={"subject": "S"}, error="bad"),
        gateway="laptop",
        now=NOW,
    )
    bash = claude_code.adapt(
        cc("PostToolUse", tool_name="Bash", tool_input={"command": "ls"}), gateway="laptop", now=NOW
    )
    assert (
        "task_list" not in sub.facts
        and "task_list" not in failed.facts
        and "task_list" not in bash.facts
    )


def test_a_long_final_message_keeps_its_head_and_its_end() -> None:
    report = (
        "Head of the report. "
        + "filler words here " * 1500
        + "The run drops from 48 to 19 minutes."
    )
    stop = claude_code.adapt(cc("Stop", last_assistant_message=report), gateway="laptop", now=NOW)
    kept = stop.facts["final_message"]
    assert len(kept) <= claude_code.FINAL_KEPT < len(report)
    assert kept.startswith("Head of the report.") and kept.endswith("from 48 to 19 minutes.")
    assert "characters left out" in kept


def test_what_the_client_read_of_the_turn_and_the_earlier_session() -> None:
    failed = claude_code.adapt(
        cc(
            "Stop",
            last_assistant_message="Loaded the notes.",
            sessionhub={
                "turn": {"api_error": "server_error", "status": 502},
                "resumed_from": "old-1",
            },
        ),
        gateway="laptop",
        now=NOW,
    )
    assert failed.facts["failed"] is True and failed.facts["error_status"] == 502
    assert failed.facts["final_message"] == ""  # the words before the error are no final answer
    assert failed.facts["resumed_from"] == "old-1"
    stop_failure = claude_code.adapt(
        cc(
            "StopFailure",
            error="server_error",
            sessionhub={
                "turn": {"api_error": "server_error", "status": 529, "type": "overloaded_error"}
            },
        ),
        gateway="laptop",
        now=NOW,
    )
    assert (stop_failure.facts["error_status"], stop_failure.facts["error_type"]) == (
        529,
        "overloaded_error",
    )
    interrupted = claude_code.adapt(
        cc("SessionEnd", sessionhub={"turn": {"interrupted": True}}), gateway="laptop", now=NOW
    )
    assert interrupted.facts["interrupted"] is True
    own = claude_code.adapt(
        cc("Stop", sessionhub={"resumed_from": "s-1"}), gateway="laptop", now=NOW
    )
    assert "resumed_from" not in own.facts


def test_openclaw_agent_end_that_failed_says_so() -> None:
    end = openclaw.adapt(
        {
            "hook": "agent_end",
            "event": {"messages": [], "success": False, "error": "overloaded"},
            "ctx": {"sessionId": "o-1", "agentId": "main"},
        },
        now=NOW,
    )
    assert end.facts["failed"] is True and end.facts["error"] == "overloaded"
