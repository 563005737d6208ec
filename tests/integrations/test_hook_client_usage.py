"""Token usage and the developer through the real hook client: at each ``Stop`` the
client sums the turn's assistant messages' ``usage`` from the transcript (each message
once, though Claude Code writes it on several lines) and sends it with the turn; the
session holds the sums. The client also reports who runs it (``user@host``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lifecycle.models import EventKind, Session
from tests.conftest import FIXTURES
from tests.integrations.test_hook_client_e2e import HookClient, Scenario, replay

pytestmark = pytest.mark.django_db(transaction=True)


def transcript_usage(name: str) -> dict[str, int]:
    """The usage of every assistant message of the scenario, each message id once (its
    last line), read straight from the fixture."""
    last: dict[str, dict[str, Any]] = {}
    for line in (FIXTURES / "claude-code" / name / "transcript.jsonl").read_text().splitlines():
        record = json.loads(line)
        message = record.get("message") or {}
        if record.get("type") == "assistant" and "usage" in message:
            last[message["id"]] = message["usage"]
    return {
        "input_tokens": sum(u.get("input_tokens", 0) for u in last.values()),
        "output_tokens": sum(u.get("output_tokens", 0) for u in last.values()),
        "cache_read_tokens": sum(u.get("cache_read_input_tokens", 0) for u in last.values()),
        "cache_write_tokens": sum(u.get("cache_creation_input_tokens", 0) for u in last.values()),
    }


@pytest.mark.parametrize("name", ["basic", "compact"])
def test_turn_usage_and_developer_reach_the_session(
    live_server: Any, token: str, tmp_path: Path, name: str
) -> None:
    client = HookClient(tmp_path, live_server.url, token)
    client.env["SESSIONHUB_DEVELOPER"] = "maya@ledger-laptop"
    scenario = Scenario(name, tmp_path / "transcripts")
    replay(client, scenario)

    session = Session.objects.get(external_id=scenario.session_id)
    expected = transcript_usage(name)
    assert expected["output_tokens"] > 0
    got = {key: getattr(session, key) for key in expected}
    assert got == expected
    assert session.token_count == sum(expected.values())
    assert session.developer == session.agent.developer == "maya@ledger-laptop"
    assert session.agent.name == "ledger-sync" if name == "basic" else session.agent.name
    turns = session.events.filter(kind=EventKind.TURN_END, hook="Stop")
    assert all(e.facts["usage"]["model"] == "claude-opus-4-1" for e in turns)
    assert sum(e.facts["usage"]["output"] for e in turns) == expected["output_tokens"]
