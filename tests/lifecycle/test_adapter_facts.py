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
