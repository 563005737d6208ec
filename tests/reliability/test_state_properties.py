"""Property tests (Hypothesis) on the adapters and the session state machine.

Any sequence of a session's events — canonical kinds or either gateway's hooks, random
timestamps, delivered in any order, in several batches, with repeats of the same event
id — must end in a consistent state:

* one effective start; the session is ``ended``/``crashed`` at one of its end events
  (the first, or the end that followed a resume stamped after an earlier end: such a
  resume reopens it), and only when an end was stored;
* the status is the one a straightforward model of the lifecycle gives;
* the counters equal the stored events (``event_count`` the rows, prompts, tool uses and
  turns the rows of those kinds; a subagent's stop is its own, no turn of the session);
* the state the ingest path built step by step equals a fold of the whole log, and two
  sessions fed the same events in different orders and batches end in the same state;
* each event is stored once, its first delivery answered ``accepted`` and every repeat
  ``duplicate``; nothing raises.

Most examples call ``lifecycle.services.events_ingest`` directly; a few go over HTTP.
``SESSIONHUB_PROPERTY_EXAMPLES`` raises the number of examples for a deeper run.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from lifecycle import services, state
from lifecycle.adapters import (
    EventInvalid,
    NormalizedEvent,
    canonical,
    claude_code,
    codex,
    gemini_cli,
    openclaw,
)
from lifecycle.adapters.base import EVENT_ID_RE
from lifecycle.ingest import fold
from lifecycle.models import EventKind, LifecycleEvent, Session, SessionStatus, Source
from sessionhub.models import Team

EXAMPLES = int(os.environ.get("SESSIONHUB_PROPERTY_EXAMPLES", "60"))
PROPERTY = settings(
    phases=[Phase.explicit, Phase.reuse, Phase.generate]
    if os.environ.get("NOSHRINK")
    else list(Phase),
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# Timestamps lie in the last week, in whole milliseconds (OpenClaw's resolution).
BASE = datetime.now(UTC).replace(microsecond=0) - timedelta(days=7)

KINDS = [k for k in EventKind.values]
END_REASONS = ["new", "reset", "idle", "daily", "clear", "logout", "crashed", "other", ""]


@dataclass
class Spec:
    """One generated event: what it is, before it is written as some gateway's body."""

    kind: str
    variant: int
    at_ms: int
    reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def occurred_at(self) -> datetime:
        return BASE + timedelta(milliseconds=self.at_ms)


# --- writing a spec as each gateway's body -------------------------------------------------


def canonical_body(spec: Spec, sid: str, eid: str) -> tuple[dict[str, Any], str, str]:
    """(body, expected canonical kind, expected phase)."""
    body: dict[str, Any] = {
        "event_id": eid,
        "kind": spec.kind,
        "occurred_at": spec.occurred_at.isoformat(),
        "agent_id": f"agent-{sid}",
        "session_id": sid,
    }
    phase = ""
    if spec.kind in (EventKind.SESSION_END, EventKind.SESSION_SUSPEND) and spec.reason:
        body["reason"] = spec.reason
    if spec.kind == EventKind.PROMPT:
        body["text"] = "fix the flaky test"
    if spec.kind == EventKind.TOOL_USE:
        body["tool_name"] = "Bash"
        phase = ["", "pre", "post"][spec.variant % 3]
    if spec.kind == EventKind.TURN_END:
        body["final_message"] = "done <think>it was the cache</think>"
        phase = ["", "final"][spec.variant % 2]
    if phase:
        body["phase"] = phase
    if spec.variant % 4 == 0:
        body["message_count"] = spec.variant
    body["payload"] = spec.extra
    return body, spec.kind, phase


def claude_body(spec: Spec, sid: str, eid: str) -> tuple[dict[str, Any], str, str]:
    common = {
        "session_id": sid,
        "transcript_path": f"/home/dev/.claude/projects/p/{sid}.jsonl",
        "cwd": f"/home/dev/src/project-{sid[:8]}",
        "permission_mode": "default",
        "sessionhub": {"event_id": eid, "occurred_at": spec.occurred_at.isoformat()},
        **spec.extra,
    }
    kind, phase = spec.kind, ""
    if spec.kind == EventKind.SESSION_START:
        hook = {
            "hook_event_name": "SessionStart",
            "source": ["startup", "clear", "fork"][spec.variant % 3],
        }
    elif spec.kind in (EventKind.SESSION_RESUME, EventKind.SESSION_SUSPEND):
        # Claude Code has no suspend: both become a resume.
        hook, kind = (
            {"hook_event_name": "SessionStart", "source": "resume"},
            EventKind.SESSION_RESUME,
        )
    elif spec.kind == EventKind.SESSION_END:
        hook = {"hook_event_name": "SessionEnd", "reason": spec.reason or "other"}
    elif spec.kind == EventKind.COMPACTION_BEFORE:
        hook = {"hook_event_name": "PreCompact", "trigger": "auto"}
    elif spec.kind == EventKind.COMPACTION_AFTER:
        hook = (
            {"hook_event_name": "PostCompact"}
            if spec.variant % 2
            else {"hook_event_name": "SessionStart", "source": "compact"}
        )
    elif spec.kind == EventKind.PROMPT:
        hook = {"hook_event_name": "UserPromptSubmit", "prompt": "add a test"}
    elif spec.kind == EventKind.TOOL_USE:
        name = ["PreToolUse", "PostToolUse", "PostToolUseFailure"][spec.variant % 3]
        hook = {"hook_event_name": name, "tool_name": "Edit", "tool_input": {"file_path": "a.py"}}
        phase = "pre" if name == "PreToolUse" else "post"
    elif spec.kind == EventKind.TURN_END:
        hook = {
            "hook_event_name": ["Stop", "SubagentStop"][spec.variant % 2],
            "last_assistant_message": "All green.",
        }
    elif spec.kind == EventKind.NOTIFICATION:
        hook = {"hook_event_name": "Notification", "message": "waiting"}
    else:  # command, other: hooks SessionHub does not know yet
        hook, kind = {"hook_event_name": f"FutureHook{spec.variant}", "x": 1}, EventKind.OTHER
    return {**common, **hook}, kind, phase


def openclaw_body(spec: Spec, sid: str, eid: str) -> tuple[dict[str, Any], str, str]:
    kind, phase = spec.kind, ""
    event: dict[str, Any] = {"sessionId": sid, **spec.extra}
    if spec.kind == EventKind.SESSION_START:
        hook = "session_start"
    elif spec.kind == EventKind.SESSION_RESUME:
        hook = ["session_resume", "session_start"][spec.variant % 2]
        kind = EventKind.SESSION_RESUME if hook == "session_resume" else EventKind.SESSION_START
    elif spec.kind == EventKind.SESSION_SUSPEND:
        hook = ["session_suspend", "session_end"][spec.variant % 2]
        event["reason"] = ["shutdown", "restart"][spec.variant % 2]
    elif spec.kind == EventKind.SESSION_END:
        hook = "session_end"
        reason = spec.reason if spec.reason not in ("shutdown", "restart") else "new"
        event.update({"reason": reason, "messageCount": spec.variant})
    elif spec.kind == EventKind.COMPACTION_BEFORE:
        hook = "before_compaction"
        event.update({"messageCount": 40, "tokenCount": 90_000})
    elif spec.kind == EventKind.COMPACTION_AFTER:
        hook = "after_compaction"
        event["compactedCount"] = 30
    elif spec.kind == EventKind.PROMPT:
        hook = "message_received"
        event.update({"from": "user", "content": "ship it"})
    elif spec.kind == EventKind.TOOL_USE:
        hook = ["before_tool_call", "after_tool_call"][spec.variant % 2]
        event.update({"toolName": "exec", "params": {"cmd": "ls"}})
        phase = "pre" if hook == "before_tool_call" else "post"
    elif spec.kind == EventKind.TURN_END:
        hook = ["agent_end", "before_agent_finalize"][spec.variant % 2]
        phase = "" if hook == "agent_end" else "final"
        if hook == "agent_end":
            event["messages"] = [
                {"role": "user", "content": [{"type": "text", "text": "go"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
            ]
        else:
            event["lastAssistantMessage"] = "done"
    elif spec.kind == EventKind.COMMAND:
        hook = ["command:new", "command:reset", "command:stop"][spec.variant % 3]
    else:
        hook, kind = f"future_hook_{spec.variant}", EventKind.OTHER
    if spec.kind == EventKind.NOTIFICATION:
        hook, kind = "gateway_notice", EventKind.OTHER  # OpenClaw has no notification hook
    body = {
        "hook": hook,
        "eventId": eid,
        "event": event,
        "ctx": {"agentId": f"agent-{sid}", "sessionId": sid, "sessionKey": f"agent:a:{sid}"},
        "ts": int(spec.occurred_at.timestamp() * 1000),
    }
    return body, kind, phase


def codex_body(spec: Spec, sid: str, eid: str) -> tuple[dict[str, Any], str, str]:
    common = {
        "session_id": sid,
        "transcript_path": f"/home/dev/.codex/sessions/rollout-{sid}.jsonl",
        "cwd": f"/home/dev/src/project-{sid[:8]}",
        "model": "gpt-5.1-codex",
        "sessionhub": {"event_id": eid, "occurred_at": spec.occurred_at.isoformat()},
        **spec.extra,
    }
    kind, phase = spec.kind, ""
    if spec.kind == EventKind.SESSION_START:
        hook = {"hook_event_name": "SessionStart", "source": ["startup", "clear"][spec.variant % 2]}
    elif spec.kind in (EventKind.SESSION_RESUME, EventKind.SESSION_SUSPEND):
        # Codex has no suspend: both become a resume.
        hook = {"hook_event_name": "SessionStart", "source": "resume"}
        kind = EventKind.SESSION_RESUME
    elif spec.kind == EventKind.SESSION_END:
        hook = {"hook_event_name": "SessionEnd", "reason": spec.reason or "other"}
    elif spec.kind == EventKind.COMPACTION_BEFORE:
        hook = {"hook_event_name": "PreCompact", "trigger": "auto"}
    elif spec.kind == EventKind.COMPACTION_AFTER:
        hook = (
            {"hook_event_name": "PostCompact", "trigger": "auto"}
            if spec.variant % 2
            else {"hook_event_name": "SessionStart", "source": "compact"}
        )
    elif spec.kind == EventKind.PROMPT:
        hook = {"hook_event_name": "UserPromptSubmit", "prompt": "add a test", "turn_id": "t"}
    elif spec.kind == EventKind.TOOL_USE:
        name = ["PreToolUse", "PostToolUse"][spec.variant % 2]
        hook = {"hook_event_name": name, "tool_name": "Bash", "tool_input": {"command": "ls"}}
        phase = "pre" if name == "PreToolUse" else "post"
    elif spec.kind == EventKind.TURN_END:
        name = ["Stop", "SubagentStop", "Interrupt"][spec.variant % 3]
        hook = {"hook_event_name": name, "last_assistant_message": "All green."}
    elif spec.kind == EventKind.NOTIFICATION:
        hook = {"hook_event_name": "PermissionRequest", "tool_name": "Bash"}
    else:  # command, other: hooks SessionHub does not know yet
        hook, kind = {"hook_event_name": f"FutureHook{spec.variant}", "x": 1}, EventKind.OTHER
    return {**common, **hook}, kind, phase


def gemini_body(spec: Spec, sid: str, eid: str) -> tuple[dict[str, Any], str, str]:
    common = {
        "session_id": sid,
        "transcript_path": f"/home/dev/.gemini/tmp/p/chats/session-{sid}.jsonl",
        "cwd": f"/home/dev/src/project-{sid[:8]}",
        "timestamp": spec.occurred_at.isoformat(),
        **spec.extra,
    }
    common["sessionhub"] = {"event_id": eid}
    if spec.variant % 2:  # the client's time, or the CLI's own timestamp alone
        common["sessionhub"]["occurred_at"] = spec.occurred_at.isoformat()
    kind, phase = spec.kind, ""
    if spec.kind == EventKind.SESSION_START:
        hook = {"hook_event_name": "SessionStart", "source": ["startup", "clear"][spec.variant % 2]}
    elif spec.kind in (EventKind.SESSION_RESUME, EventKind.SESSION_SUSPEND):
        hook = {"hook_event_name": "SessionStart", "source": "resume"}
        kind = EventKind.SESSION_RESUME
    elif spec.kind == EventKind.SESSION_END:
        hook = {"hook_event_name": "SessionEnd", "reason": spec.reason or "exit"}
    elif spec.kind in (EventKind.COMPACTION_BEFORE, EventKind.COMPACTION_AFTER):
        # One hook, before the compression: a compaction when one followed, else a check.
        hook = {"hook_event_name": "PreCompress", "trigger": ["manual", "auto"][spec.variant % 2]}
        kind = EventKind.COMPACTION_BEFORE if spec.variant % 2 == 0 else EventKind.OTHER
        if spec.variant % 4 == 1:
            common["sessionhub"]["compacted"] = True
            kind = EventKind.COMPACTION_BEFORE
    elif spec.kind == EventKind.PROMPT:
        hook = {"hook_event_name": "BeforeAgent", "prompt": "<hook_context>x</hook_context> go"}
    elif spec.kind == EventKind.TOOL_USE:
        name = ["BeforeTool", "AfterTool"][spec.variant % 2]
        hook = {"hook_event_name": name, "tool_name": "read_file", "tool_input": {"path": "a"}}
        phase = "pre" if name == "BeforeTool" else "post"
    elif spec.kind == EventKind.TURN_END:
        hook = {"hook_event_name": "AfterAgent", "prompt": "go", "prompt_response": "All green."}
    elif spec.kind == EventKind.NOTIFICATION:
        hook = {"hook_event_name": "Notification", "notification_type": "ToolPermission"}
    else:  # command, other: the model hooks, and hooks SessionHub does not know yet
        name = ["AfterModel", f"FutureHook{spec.variant}"][spec.variant % 2]
        hook, kind = {"hook_event_name": name, "llm_request": {"messages": []}}, EventKind.OTHER
    return {**common, **hook}, kind, phase


GATEWAYS: dict[str, tuple[Callable[..., Any], str]] = {
    "generic": (canonical_body, Source.GENERIC),
    "claude-code": (claude_body, Source.CLAUDE_CODE),
    "openclaw": (openclaw_body, Source.OPENCLAW),
    "codex": (codex_body, Source.CODEX),
    "gemini-cli": (gemini_body, Source.GEMINI_CLI),
}


def adapter(gateway: str) -> Callable[[Any, datetime], NormalizedEvent]:
    if gateway == "claude-code":
        return lambda body, now: claude_code.adapt(body, gateway="prop", now=now)
    if gateway == "codex":
        return lambda body, now: codex.adapt(body, gateway="prop", now=now)
    if gateway == "gemini-cli":
        return lambda body, now: gemini_cli.adapt(body, gateway="prop", now=now)
    if gateway == "openclaw":
        return lambda body, now: openclaw.adapt(body, now=now)
    return lambda body, now: canonical.adapt(body, now=now)


# --- strategies ---------------------------------------------------------------------------

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=20),
)
json_values = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=8).filter(lambda k: "\x00" not in k), inner, max_size=4),
    ),
    max_leaves=12,
)
# Extra fields a gateway may add; never one an adapter reads.
extras = st.dictionaries(st.sampled_from(["x_trace", "x_build", "x_host"]), json_values, max_size=2)


@st.composite
def specs(draw: Any, max_events: int = 24) -> list[Spec]:
    n = draw(st.integers(1, max_events))
    # Unique timestamps: two events of one session at the same millisecond have no order
    # but arrival, so "the same end state whatever the order" is asked of distinct times.
    times = draw(st.lists(st.integers(0, 6 * 86_400_000), min_size=n, max_size=n, unique=True))
    kinds = draw(st.lists(st.sampled_from(KINDS).map(str), min_size=n, max_size=n))
    result = []
    for kind, at_ms in zip(kinds, times, strict=True):
        result.append(
            Spec(
                kind=kind,
                variant=draw(st.integers(0, 11)),
                at_ms=at_ms,
                reason=draw(st.sampled_from(END_REASONS)),
                extra=draw(extras),
            )
        )
    return result


@st.composite
def deliveries(draw: Any, n: int) -> list[list[int]]:
    """Indexes of the events in the order sent, repeats included, cut into batches."""
    repeats = draw(st.lists(st.integers(0, n - 1), max_size=n))
    sequence = draw(st.permutations(list(range(n)) + repeats))
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(sequence) - 1)), max_size=5))))
    batches, start = [], 0
    for cut in [*cuts, len(sequence)]:
        if cut > start:
            batches.append(sequence[start:cut])
            start = cut
    return batches


# --- the model ------------------------------------------------------------------------------

STARTS = {EventKind.SESSION_START, EventKind.SESSION_RESUME}


# Activity on a suspended session resumes it (OpenClaw sends no resume after a restart).
ACTIVITY = (EventKind.PROMPT, EventKind.TOOL_USE, EventKind.TURN_END)


def model_status(log: list[tuple[datetime, int, str, str]]) -> tuple[str, datetime | None]:
    """The lifecycle as the design states it, from (time, order, kind, reason) in time
    order (ties in the order the fold takes them):
    (status, ended_at). A resume stamped after the end reopens the session; nothing else
    does, and ``ended_at`` is the end that closed it last. Activity on a suspended session
    resumes it."""
    status, started, ended_at = SessionStatus.ACTIVE, False, None
    for at, _, kind, reason in sorted(log):
        if status in (SessionStatus.ENDED, SessionStatus.CRASHED):
            if kind in STARTS and started and ended_at is not None and at > ended_at:
                status, ended_at = SessionStatus.ACTIVE, None
            elif kind in STARTS:
                started = True
            continue
        if kind in STARTS:
            if started and status == SessionStatus.SUSPENDED:
                status = SessionStatus.ACTIVE
            started = True
        elif kind == EventKind.SESSION_SUSPEND and status == SessionStatus.ACTIVE:
            status = SessionStatus.SUSPENDED
        elif kind in ACTIVITY and status == SessionStatus.SUSPENDED:
            status = SessionStatus.ACTIVE  # the agent at work again: a resume
        elif kind == EventKind.SESSION_END:
            status = SessionStatus.CRASHED if reason == "crashed" else SessionStatus.ENDED
            ended_at = at
    return status, ended_at


def fold_state(session: Session) -> dict[str, Any]:
    return {name: getattr(session, name) for name in state.FOLD_FIELDS}


def check_session(session: Session, expected: dict[str, tuple[str, str]]) -> None:
    """Every invariant of one session against its stored log; ``expected`` maps each
    event id to the (kind, phase) its body should have been mapped to."""
    rows = list(
        LifecycleEvent.objects.filter(session=session).values_list(
            "event_id", "kind", "phase", "occurred_at", "facts", "id", "hook"
        )
    )
    ids = [r[0] for r in rows]
    assert len(ids) == len(set(ids)) == len(expected), (len(ids), len(expected))
    assert set(ids) == set(expected)
    for event_id, kind, phase, *_ in rows:
        want_kind, want_phase = expected[event_id]
        # A second start is stored as a resume: both start the session in the fold.
        if want_kind == EventKind.SESSION_START:
            assert kind in STARTS, (event_id, kind)
        else:
            assert kind == want_kind, (event_id, kind, want_kind)
        assert phase == want_phase, (event_id, phase, want_phase)

    by_kind = [r[1] for r in rows]
    assert session.event_count == len(rows)
    assert session.prompt_count == by_kind.count(EventKind.PROMPT)
    assert session.tool_use_count == sum(
        1 for r in rows if r[1] == EventKind.TOOL_USE and r[2] != "pre"
    )
    # A subagent's stop (SubagentStop) says so, and is no turn of the session.
    turn_ends = [r for r in rows if r[1] == EventKind.TURN_END]
    subagent = {r[0] for r in turn_ends if r[6] == "SubagentStop"}
    assert subagent == {r[0] for r in turn_ends if (r[4] or {}).get("subagent")}
    assert session.turn_count == sum(
        1 for r in turn_ends if r[2] != "final" and r[0] not in subagent
    )
    compactions = sum(
        1 for k in by_kind if k in (EventKind.COMPACTION_BEFORE, EventKind.COMPACTION_AFTER)
    )
    assert session.compaction_count <= compactions

    # Exactly one effective start; at most one stored session_start.
    assert by_kind.count(EventKind.SESSION_START) <= 1
    assert session.has_start == any(k in STARTS for k in by_kind)
    times = [r[3] for r in rows]
    assert session.first_event_at == min(times)
    assert session.last_event_at == max(times)

    ends = sorted(r[3] for r in rows if r[1] == EventKind.SESSION_END)
    log = [(r[3], r[5], r[1], (r[4] or {}).get("reason", "")) for r in rows]
    status, ended_at = model_status(log)
    assert (session.status, session.ended_at) == (status, ended_at)
    if session.status in (SessionStatus.ENDED, SessionStatus.CRASHED):
        # Ended at one of its end events: the first, or the last one after a resume.
        assert session.ended_at in ends
    else:
        assert session.ended_at is None
    if session.status == SessionStatus.SUSPENDED:
        assert session.suspended_at is not None

    # What the ingest path built step by step is what a fold of the whole log gives.
    stored = fold_state(session)
    refolded = Session.objects.get(pk=session.pk)
    fold.session_refold(refolded)
    assert fold_state(refolded) == stored


def ingest(
    team: Team, gateway: str, specs_: list[Spec], batches: list[list[int]], tag: str
) -> tuple[Session, dict[str, tuple[str, str]]]:
    """Send the events in the given batches; check each answer; the session and what
    each event id should have been mapped to."""
    writer, source = GATEWAYS[gateway]
    sid = f"{tag}-{uuid.uuid4().hex[:12]}"
    bodies, expected = [], {}
    for i, spec in enumerate(specs_):
        eid = f"{sid}-e{i}"
        body, kind, phase = writer(spec, sid, eid)
        bodies.append(body)
        expected[eid] = (kind, phase)
    seen: set[int] = set()
    run = adapter(gateway)
    for batch in batches:
        results = services.events_ingest(team=team, bodies=[bodies[i] for i in batch], adapter=run)
        assert len(results) == len(batch)
        first_in_batch: set[int] = set()
        for i, result in zip(batch, results, strict=True):
            assert result.status != services.REJECTED, (result, bodies[i])
            new = i not in seen and i not in first_in_batch
            first_in_batch.add(i)
            want = services.ACCEPTED if new else services.DUPLICATE
            assert result.status == want, (i, result, batch)
        seen |= set(batch)
    session = Session.objects.get(team=team, source=source, external_id=sid)
    return session, expected


@pytest.mark.django_db
@pytest.mark.parametrize("gateway", list(GATEWAYS))
def test_any_order_batching_and_repeats_end_consistent(team: Team, gateway: str) -> None:
    @PROPERTY
    @given(data=st.data())
    def run(data: Any) -> None:
        events = data.draw(specs())
        first = data.draw(deliveries(len(events)), label="first deliveries")
        second = data.draw(deliveries(len(events)), label="second deliveries")
        one, expected_one = ingest(team, gateway, events, first, "a")
        two, expected_two = ingest(team, gateway, events, second, "b")
        check_session(one, expected_one)
        check_session(two, expected_two)
        # The same events, however they came, give the same state.
        assert fold_state(one) == fold_state(two)

    run()


@pytest.mark.django_db(transaction=True)
def test_over_http_the_same_holds(live_server: Any, team: Team, token: str) -> None:
    """A smaller number of examples through the real HTTP stack, batches as JSON lists."""
    import requests

    http = requests.Session()
    http.headers["Authorization"] = f"Bearer {token}"
    paths = {
        "generic": "/api/v1/events",
        "claude-code": "/api/v1/hooks/claude-code",
        "openclaw": "/api/v1/hooks/openclaw",
        "codex": "/api/v1/hooks/codex",
        "gemini-cli": "/api/v1/hooks/gemini-cli",
    }

    @settings(PROPERTY, max_examples=max(6, EXAMPLES // 5))
    @given(gateway=st.sampled_from(list(GATEWAYS)), data=st.data())
    def run(gateway: str, data: Any) -> None:
        events = data.draw(specs(max_events=12))
        batches = data.draw(deliveries(len(events)))
        writer, source = GATEWAYS[gateway]
        sid = f"http-{uuid.uuid4().hex[:12]}"
        bodies, expected = [], {}
        for i, spec in enumerate(events):
            body, kind, phase = writer(spec, sid, f"{sid}-e{i}")
            bodies.append(body)
            expected[f"{sid}-e{i}"] = (kind, phase)
        for batch in batches:
            response = http.post(
                live_server.url + paths[gateway], json=[bodies[i] for i in batch], timeout=30
            )
            assert response.status_code == 200, response.text
            assert response.json()["rejected"] == 0
        check_session(Session.objects.get(source=source, external_id=sid), expected)

    run()


# --- the fold alone (no database) -------------------------------------------------------------


def fold_events(specs_: list[Spec]) -> list[state.FoldEvent]:
    return [
        state.FoldEvent(
            kind=s.kind,
            occurred_at=s.occurred_at,
            phase="",
            facts={"reason": "crashed"} if s.reason == "crashed" else {},
            order=i,
        )
        for i, s in enumerate(specs_)
    ]


@settings(max_examples=200, deadline=None, database=None)
@given(events=specs(max_events=40), data=st.data())
def test_fold_is_order_free_and_equals_step_by_step(events: list[Spec], data: Any) -> None:
    folded = Session()
    state.fold(folded, fold_events(events))
    shuffled = Session()
    state.fold(shuffled, data.draw(st.permutations(fold_events(events))))
    assert fold_state(folded) == fold_state(shuffled)
    stepped = Session()
    state.reset(stepped)
    for event in sorted(fold_events(events), key=lambda e: e.occurred_at):
        state.apply(stepped, event)
    assert fold_state(stepped) == fold_state(folded)
    log = [(s.occurred_at, i, s.kind, s.reason) for i, s in enumerate(events)]
    assert (folded.status, folded.ended_at) == model_status(log)
    assert folded.event_count == len(events)
    assert folded.suspended_seconds >= 0


# --- the adapters alone -----------------------------------------------------------------------

hostile_bodies = st.one_of(
    json_values,
    st.dictionaries(
        st.sampled_from(
            [
                "event_id",
                "kind",
                "occurred_at",
                "agent_id",
                "session_id",
                "session_key",
                "hook_event_name",
                "hook",
                "event",
                "ctx",
                "ts",
                "eventId",
                "sessionhub",
                "reason",
                "phase",
                "message_count",
                "token_count",
                "payload",
                "source",
                "cwd",
                "prompt",
                "tool_name",
                "messages",
                "text",
            ]
        ),
        json_values,
        max_size=10,
    ),
)


@settings(max_examples=500, deadline=None, database=None)
@given(body=hostile_bodies, which=st.sampled_from(list(GATEWAYS)))
def test_adapters_take_any_json_and_raise_only_event_invalid(body: Any, which: str) -> None:
    now = datetime.now(UTC)
    try:
        event = adapter(which)(body, now)
    except EventInvalid as exc:
        assert isinstance(exc.field, str) and exc.reason and exc.code
        return
    assert event.kind in EventKind.values
    assert EVENT_ID_RE.match(event.event_id) or event.event_id.startswith("sha256:")
    assert len(event.event_id) <= 200
    assert event.occurred_at.tzinfo is not None
    for name in ("session_external_id", "session_key", "hook", "channel", "cwd", "project"):
        assert isinstance(getattr(event, name), str)
    assert isinstance(event.facts, dict) and isinstance(event.payload, dict)


@pytest.mark.django_db
def test_events_ingest_never_raises_on_any_json(team: Team) -> None:
    @settings(
        max_examples=max(60, EXAMPLES * 3),
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(
        bodies=st.lists(hostile_bodies, min_size=1, max_size=6),
        which=st.sampled_from(list(GATEWAYS)),
    )
    def run(bodies: list[Any], which: str) -> None:
        before = LifecycleEvent.objects.count()
        results = services.events_ingest(team=team, bodies=bodies, adapter=adapter(which))
        assert len(results) == len(bodies)
        stored = sum(r.status == services.ACCEPTED for r in results)
        assert LifecycleEvent.objects.count() == before + stored

    run()
