"""Token usage per turn and per session (issue 36): OpenClaw's agent_end messages (or the
plugin's sum of a cut turn), the generic API's ``usage``; bad counts are left out, never
a refused event; the session's sums do not depend on the order events arrive in."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lifecycle.models import EventKind, LifecycleEvent, Session
from tests.conftest import openclaw_hooks

pytestmark = pytest.mark.django_db


def test_openclaw_agent_end_usage_is_summed_into_the_session(api: Any) -> None:
    lines = openclaw_hooks("basic")
    for line in lines:
        assert api.post("/api/v1/hooks/openclaw", line, format="json").status_code == 200
    session = Session.objects.get()
    # The fixture's turn: two assistant messages, 3260 + 6652 in, 122 + 283 out.
    assert (session.input_tokens, session.output_tokens) == (9912, 405)
    assert session.token_count == 9912 + 405
    turn = LifecycleEvent.objects.get(kind=EventKind.TURN_END)
    assert turn.facts["usage"] == {"input": 9912, "output": 405, "model": "deepseek-r1:14b"}


def test_a_cut_turn_counts_the_plugins_sum(api: Any) -> None:
    lines = copy.deepcopy(openclaw_hooks("basic"))
    for line in lines:
        if line["hook"] == "agent_end":
            line["event"]["messages"] = line["event"]["messages"][-1:]
            line["event"]["turnUsage"] = {"input": 50_000, "output": 900, "cacheRead": 7}
        assert api.post("/api/v1/hooks/openclaw", line, format="json").status_code == 200
    session = Session.objects.get()
    assert (session.input_tokens, session.output_tokens, session.cache_read_tokens) == (
        50_000,
        900,
        7,
    )


def _turn(n: int, second: int, usage: Any) -> dict[str, Any]:
    return {
        "event_id": f"t{n}",
        "kind": "turn_end",
        "agent_id": "research",
        "session_id": "s1",
        "occurred_at": f"2026-11-20T10:00:{second:02d}Z",
        "usage": usage,
    }


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 2, 0)])
def test_generic_usage_sums_in_any_order_and_bad_counts_are_left_out(
    api: Any, order: tuple[int, ...]
) -> None:
    start = {
        "event_id": "s",
        "kind": "session_start",
        "agent_id": "research",
        "session_id": "s1",
        "occurred_at": "2026-11-20T10:00:00Z",
    }
    turns = [
        _turn(1, 10, {"input": 100, "output": 20, "cache_read": 5, "model": "gpt-4o"}),
        _turn(2, 20, {"input": 300, "output": "lots", "cache_write": -4, "x": 1}),
        _turn(3, 30, {"input": True}),  # nothing usable: no usage fact at all
    ]
    assert api.post("/api/v1/events", start, format="json").status_code == 200
    for i in order:
        answer = api.post("/api/v1/events", turns[i], format="json")
        assert answer.status_code == 200 and answer.json()["accepted"] == 1
    session = Session.objects.get()
    assert (
        session.input_tokens,
        session.output_tokens,
        session.cache_read_tokens,
        session.cache_write_tokens,
    ) == (400, 20, 5, 0)
    assert session.token_count == 425
    assert "usage" not in LifecycleEvent.objects.get(event_id="t3").facts


def test_the_api_lists_sessions_by_developer_with_their_tokens(api: Any) -> None:
    for developer, session in (("alice@laptop", "s1"), ("bob@desk", "s2")):
        body = {
            "event_id": f"e-{session}",
            "kind": "turn_end",
            "agent_id": "research",
            "session_id": session,
            "developer": developer,
            "usage": {"input": 10, "output": 5},
        }
        assert api.post("/api/v1/events", body, format="json").status_code == 200
    answer = api.get("/api/v1/sessions", {"developer": "bob@desk"})
    assert answer.status_code == 200
    [row] = answer.json()["results"]
    assert (row["external_id"], row["developer"]) == ("s2", "bob@desk")
    assert (row["input_tokens"], row["output_tokens"], row["token_count"]) == (10, 5, 15)
