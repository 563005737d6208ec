"""A manual continue reaches a running Claude Code session through the real hook client:
made while the session runs, it is handed over in the answer to the session's next
``UserPromptSubmit`` (printed as that hook's ``additionalContext``), once, and the record
says when it was delivered. A continue into an ended session is refused."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import requests

from lifecycle.models import Session
from memory.models import ContinuityRecord

from .test_hook_client_continuity import context_of, post_past_session
from .test_hook_client_e2e import HookClient

pytestmark = pytest.mark.django_db(transaction=True)

CWD = "/home/dev/src/notifier-2024"


def continue_(url: str, token: str, target: Session, source: Session) -> requests.Response:
    return requests.post(
        f"{url}/api/v1/sessions/{target.pk}/continue",
        json={"source_session_id": str(source.pk)},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )


def test_a_manual_continue_reaches_the_running_session_at_its_next_prompt_once(
    live_server: Any, token: str, tmp_path: Path
) -> None:
    old = str(uuid.uuid4())
    post_past_session(
        live_server.url,
        token,
        old,
        hours_ago=30,
        prompt="Fix the websocket reconnect backoff in the notifier",
        final="Reconnect backoff now has jitter. TODO: task-7311 cover the heartbeat timeout.",
    )
    client = HookClient(tmp_path, live_server.url, token)
    new = str(uuid.uuid4())
    common = {"session_id": new, "cwd": CWD, "transcript_path": str(tmp_path / "t.jsonl")}
    client.hook(common | {"hook_event_name": "SessionStart", "source": "startup"})
    client.hook(common | {"hook_event_name": "UserPromptSubmit", "prompt": "Polish the email"})
    # Later prompts print nothing while no continue waits.
    assert client.hook(common | {"hook_event_name": "UserPromptSubmit", "prompt": "ok"}) == ""

    session = Session.objects.get(external_id=new)
    source = Session.objects.get(external_id=old)
    answer = continue_(live_server.url, token, session, source)
    assert answer.status_code == 200, answer.text
    record = ContinuityRecord.objects.get(session=session, trigger="manual")
    assert record.delivered_at is None  # made, not handed over yet
    assert "task-7311" in record.preamble

    out = client.hook(common | {"hook_event_name": "UserPromptSubmit", "prompt": "go on"})
    assert context_of(out, "UserPromptSubmit") == record.preamble
    record.refresh_from_db()
    assert record.delivered_at is not None

    # Once: the prompts after it get nothing more.
    assert client.hook(common | {"hook_event_name": "UserPromptSubmit", "prompt": "next"}) == ""
    record.refresh_from_db()
    assert ContinuityRecord.objects.filter(session=session, trigger="manual").count() == 1
    assert client.spooled() == [] and "manual continue delivered" in client.log()

    # An ended session takes no continue: a clear 409, nothing recorded.
    client.hook(common | {"hook_event_name": "SessionEnd", "reason": "prompt_input_exit"})
    other = str(uuid.uuid4())
    post_past_session(live_server.url, token, other, hours_ago=2, prompt="Other", final="Done.")
    refused = continue_(live_server.url, token, session, Session.objects.get(external_id=other))
    assert refused.status_code == 409, refused.text
    assert refused.json()["code"] == "session_closed"
    assert "has ended" in refused.json()["message"]
    assert ContinuityRecord.objects.filter(session=session, trigger="manual").count() == 1


def test_the_plugins_pending_request_hands_a_waiting_continue_over_once(
    live_server: Any, token: str
) -> None:
    """OpenClaw asks ``pending`` at each later prompt: the waiting continue once, then
    nothing; an unknown session has nothing waiting (and none is made)."""
    old, new = str(uuid.uuid4()), str(uuid.uuid4())
    post_past_session(live_server.url, token, old, hours_ago=5, prompt="Fix the retry", final="")
    headers = {"Authorization": f"Bearer {token}"}
    start = {"hook_event_name": "SessionStart", "source": "startup", "session_id": new, "cwd": CWD}
    url = f"{live_server.url}/api/v1/hooks/claude-code"
    assert requests.post(url, json=start, headers=headers, timeout=30).status_code == 200
    target, source = Session.objects.get(external_id=new), Session.objects.get(external_id=old)
    assert continue_(live_server.url, token, target, source).status_code == 200
    record = ContinuityRecord.objects.get(session=target, trigger="manual")

    def pending(session_id: str) -> dict[str, Any]:
        body = {"source": "claude-code", "session_id": session_id, "pending": True}
        answer = requests.post(
            f"{live_server.url}/api/v1/continuity", json=body, headers=headers, timeout=30
        )
        assert answer.status_code == 200, answer.text
        return answer.json()

    first = pending(new)
    assert first["preamble"] == record.preamble and first["record_ids"] == [record.pk]
    assert pending(new)["preamble"] == ""
    assert pending("never-seen") == {
        "session_id": None,
        "trigger": "manual",
        "preamble": "",
        "record_ids": [],
    }
    assert not Session.objects.filter(external_id="never-seen").exists()
