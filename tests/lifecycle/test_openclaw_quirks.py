"""What OpenClaw 2026.9 really sends, through the OpenClaw endpoint: reset in place, no
resume after a restart, no start at all (agent --local), background runs, whole histories
in agent_end, every install's agent called ``main``, a message count of 0."""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle.models import LifecycleEvent, Session, SessionStatus
from memory.continuity.read import candidate_rows, candidates_from_rows

pytestmark = pytest.mark.django_db

TS = 1795313897000
KEY = "agent:main:main"


def _hook(hook: str, ts: int, sid: str = "s-1", ctx: dict[str, Any] | None = None, **event: Any):
    event.setdefault("sessionId", sid)
    return {
        "hook": hook,
        "event": event,
        "ctx": {"agentId": "main", "sessionId": sid, "sessionKey": KEY, **(ctx or {})},
        "ts": ts,
    }


def _post(api: Any, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    response = api.post("/api/v1/hooks/openclaw", bodies, format="json")
    assert response.status_code == 200, response.content
    return response.json()["results"]


def _reset_in_place(ts: int, sid: str = "s-1") -> list[dict[str, Any]]:
    return [
        _hook("session_end", ts, sid, reason="new", nextSessionId=sid, messageCount=0),
        _hook("session_start", ts + 1, sid, resumedFrom=sid),
    ]


def _turn(ts: int, text: str, sid: str = "s-1", trigger: str = "user") -> list[dict[str, Any]]:
    ctx = {"trigger": trigger, "modelId": "mock-1"}
    return [
        _hook("before_prompt_build", ts, sid, ctx, prompt=text),
        _hook(
            "agent_end",
            ts + 1,
            sid,
            ctx,
            success=True,
            messages=[
                {"role": "user", "content": "an earlier turn"},
                {"role": "assistant", "content": [{"type": "text", "text": "earlier answer"}]},
                {"role": "user", "content": text},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": f"on {text}"}]},
                {"role": "assistant", "content": [{"type": "text", "text": f"answer to {text}"}]},
            ],
        ),
    ]


@pytest.mark.parametrize("one_batch", [False, True])
def test_a_reset_in_place_is_a_new_session_chained_to_the_old(api: Any, one_batch: bool) -> None:
    batches = [
        [_hook("session_start", TS)],
        _turn(TS + 10, "first task"),
        _reset_in_place(TS + 20),
        _turn(TS + 30, "second task"),
    ]
    if one_batch:
        batches = [[body for batch in batches for body in batch]]
    for batch in batches:
        assert {r["status"] for r in _post(api, batch)} == {"accepted"}

    old, new = sorted(Session.objects.all(), key=lambda s: s.started_at)
    assert new.external_id == "s-1", "the gateway's id names the current session"
    assert old.external_id == "s-1~1"
    assert old.status == SessionStatus.ENDED and old.end_reason == "new"
    assert (old.prompt_count, old.turn_count) == (1, 1), "nothing piled onto the ended one"
    assert new.status == SessionStatus.ACTIVE and new.previous_session_id == old.pk
    assert (new.prompt_count, new.turn_count) == (1, 1)
    assert old.reported_message_count is None, "messageCount 0 is no count"
    assert LifecycleEvent.objects.filter(session=new).count() == 3
    # A redelivery of the reset changes nothing.
    assert {r["status"] for r in _post(api, _reset_in_place(TS + 20))} == {"duplicate"}
    assert Session.objects.count() == 2


def test_each_reset_makes_one_more_session(api: Any) -> None:
    _post(api, [_hook("session_start", TS)])
    for n in range(3):
        _post(api, _reset_in_place(TS + 100 * (n + 1)))
    chain = sorted(Session.objects.all(), key=lambda s: s.started_at)
    assert [s.external_id for s in chain] == ["s-1~1", "s-1~2", "s-1~3", "s-1"]
    assert [s.previous_session_id for s in chain[1:]] == [s.pk for s in chain[:-1]]


def test_activity_after_a_restart_resumes_the_suspended_session(api: Any) -> None:
    _post(api, [_hook("session_start", TS), *_turn(TS + 10, "one")])
    _post(api, [_hook("session_end", TS + 1000, reason="restart", messageCount=0)])
    session = Session.objects.get()
    assert session.status == SessionStatus.SUSPENDED
    # No session_start after a restart: the next turn is the proof it is back.
    _post(api, _turn(TS + 61_000, "two"))
    session.refresh_from_db()
    assert session.status == SessionStatus.ACTIVE
    assert session.suspend_count == 1 and session.suspended_seconds == pytest.approx(60.0)
    assert session.turn_count == 2


def test_events_for_an_unknown_session_start_it(api: Any) -> None:
    # agent --local: neither start nor end, only the run's own hooks.
    _post(api, _turn(TS, "local run", sid="local-1"))
    session = Session.objects.get(external_id="local-1")
    assert session.status == SessionStatus.ACTIVE
    assert session.started_at is not None and session.prompt_count == 1


def test_the_turn_only_its_own_messages_and_the_model(api: Any) -> None:
    _post(api, [_hook("session_start", TS), *_turn(TS + 10, "the question")])
    end = LifecycleEvent.objects.get(hook="agent_end")
    assert end.facts["messages_in_turn"] == 3
    assert end.facts["reasoning"] == "on the question"
    assert "earlier" not in end.facts["final_message"]
    assert end.payload["event"]["messages"] == {
        "count": 3,
        "by_role": {"user": 1, "assistant": 2},
    }
    session = Session.objects.get()
    assert session.model == "mock-1"
    assert LifecycleEvent.objects.get(hook="before_prompt_build").facts["text"] == "the question"


def test_background_runs_are_marked_and_never_continuity_candidates(api: Any) -> None:
    _post(api, [_hook("session_start", TS, "hb"), *_turn(TS + 10, "HEARTBEAT", "hb", "heartbeat")])
    _post(api, [_hook("session_end", TS + 20, "hb", reason="idle")])
    _post(api, [_hook("session_start", TS + 30, "mixed"), *_turn(TS + 40, "x", "mixed", "cron")])
    _post(api, [*_turn(TS + 50, "mine", "mixed"), _hook("session_end", TS + 60, "mixed")])
    _post(api, [*_turn(TS + 70, "later cron", "mixed", "cron")])
    heartbeat = Session.objects.get(external_id="hb")
    mixed = Session.objects.get(external_id="mixed")
    assert heartbeat.trigger == "heartbeat" and heartbeat.is_background
    assert mixed.trigger == "user" and not mixed.is_background, "one user run makes it theirs"
    now = mixed.last_event_at
    other = Session.objects.create(team=mixed.team, agent=mixed.agent, source="openclaw")
    rows = candidate_rows(mixed.agent_id, exclude_pk=other.pk, now=now)
    names = {prior.external_id for prior, _ in candidates_from_rows(rows)[0]}
    assert names == {"mixed"}


def test_two_gateways_main_agents_are_two_agents(api: Any) -> None:
    one = _hook("session_start", TS, "a-1")
    two = _hook("session_start", TS, "b-1")
    one["gateway"], two["gateway"] = "laptop-alice", "laptop-bob"
    _post(api, [one, two])
    alice = Session.objects.get(external_id="a-1").agent
    bob = Session.objects.get(external_id="b-1").agent
    assert alice.pk != bob.pk
    assert alice.external_id.endswith("/laptop-alice:main")
    # Named as in OpenClaw; who runs each is the session's developer.
    assert alice.name == bob.name == "main"
    assert (alice.developer, bob.developer) == ("laptop-alice", "laptop-bob")
    assert Session.objects.get(external_id="b-1").developer == "laptop-bob"


def test_redaction_markers_are_not_hot_topics() -> None:
    from memory.features import hot_topics

    topics = hot_topics(["deploy with [REDACTED:aws_access_key] and [REDACTED:password] today"])
    assert topics == ["deploy", "today"]
