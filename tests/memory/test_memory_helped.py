"""Did memory help? A scripted pair of sessions through the hooks endpoint: the second is
handed the first's preamble, closes its pending task (used) and never touches one of its
hot topics (not used); the record says which, and the team figure counts them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from lifecycle.models import Session
from memory.models import ContinuityRecord, McpCall, Pin, SessionFeatures
from memory.usage import usage_figure, usage_judge
from sessionhub.models import Team
from tests.factories import (
    ContinuityRecordFactory,
    MembershipFactory,
    SessionFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db(transaction=True)

CWD = "/home/dev/src/ledger"


def hooks(session_id: str, start: datetime, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        step
        | {"session_id": session_id, "cwd": CWD, "transcript_path": "/nonexistent.jsonl"}
        | {
            "sessionhub": {
                "event_id": f"{session_id}-{i}",
                "occurred_at": (start + timedelta(minutes=5 * i)).isoformat(),
            }
        }
        for i, step in enumerate(steps)
    ]


def post(api: APIClient, body: Any) -> Any:
    response = api.post("/api/v1/hooks/claude-code", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def edit(path: str) -> dict[str, Any]:
    return {
        "hook_event_name": "PostToolUse",
        "tool_name": "Edit",
        "tool_input": {"file_path": path, "old_string": "a", "new_string": "b"},
        "tool_response": {"filePath": path},
        "tool_use_id": f"toolu_{uuid.uuid4().hex[:12]}",
    }


def test_a_closed_task_counts_used_and_an_ignored_topic_does_not(
    api: APIClient, team: Team
) -> None:
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    earlier = datetime.now(UTC) - timedelta(hours=5)
    post(
        api,
        hooks(
            first,
            earlier,
            [
                {"hook_event_name": "SessionStart", "source": "startup"},
                {
                    "hook_event_name": "UserPromptSubmit",
                    "prompt": "The nightly ledger export rounds refunds wrong; fix the rounding",
                },
                edit(f"{CWD}/exporter/refunds.py"),
                {
                    "hook_event_name": "Stop",
                    "last_assistant_message": "Fixed the rounding in exporter/refunds.py. "
                    "TODO: task-4242 add a regression test for negative refunds.",
                },
                {"hook_event_name": "SessionEnd", "reason": "prompt_input_exit"},
            ],
        ),
    )
    # The second session's start is handed the first one's preamble.
    now = datetime.now(UTC) - timedelta(minutes=30)
    opening = hooks(second, now, [{"hook_event_name": "SessionStart", "source": "startup"}])
    answer = api.post(
        "/api/v1/continuity",
        {"source": "claude-code", "session_id": second, "event": opening[0]},
        format="json",
    )
    assert answer.status_code == 200, answer.content
    preamble = answer.json()["preamble"]
    assert "[task-4242]" in preamble and "add a regression test for negative refunds" in preamble
    assert "HOT TOPICS:" in preamble and "rounding" in preamble
    # It closes the task and never goes near the rounding.
    rest = hooks(
        second,
        now,
        [
            {"hook_event_name": "SessionStart", "source": "startup"},
            {"hook_event_name": "UserPromptSubmit", "prompt": "Add the regression test task-4242"},
            edit(f"{CWD}/tests/test_negative_refunds.py"),
            {
                "hook_event_name": "Stop",
                "last_assistant_message": "task-4242 done: the regression test is added.",
            },
            {"hook_event_name": "SessionEnd", "reason": "prompt_input_exit"},
        ],
    )
    post(api, rest[1:])

    record = ContinuityRecord.objects.get(session__external_id=second, stage="start")
    items = {(i["kind"], i.get("task_id") or i["text"]): i for i in record.usage["items"]}
    task = items[("task", "task-4242")]
    assert task["used"] and task["how"] == "closed it"
    assert not items[("topic", "rounding")]["used"]  # never came up
    assert items[("topic", "refunds")]["used"]  # the new test file's name holds it
    assert not items[("file", "exporter/refunds.py")]["used"]  # not touched again
    assert record.items_offered == len(items) and record.items_used == sum(
        1 for i in items.values() if i["used"]
    )
    # The task and the one topic it touched, of the task, a file and nine topics.
    assert (record.items_used, record.items_offered) == (2, 11)

    figure = usage_figure(team)
    assert (figure.offered, figure.used) == (record.items_offered, record.items_used)
    assert figure.percent == 18  # "18 % of preamble items used this week"

    # The overview says it, and the session page lists what was used.
    lead = MembershipFactory(team=team, user=UserFactory(username="lead")).user
    browser = Client()
    browser.force_login(lead)
    page = browser.get(reverse("dashboard:overview")).content.decode()
    assert 'data-percent="18"' in page and "of preamble items used this week" in page
    page = browser.get(reverse("dashboard:session", args=[record.session_id])).content.decode()
    assert "2 of 11 items used by the session afterwards" in page
    assert "closed it" in page


def test_the_figure_is_the_teams_alone_and_only_this_week(team: Team, other_team: Team) -> None:
    mine = SessionFactory(agent__team=team)
    ContinuityRecordFactory(session=mine, items_offered=4, items_used=1)
    old = ContinuityRecordFactory(session=mine, items_offered=10, items_used=10)
    ContinuityRecord.objects.filter(pk=old.pk).update(
        created_at=datetime.now(UTC) - timedelta(days=8)
    )
    ContinuityRecordFactory(session=SessionFactory(agent__team=other_team), items_offered=9)
    ContinuityRecordFactory(session=mine)  # not judged yet: left out
    figure = usage_figure(team)
    assert (figure.offered, figure.used, figure.percent) == (4, 1, 25)
    assert usage_figure(other_team).used == 0
    assert Session.objects.count() == 2 and not McpCall.objects.exists()


def test_an_mcp_answers_items_are_judged_against_the_session(team: Team) -> None:
    """The task ids, files and pins an answer names: used when the session then closes,
    touches or follows them."""
    session = SessionFactory(agent__team=team, cwd="/w")
    pin = Pin.objects.create(
        team=team,
        agent=session.agent,
        label="deploys",
        content="staging first, then production",
        pinned_at=timezone.now(),
    )
    call = McpCall.objects.create(
        team=team,
        session=session,
        requested_by="token:x",
        tool="search_memory",
        answer="task-77 is open (see billing/invoice.py); task-78 waits on docs/notes.md",
        returned_pins=[pin.pk],
        created_at=timezone.now(),
    )
    texts = {
        "prompts": ["finish task-77"],
        "tools": ["/w/billing/invoice.py", "deploy to staging first then production"],
        "finals": ["task-77 done."],
    }
    features = SessionFeatures(team=team, session=session, done_tasks=["task-77"])
    assert usage_judge(session, texts, features, None) == 1
    call.refresh_from_db()
    used = {i["text"]: i["how"] for i in call.usage["items"]}
    assert used == {
        "task-77": "closed it",
        "task-78": "",
        "billing/invoice.py": "touched it",
        "docs/notes.md": "",
        "deploys: staging first, then production": "followed it",
    }
    assert (call.items_used, call.items_offered) == (3, 5)
    assert usage_figure(team).mcp_percent == 60
