"""Continuity through the real Claude Code hook client (issue 12): the session's first
prompt gets a preamble chosen by relevance, printed as ``UserPromptSubmit`` context; an
older session about this work beats a newer one about something else.

The two prior sessions are posted to the hooks endpoint as the client would have posted
them days and hours ago (the client stamps ``occurred_at`` with its own clock, so the
past can only be told through the public API); the new session runs through the client.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from lifecycle.models import LifecycleEvent, Session
from memory.models import ContinuityRecord

from .test_hook_client_e2e import HookClient

pytestmark = pytest.mark.django_db(transaction=True)

CWD = "/home/dev/src/notifier-2024"


def post_past_session(
    url: str, token: str, session_id: str, hours_ago: float, prompt: str, final: str
) -> None:
    start = datetime.now(UTC) - timedelta(hours=hours_ago + 1)
    hooks = [
        {"hook_event_name": "SessionStart", "source": "startup"},
        {"hook_event_name": "UserPromptSubmit", "prompt": prompt},
        {"hook_event_name": "Stop", "last_assistant_message": final},
        {"hook_event_name": "SessionEnd", "reason": "prompt_input_exit"},
    ]
    body = []
    for i, hook in enumerate(hooks):
        moment = start + timedelta(minutes=20 * i)
        body.append(
            hook
            | {"session_id": session_id, "cwd": CWD, "transcript_path": "/nonexistent.jsonl"}
            | {"sessionhub": {"event_id": f"{session_id}-{i}", "occurred_at": moment.isoformat()}}
        )
    response = requests.post(
        f"{url}/api/v1/hooks/claude-code",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    assert all(r["status"] == "accepted" for r in response.json()["results"])


def context_of(out: str, hook: str) -> str:
    answer = json.loads(out)
    assert answer["hookSpecificOutput"]["hookEventName"] == hook
    return answer["hookSpecificOutput"]["additionalContext"]


def test_the_first_prompt_gets_the_relevant_session_through_the_hook_client(
    live_server: Any, token: str, tmp_path: Path
) -> None:
    old, fresh = str(uuid.uuid4()), str(uuid.uuid4())
    post_past_session(
        live_server.url,
        token,
        old,
        hours_ago=6 * 24,
        prompt="Fix the websocket reconnect backoff in the notifier",
        final="Reconnect backoff now has jitter. Next: cover the heartbeat timeout in tests.",
    )
    post_past_session(
        live_server.url,
        token,
        fresh,
        hours_ago=1,
        prompt="Polish the email template styles",
        final="Template spacing fixed. TODO: task-9901 dark mode colours.",
    )
    client = HookClient(tmp_path, live_server.url, token)
    new = str(uuid.uuid4())
    common = {"session_id": new, "cwd": CWD, "transcript_path": str(tmp_path / "t.jsonl")}

    # SessionStart: no prompt yet, the project-level preamble (the newest session).
    start = client.hook(common | {"hook_event_name": "SessionStart", "source": "startup"})
    assert "email template" in context_of(start, "SessionStart")

    # The first prompt: chosen by relevance, printed as UserPromptSubmit context.
    prompt = "the notifier websocket keeps dropping after a reconnect, check the backoff"
    out = client.hook(common | {"hook_event_name": "UserPromptSubmit", "prompt": prompt})
    context = context_of(out, "UserPromptSubmit")
    assert "websocket reconnect backoff" in context
    assert "heartbeat timeout" in context
    assert "task-9901" not in context and "email template" not in context

    session = Session.objects.get(external_id=new)
    record = ContinuityRecord.objects.get(session=session, stage="prompt")
    assert record.preamble == context
    assert [s.external_id for s in record.sources.all()] == [old]
    best = max(record.candidates, key=lambda c: c["score"])
    assert best["external_id"] == old and "websocket" in best["matched_terms"]

    # Later prompts ask nothing and print nothing.
    again = client.hook(common | {"hook_event_name": "UserPromptSubmit", "prompt": "and now?"})
    assert again == ""
    assert ContinuityRecord.objects.filter(session=session).count() == 2
    # The prompt event went to the hooks endpoint and in the continuity request: stored once.
    assert LifecycleEvent.objects.filter(session=session, kind="prompt").count() == 2
    assert client.spooled() == [] and client.log() == ""
