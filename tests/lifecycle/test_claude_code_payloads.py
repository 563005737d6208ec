"""The Claude Code adapter and the fold on payloads as Claude Code 2.1.330 really sends
them (recorded from the real CLI against the local Messages API mock): a /compact, a
background subagent, a failing API turn, a headless session's model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from lifecycle import services
from lifecycle.adapters import claude_code
from lifecycle.models import EventKind, LifecycleEvent, Session
from sessionhub.models import Team

SID = "e3b807a0-0908-4454-be9f-fa81138fb0d3"
T0 = datetime(2026, 11, 23, 21, 0, tzinfo=UTC)
SUMMARY = "<summary>Compacted: the user is checking SessionHub hooks.</summary>"
NOTIFICATION = (
    "<task-notification>\n<task-id>a83db62cfa0eb226d</task-id>\n"
    "<tool-use-id>toolu_cdbd30b0f9554ea195369ea3</tool-use-id>\n<status>completed</status>\n"
    '<summary>Agent "list files" completed</summary>\n</task-notification>'
)


def hook(n: int, name: str, **fields: object) -> dict:
    return {
        "session_id": SID,
        "transcript_path": f"/home/u/.claude/projects/-w-p/{SID}.jsonl",
        "cwd": "/w/p",
        "hook_event_name": name,
        "sessionhub": {
            "event_id": f"{SID}-{n}",
            "occurred_at": (T0 + timedelta(seconds=n)).isoformat(),
        },
        **fields,
    }


def adapt(body: dict) -> object:
    return claude_code.adapt(body, gateway="gw", now=T0)


def ingest(team: Team, bodies: list[dict]) -> Session:
    results = services.events_ingest(
        team=team, bodies=bodies, adapter=lambda b, now: claude_code.adapt(b, gateway="gw", now=now)
    )
    assert [r.status for r in results] == [services.ACCEPTED] * len(bodies), results
    return Session.objects.get(external_id=SID)


def compaction(start: int, trigger: str) -> list[dict]:
    """The hooks one compaction fires, in Claude Code's order."""
    return [
        hook(start, "PreCompact", trigger=trigger, custom_instructions=None),
        hook(
            start + 1,
            "SubagentStop",
            agent_id="a57a9e7a90c3db69f",
            agent_type="",
            stop_hook_active=False,
            last_assistant_message=SUMMARY,
            background_tasks=[],
        ),
        hook(start + 2, "SessionStart", source="compact", model="claude-opus-5-5"),
        hook(start + 3, "PostCompact", trigger=trigger, compact_summary=SUMMARY),
    ]


@pytest.mark.django_db
def test_one_compact_counts_once_and_adds_no_turn(team: Team) -> None:
    bodies = [
        hook(0, "SessionStart", source="startup"),
        hook(1, "UserPromptSubmit", prompt="first"),
        hook(2, "Stop", last_assistant_message="DONE first"),
        *compaction(3, "manual"),
        hook(7, "UserPromptSubmit", prompt="go on"),
        *compaction(8, "auto"),
        hook(12, "Stop", last_assistant_message="DONE go on"),
        hook(13, "SessionEnd", reason="other"),
    ]
    session = ingest(team, bodies)
    assert session.compaction_count == 2  # one /compact, one automatic
    assert session.turn_count == 2
    assert session.prompt_count == 2
    summaries = [
        e.facts["compact_summary"]
        for e in LifecycleEvent.objects.filter(session=session, hook="PostCompact")
    ]
    assert summaries == [SUMMARY, SUMMARY]


def test_a_real_subagent_stop_is_still_a_turn_end() -> None:
    event = adapt(
        hook(
            1,
            "SubagentStop",
            agent_id="a8",
            agent_type="general-purpose",
            last_assistant_message="DONE Look around",
        )
    )
    assert (event.kind, event.facts["subagent"]) == (EventKind.TURN_END, True)
    assert event.facts["agent_type"] == "general-purpose"


@pytest.mark.django_db
def test_task_notification_is_no_prompt_and_subagent_tools_are_attributed(team: Team) -> None:
    bodies = [
        hook(0, "SessionStart", source="startup"),
        hook(1, "UserPromptSubmit", prompt="delegate the listing"),
        hook(
            2,
            "PreToolUse",
            tool_name="Bash",
            tool_input={"command": "echo sub"},
            agent_id="a83db62cfa0eb226d",
            agent_type="general-purpose",
            tool_use_id="t1",
        ),
        hook(
            3,
            "PostToolUse",
            tool_name="Bash",
            tool_input={"command": "echo sub"},
            tool_response={"stdout": "sub"},
            agent_id="a83db62cfa0eb226d",
            agent_type="general-purpose",
            tool_use_id="t1",
        ),
        hook(4, "UserPromptSubmit", prompt=NOTIFICATION),
        hook(5, "Stop", last_assistant_message="DONE"),
        hook(6, "SessionEnd", reason="other"),
    ]
    session = ingest(team, bodies)
    assert session.prompt_count == 1
    kinds = list(
        LifecycleEvent.objects.filter(session=session)
        .order_by("occurred_at")
        .values_list("kind", flat=True)
    )
    assert kinds.count(EventKind.NOTIFICATION) == 1  # still in the timeline
    post = LifecycleEvent.objects.get(session=session, hook="PostToolUse")
    assert (post.facts["agent_id"], post.facts["agent_type"]) == (
        "a83db62cfa0eb226d",
        "general-purpose",
    )


def test_stop_failure_is_a_failed_turn_without_final_words() -> None:
    event = adapt(
        hook(
            3,
            "StopFailure",
            error="unknown",
            last_assistant_message="API Error: 400 mock: this turn fails",
        )
    )
    assert event.kind == EventKind.TURN_END
    assert event.facts["failed"] is True
    assert event.facts["final_message"] == ""
    assert event.facts["error"] == "unknown"


def test_model_from_the_client_when_the_hook_names_none() -> None:
    body = hook(0, "Stop", last_assistant_message="DONE")
    body["sessionhub"]["model"] = "claude-opus-5-5"
    assert adapt(body).facts["model"] == "claude-opus-5-5"
    body["model"] = "claude-sonnet-9"
    assert adapt(body).facts["model"] == "claude-sonnet-9"


def test_a_bash_observation_shows_stdout_first() -> None:
    from memory.pipeline import digest

    response = {
        "stdout": "hi\nthere",
        "stderr": "",
        "interrupted": False,
        "isImage": False,
        "noOutputExpected": False,
    }
    assert digest(response).startswith("hi there")


def test_a_clear_start_says_it_follows_the_cleared_session() -> None:
    cleared = adapt(hook(0, "SessionStart", source="clear"))
    assert cleared.facts["follows_cleared"] is True
    assert cleared.facts["start_source"] == "clear"
    for source in ("startup", "resume", "compact", "fork"):
        assert "follows_cleared" not in adapt(hook(0, "SessionStart", source=source)).facts
