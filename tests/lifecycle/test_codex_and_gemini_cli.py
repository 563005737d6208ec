"""Codex CLI's and Gemini CLI's hook bodies through their endpoints: each CLI's own
payloads (tests/fixtures/codex, tests/fixtures/gemini-cli: what the pinned CLIs fired in
a session of two runs, a resume and a compaction, driven by this suite's mock models)
posted as they came, and the mapping's rules one by one."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import time_machine
from rest_framework.test import APIClient

from lifecycle.adapters import codex, gemini_cli, tool_io
from lifecycle.adapters.base import EventInvalid
from lifecycle.models import Agent, EventKind, LifecycleEvent, Session, SessionStatus, Source
from memory.pipeline import digest
from sessionhub.models import ApiToken

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NOW = datetime(2026, 11, 27, 18, tzinfo=UTC)  # an hour after the fixtures were fired
CWD = "/home/dev/src/billing-api"


def lines(gateway: str) -> list[dict[str, Any]]:
    path = FIXTURES / gateway / "session.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def digests(event: LifecycleEvent) -> tuple[str, str]:
    """A stored tool call's input and output as its observation will show them."""
    tool_input, tool_output = tool_io(event.source, event.payload)
    return digest(tool_input), digest(tool_output)


def post(api: APIClient, gateway: str, body: Any) -> Any:
    return api.post(f"/api/v1/hooks/{gateway}", body, format="json")


def stamped(body: dict[str, Any], n: int, **extra: Any) -> dict[str, Any]:
    """The body as the hook client sends it: with an event id and a time."""
    minute = f"{n // 60:02d}:{n % 60:02d}"
    return {
        **body,
        "sessionhub": {"event_id": f"e-{n}", "occurred_at": f"2026-11-27T17:{minute}Z", **extra},
    }


@pytest.fixture
def api(client_for: Any, token: str) -> APIClient:
    return client_for(token)


@pytest.fixture(autouse=True)
def _fixture_time() -> Any:
    with time_machine.travel(NOW, tick=False):
        yield


# --------------------------------------------------------------------------- Codex CLI


def test_a_codex_session_as_the_cli_fired_it(api: APIClient) -> None:
    fired = lines("codex")
    bodies = [stamped(b, i) for i, b in enumerate(fired)]
    response = post(api, "codex", bodies)
    assert response.status_code == 200, response.content
    assert response.json()["accepted"] == len(fired)
    # Sent again (a client retrying a spool): stored once.
    assert post(api, "codex", bodies).json()["duplicates"] == len(fired)

    session = Session.objects.get()
    assert (session.source, session.status, session.end_reason) == (
        Source.CODEX,
        SessionStatus.ENDED,
        "other",
    )
    assert session.external_id == fired[0]["session_id"]
    assert (session.prompt_count, session.tool_use_count, session.turn_count) == (2, 4, 2)
    assert session.compaction_count == 1  # PreCompact, PostCompact, SessionStart(compact)
    assert session.suspend_count == 1  # the resume after the first run's end
    assert session.model == "gpt-5.1-codex"
    assert (session.channel, session.cwd, session.project) == ("cli", CWD, CWD)
    kinds = list(session.events.order_by("occurred_at").values_list("hook", "kind", "phase"))
    assert kinds[:8] == [
        ("SessionStart", EventKind.SESSION_START, ""),
        ("UserPromptSubmit", EventKind.PROMPT, ""),
        ("PreToolUse", EventKind.TOOL_USE, "pre"),
        ("PostToolUse", EventKind.TOOL_USE, "post"),
        ("PreToolUse", EventKind.TOOL_USE, "pre"),
        ("PostToolUse", EventKind.TOOL_USE, "post"),
        ("Stop", EventKind.TURN_END, ""),
        ("SessionEnd", EventKind.SESSION_END, ""),
    ]
    assert [k for _, k, _ in kinds[8:]] == [
        EventKind.SESSION_RESUME,
        EventKind.PROMPT,
        EventKind.TOOL_USE,
        EventKind.TOOL_USE,
        EventKind.COMPACTION_BEFORE,
        EventKind.COMPACTION_AFTER,
        EventKind.COMPACTION_AFTER,
        EventKind.TOOL_USE,
        EventKind.TOOL_USE,
        EventKind.TURN_END,
        EventKind.SESSION_END,
    ]
    stop = session.events.filter(hook="Stop").earliest("occurred_at")
    assert stop.facts["final_message"].startswith("DONE Check the build")
    assert stop.facts["summarize"] is True
    tool = session.events.filter(hook="PostToolUse").earliest("occurred_at")
    assert tool.facts["tool_name"] == "Bash"
    assert digests(tool) == ("echo built-ok", "built-ok")


def test_codex_identity_follows_claude_codes_rule(api: APIClient) -> None:
    start = lines("codex")[0]
    remote = "https://user:hunter2@git.example.com/acme/billing-api.git"
    assert post(api, "codex", stamped(start, 0, git_remote=remote)).status_code == 200
    label = ApiToken.objects.get().gateway_name
    agent = Agent.objects.get()
    assert (agent.source, agent.external_id) == (
        Source.CODEX,
        f"{label}:git.example.com/acme/billing-api",
    )
    assert agent.name == "billing-api"
    assert Session.objects.get().project == "git.example.com/acme/billing-api"
    assert "hunter2" not in json.dumps(list(LifecycleEvent.objects.values_list("payload", "facts")))
    # The same project under Claude Code is another agent: each gateway keeps its own.
    claude = {**start, "hook_event_name": "SessionStart", "session_id": "claude-1"}
    api.post("/api/v1/hooks/claude-code", stamped(claude, 1, git_remote=remote), format="json")
    assert sorted(Agent.objects.values_list("source", flat=True)) == [
        Source.CLAUDE_CODE,
        Source.CODEX,
    ]


def codex_hook(name: str, **fields: Any) -> dict[str, Any]:
    return {"session_id": "c-1", "cwd": CWD, "hook_event_name": name, "model": "m", **fields}


def test_codex_turns_subagents_interruptions_and_unknown_hooks() -> None:
    adapt = lambda body: codex.adapt(body, gateway="laptop", now=NOW)  # noqa: E731
    interrupt = adapt(codex_hook("Interrupt"))
    assert (interrupt.kind, interrupt.facts["interrupted"], interrupt.facts["final_message"]) == (
        EventKind.TURN_END,
        True,
        "",
    )
    sub = adapt(
        codex_hook(
            "SubagentStop", agent_id="a-7", agent_type="explorer", last_assistant_message="ok"
        )
    )
    assert (sub.kind, sub.facts["subagent"], sub.facts["agent_id"]) == (
        EventKind.TURN_END,
        True,
        "a-7",
    )
    assert adapt(codex_hook("PermissionRequest", tool_name="Bash")).kind == EventKind.NOTIFICATION
    for name in ("SubagentStart", "PreModelRequest", "PostModelRequest", "NotYetInvented"):
        event = adapt(codex_hook(name, anything={"kept": True}))
        assert (event.kind, event.hook) == (EventKind.OTHER, name)
        assert event.payload["anything"] == {"kept": True}
    clear = adapt(codex_hook("SessionStart", source="clear"))
    assert (clear.kind, clear.facts["follows_cleared"]) == (EventKind.SESSION_START, True)
    # What the client read from the rollout.
    end = adapt(
        codex_hook(
            "SessionEnd",
            reason="other",
            sessionhub={"final_message": "bye", "reasoning_tail": "why", "token_count": 9120},
        )
    )
    assert (end.facts["final_message"], end.facts["reasoning"], end.facts["token_count"]) == (
        "bye",
        "why",
        9120,
    )
    post_compact = adapt(
        codex_hook("PostCompact", trigger="auto", sessionhub={"compact_summary": "S"})
    )
    assert (post_compact.kind, post_compact.facts["compact_summary"]) == (
        EventKind.COMPACTION_AFTER,
        "S",
    )


def test_codex_refuses_what_is_no_hook_body() -> None:
    for body, field in (
        ({"session_id": "s"}, "hook_event_name"),
        (codex_hook("Stop", session_id=""), "session_id"),
        (codex_hook("Stop", prompt=None, last_assistant_message=7), "last_assistant_message"),
        (codex_hook("Stop", sessionhub={"token_count": -1}), "sessionhub.token_count"),
        ([1], "$"),
    ):
        with pytest.raises(EventInvalid) as refused:
            codex.adapt(body, gateway="laptop", now=NOW)
        assert refused.value.field == field


# --------------------------------------------------------------------------- Gemini CLI


def test_a_gemini_session_as_the_cli_fired_it(api: APIClient) -> None:
    fired = lines("gemini-cli")
    response = post(api, "gemini-cli", fired)  # as the CLI wrote them: its own timestamps
    assert response.status_code == 200, response.content
    assert response.json()["accepted"] == len(fired)
    assert post(api, "gemini-cli", fired).json()["duplicates"] == len(fired)

    session = Session.objects.get()
    assert (session.source, session.status, session.end_reason) == (
        Source.GEMINI_CLI,
        SessionStatus.ENDED,
        "exit",
    )
    assert (session.prompt_count, session.tool_use_count, session.turn_count) == (2, 4, 2)
    assert session.suspend_count == 1
    # Without the client's word, an automatic PreCompress is a check, not a compaction.
    assert session.compaction_count == 0
    checks = session.events.filter(hook="PreCompress")
    assert checks.count() == 6
    assert {(e.kind, e.facts["compaction_check"]) for e in checks} == {(EventKind.OTHER, True)}
    events = list(session.events.order_by("occurred_at"))
    assert events[0].occurred_at == datetime.fromisoformat(fired[0]["timestamp"])
    prompts = [e for e in events if e.kind == EventKind.PROMPT]
    # The context hooks returned is put before the prompt; it is not the user's words.
    assert [p.facts["text"] for p in prompts] == [
        fired[1]["prompt"].split("</hook_context>\n\n", 1)[1],
        fired[12]["prompt"].split("</hook_context>\n\n", 1)[1],
    ]
    assert prompts[0].facts["text"].startswith("Check the build")
    assert "<hook_context>" in prompts[0].payload["prompt"]
    turn = next(e for e in events if e.kind == EventKind.TURN_END)
    assert turn.facts["final_message"].startswith("DONE Check the build")
    assert turn.facts["summarize"] is True
    write = session.events.get(hook="AfterTool", facts__tool_name="write_file")
    assert digests(write)[1].startswith("Successfully created and wrote to new file")
    shell = session.events.filter(hook="AfterTool", facts__tool_name="run_shell_command")
    assert digests(shell.earliest("occurred_at")) == ("echo built-ok", "built-ok")


def gemini_hook(name: str, **fields: Any) -> dict[str, Any]:
    return {"session_id": "g-1", "cwd": CWD, "hook_event_name": name, **fields}


def test_gemini_pre_compress_is_a_compaction_only_when_one_followed() -> None:
    adapt = lambda body: gemini_cli.adapt(body, gateway="laptop", now=NOW)  # noqa: E731
    check = adapt(gemini_hook("PreCompress", trigger="auto"))
    assert (check.kind, check.facts["compaction_check"]) == (EventKind.OTHER, True)
    said_no = adapt(gemini_hook("PreCompress", trigger="manual", sessionhub={"compacted": False}))
    assert said_no.kind == EventKind.OTHER
    manual = adapt(gemini_hook("PreCompress", trigger="manual"))  # /compress always compresses
    assert (manual.kind, manual.facts["trigger"]) == (EventKind.COMPACTION_BEFORE, "manual")
    done = adapt(
        gemini_hook(
            "PreCompress",
            trigger="auto",
            sessionhub={"compacted": True, "compact_summary": "<state_snapshot>x</state_snapshot>"},
        )
    )
    assert (done.kind, done.facts["compact_summary"]) == (
        EventKind.COMPACTION_BEFORE,
        "<state_snapshot>x</state_snapshot>",
    )


def test_gemini_model_hooks_keep_no_conversation_and_unknown_hooks_are_kept() -> None:
    adapt = lambda body: gemini_cli.adapt(body, gateway="laptop", now=NOW)  # noqa: E731
    request = {
        "model": "gemini-2.5-pro",
        "messages": [{"role": "user", "content": "the whole conversation"}] * 3,
        "config": {"temperature": 1},
    }
    after = adapt(
        gemini_hook(
            "AfterModel",
            llm_request=request,
            llm_response={"candidates": [{"content": {"parts": ["chunk"]}}]},
        )
    )
    assert (after.kind, after.facts["model"]) == (EventKind.OTHER, "gemini-2.5-pro")
    assert after.payload["llm_request"] == {
        "model": "gemini-2.5-pro",
        "config": {"temperature": 1},
        "messages": {"count": 3},
    }
    assert "the whole conversation" not in json.dumps(after.payload)
    assert after.payload["llm_response"] == {"candidates": {"count": 1}}
    odd = adapt(gemini_hook("BeforeModel", llm_request="not an object"))
    assert odd.kind == EventKind.OTHER and "model" not in odd.facts
    new = adapt(gemini_hook("SomethingNew", x=1))
    assert (new.kind, new.hook, new.payload["x"]) == (EventKind.OTHER, "SomethingNew", 1)
    failed = adapt(
        gemini_hook("AfterTool", tool_name="read_file", tool_response={"error": "no such file"})
    )
    assert (failed.kind, failed.phase, failed.facts["failed"]) == (EventKind.TOOL_USE, "post", True)
    note = adapt(gemini_hook("Notification", notification_type="ToolPermission", message="m"))
    assert (note.kind, note.facts["notification"]) == (EventKind.NOTIFICATION, "ToolPermission")


def test_gemini_times_and_refusals() -> None:
    with pytest.raises(EventInvalid) as refused:
        gemini_cli.adapt(gemini_hook("BeforeAgent", timestamp="yesterday"), gateway="g", now=NOW)
    assert refused.value.field == "timestamp"
    with pytest.raises(EventInvalid) as refused:
        gemini_cli.adapt(gemini_hook("BeforeAgent", prompt=["x"]), gateway="g", now=NOW)
    assert refused.value.field == "prompt"
    # The client's time wins over the CLI's own.
    event = gemini_cli.adapt(
        gemini_hook(
            "BeforeAgent",
            prompt="hi",
            timestamp="2026-11-27T17:00:00Z",
            sessionhub={"occurred_at": "2026-11-27T17:00:05Z"},
        ),
        gateway="g",
        now=NOW,
    )
    assert event.occurred_at == datetime(2026, 11, 27, 17, 0, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("source", "payload", "expected"),
    [
        (
            Source.CODEX,
            {"tool_input": {"command": "ls"}, "tool_response": "a\n"},
            ({"command": "ls"}, "a\n"),
        ),
        (
            Source.GEMINI_CLI,
            {
                "tool_input": {"path": "a"},
                "tool_response": {"llmContent": "x", "returnDisplay": "shown"},
            },
            ({"path": "a"}, "shown"),
        ),
        (
            Source.GEMINI_CLI,
            {"tool_input": {}, "tool_response": {"llmContent": "x", "returnDisplay": {"diff": 1}}},
            ({}, "x"),
        ),
        (
            Source.GEMINI_CLI,
            {"tool_input": {}, "tool_response": {"error": "boom", "llmContent": "x"}},
            ({}, "boom"),
        ),
    ],
)
def test_tool_input_and_output_by_gateway(source: str, payload: dict, expected: tuple) -> None:
    assert tool_io(source, payload) == expected


def test_continuity_for_a_cli_session_that_has_not_landed(api: APIClient) -> None:
    """The client's continuity request carries the start it could not deliver in time."""
    start = stamped(lines("codex")[0], 0)
    response = api.post(
        "/api/v1/continuity",
        {"source": "codex", "session_id": start["session_id"], "event": start},
        format="json",
    )
    assert response.status_code == 200, response.content
    session = Session.objects.get()
    assert (session.source, session.external_id) == (Source.CODEX, start["session_id"])
    assert post(api, "codex", start).json()["duplicates"] == 1
    gemini = lines("gemini-cli")[0]
    response = api.post(
        "/api/v1/continuity",
        {"source": "gemini-cli", "session_id": gemini["session_id"], "event": gemini},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert Session.objects.filter(source=Source.GEMINI_CLI).count() == 1
