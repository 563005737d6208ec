"""Hostile input: every request here gets a clear 4xx in the one error shape, and the
database is left exactly as it was (no event, session, agent, pin or record).

Extends tests/lifecycle/test_ingest_errors.py (which covers one example of each kind on
the ingest endpoints) to every endpoint that takes a body, keys as well as values, every
field of every endpoint, both gateways' own fields, batches, timestamps, ids and tokens.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

import pytest
import requests
from rest_framework.test import APIClient

from lifecycle.models import Agent, LifecycleEvent, Session
from memory.models import ContinuityRecord, Pin
from memory.services.pins import pin_create
from sessionhub.models import ApiToken, Team

pytestmark = pytest.mark.django_db

CANONICAL = {
    "event_id": "evt-1",
    "kind": "session_start",
    "occurred_at": "2026-01-01T00:00:00Z",
    "agent_id": "research",
    "session_id": "s-1",
}
CLAUDE = {
    "session_id": "c386bbc4-cd61-4e30-98f1-6adf91b7584a",
    "transcript_path": "/home/dev/.claude/projects/p/c386bbc4.jsonl",
    "cwd": "/home/dev/src/billing-api",
    "permission_mode": "default",
    "hook_event_name": "UserPromptSubmit",
    "prompt": "Migrate the session store",
}
OPENCLAW = {
    "hook": "message_received",
    "event": {"from": "user", "content": "hello"},
    "ctx": {"agentId": "main", "sessionId": "oc-1", "sessionKey": "agent:main:discord:1"},
    "ts": None,
}
CODEX = {**CLAUDE, "hook_event_name": "UserPromptSubmit", "model": "gpt-5.1-codex"}
GEMINI = {**CLAUDE, "hook_event_name": "BeforeAgent", "timestamp": None}
INGEST = {
    "events": CANONICAL,
    "hooks/claude-code": CLAUDE,
    "hooks/openclaw": OPENCLAW,
    "hooks/codex": CODEX,
    "hooks/gemini-cli": GEMINI,
}


@pytest.fixture(autouse=True)
def _fresh_times(settings: Any) -> None:
    """Give the fixtures' bodies timestamps inside the accepted window."""
    from django.utils import timezone

    now = timezone.now()
    CANONICAL["occurred_at"] = now.isoformat()
    OPENCLAW["ts"] = int(now.timestamp() * 1000)
    GEMINI["timestamp"] = now.isoformat()


def counts() -> dict[str, int]:
    return {
        model.__name__: model.objects.count()
        for model in (LifecycleEvent, Session, Agent, Pin, ContinuityRecord)
    }


@pytest.fixture
def unchanged() -> Callable[[], None]:
    """Call at the end of a test: nothing was stored since the test's data was set up."""
    state: dict[str, dict[str, int]] = {}

    def check() -> None:
        assert counts() == state["before"]

    state["before"] = counts()

    def reset() -> None:
        state["before"] = counts()

    check.reset = reset  # type: ignore[attr-defined]
    return check


def post_raw(client: APIClient, path: str, body: bytes) -> Any:
    return client.generic("POST", f"/api/v1/{path}", body, content_type="application/json")


def assert_4xx(response: Any, status: int | None = None, code: str | None = None) -> dict:
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    if status is not None:
        assert response.status_code == status, response.content[:300]
    body = response.json()
    assert set(body) == {"message", "code", "extra"}, body
    assert body["message"] and body["code"]
    if code is not None:
        assert body["code"] == code, body
    return body


@pytest.fixture
def targets(api: APIClient, team: Team) -> list[tuple[str, str, dict[str, Any]]]:
    """(method, path, a valid body) for every endpoint that takes a JSON body."""
    api.post("/api/v1/events", CANONICAL, format="json")
    session = Session.objects.get()
    agent = session.agent
    pin = pin_create(agent=agent, label="keep", content="x")
    return [
        ("post", "events", CANONICAL),
        ("post", "hooks/claude-code", CLAUDE),
        ("post", "hooks/openclaw", OPENCLAW),
        ("post", "continuity", {"session_id": "s-1", "agent_id": "research", "keywords": ["a"]}),
        ("post", f"agents/{agent.pk}/pins", {"label": "new pin", "content": "c"}),
        ("patch", f"pins/{pin.pk}", {"content": "changed"}),
        ("post", f"sessions/{session.pk}/continue", {"source_session_id": str(session.pk)}),
        ("post", "hooks/codex", CODEX),
        ("post", "hooks/gemini-cli", GEMINI),
    ]


def send(client: APIClient, method: str, path: str, body: bytes) -> Any:
    return client.generic(method.upper(), f"/api/v1/{path}", body, content_type="application/json")


# --- strings PostgreSQL cannot hold, in values and in keys ----------------------------------

BAD_STRINGS = {
    "nul": ("a\\u0000b", "nul_character"),
    "lone high surrogate": ("\\ud800", "invalid_unicode"),
    "lone low surrogate": ("x\\udfffy", "invalid_unicode"),
    "reversed pair": ("\\udc00\\ud800", "invalid_unicode"),
}


def _with_bad(body: dict[str, Any], bad: str, where: str) -> bytes:
    """The body as JSON text with ``bad`` (a JSON escape) as a value, key, or deep."""
    text = json.dumps(body)[:-1]
    if where == "value":
        return (text + f', "x_note": "{bad}"}}').encode()
    if where == "key":
        return (text + f', "{bad}": 1}}').encode()
    return (text + f', "x_deep": {{"a": [{{"b": {{"{bad}": ["{bad}"]}}}}]}}}}').encode()


@pytest.mark.parametrize("where", ["value", "key", "deep"])
@pytest.mark.parametrize("kind", list(BAD_STRINGS))
def test_unstorable_strings_anywhere_are_400(
    api: APIClient, targets: Any, unchanged: Any, kind: str, where: str
) -> None:
    unchanged.reset()
    bad, code = BAD_STRINGS[kind]
    for method, path, body in targets:
        assert_4xx(send(api, method, path, _with_bad(body, bad, where)), 400, code)
    unchanged()


@pytest.mark.parametrize(
    "raw",
    [
        b"\xff\xfe{}",
        b'{"a": "\xc0\xaf"}',  # overlong encoding of "/"
        b'{"a": "\xed\xa0\x80"}',  # a surrogate encoded as UTF-8 (CESU-8)
        b'{"a": "\xe2\x82"}',  # truncated sequence
        b'{"a": "\x80"}',  # lone continuation byte
        b'{"a": "\xf5\x80\x80\x80"}',  # past U+10FFFF
        b'{"\xfe": 1}',  # in a key
        '{"a": "caf\u00e9"}'.encode("latin-1"),  # latin-1 sent as if UTF-8
        '{"a": 1}'.encode("utf-16"),
    ],
)
def test_invalid_utf8_is_400(api: APIClient, targets: Any, unchanged: Any, raw: bytes) -> None:
    unchanged.reset()
    for method, path, _ in targets:
        assert_4xx(send(api, method, path, raw), 400, "invalid_encoding")
    unchanged()


def test_a_byte_order_mark_is_400_not_500(api: APIClient, unchanged: Any) -> None:
    body = b"\xef\xbb\xbf" + json.dumps(CANONICAL).encode()
    assert_4xx(post_raw(api, "events", body), 400)
    unchanged()


# --- size, depth, numbers -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"[" * 10_000 + b"]" * 10_000, "too_deep"),
        (b'{"a":' * 10_000 + b"1" + b"}" * 10_000, "too_deep"),
        (b'{"payload": ' + b'{"a":' * 70 + b"1" + b"}" * 70 + b"}", "too_deep"),
        (b'[{"a": [' * 3000 + b"]}]" * 3000, "too_deep"),
        (b'{"n": 18446744073709551616}', "number_out_of_range"),  # 2**64
        (b'{"n": 9223372036854775808}', "number_out_of_range"),  # 2**63
        (b'{"n": -9223372036854775809}', "number_out_of_range"),
        (b'{"deep": {"list": [1, 2, 1' + b"0" * 400 + b"]}}", "number_out_of_range"),
        (b'{"f": 1e400}', "number_out_of_range"),
        (b'{"f": -1e400}', "number_out_of_range"),
        (b'{"f": Infinity}', "malformed_json"),
        (b'{"f": NaN}', "malformed_json"),
        (b'{"k": 1, "k": 2', "malformed_json"),
        (b"\x00", "malformed_json"),
    ],
)
def test_depth_and_numbers(
    api: APIClient, targets: Any, unchanged: Any, raw: bytes, code: str
) -> None:
    unchanged.reset()
    for method, path, _ in targets:
        assert_4xx(send(api, method, path, raw), 400, code)
    unchanged()


def test_64_bit_limits_themselves_are_fine(api: APIClient) -> None:
    body = {**CANONICAL, "payload": {"max": 2**63 - 1, "min": -(2**63), "tiny": 5e-324}}
    response = api.post("/api/v1/events", body, format="json")
    assert response.status_code == 200, response.content
    stored = LifecycleEvent.objects.get().payload
    assert stored == {"max": 2**63 - 1, "min": -(2**63), "tiny": 5e-324}


def test_nesting_at_the_limit_is_fine_and_one_past_is_not(api: APIClient) -> None:
    from sessionhub.parsers import MAX_DEPTH

    def nested(depth: int) -> Any:
        value: Any = 1
        for _ in range(depth):
            value = {"a": value}
        return value

    # The body itself is level 0, its payload level 1.
    ok = {**CANONICAL, "payload": nested(MAX_DEPTH - 1)}
    assert api.post("/api/v1/events", ok, format="json").status_code == 200
    deep = {**CANONICAL, "event_id": "evt-2", "payload": nested(MAX_DEPTH + 1)}
    assert_4xx(api.post("/api/v1/events", deep, format="json"), 400, "too_deep")
    assert LifecycleEvent.objects.count() == 1


@pytest.mark.parametrize("path", list(INGEST))
def test_oversize_body_with_content_length_is_413(
    api: APIClient, settings: Any, unchanged: Any, path: str
) -> None:
    settings.SESSIONHUB = {**settings.SESSIONHUB, "MAX_BODY_BYTES": 4096}
    body = dict(INGEST[path])
    body["x_blob"] = "x" * 5000
    assert_4xx(post_raw(api, path, json.dumps(body).encode()), 413, "payload_too_large")
    # A body exactly at the limit is read whole.
    unchanged()


def test_a_lying_content_length_is_400_not_a_partial_event(api: APIClient, unchanged: Any) -> None:
    body = json.dumps(CANONICAL).encode()
    response = api.generic(
        "POST",
        "/api/v1/events",
        body,
        content_type="application/json",
        CONTENT_LENGTH=str(len(body) // 2),
    )
    assert_4xx(response, 400, "malformed_json")
    unchanged()


@pytest.mark.parametrize(
    ("path", "wrap"),
    [
        ("events", lambda items: items),
        ("events", lambda items: {"events": items}),
        ("hooks/claude-code", lambda items: items),
        ("hooks/openclaw", lambda items: items),
        ("hooks/codex", lambda items: items),
        ("hooks/gemini-cli", lambda items: items),
    ],
)
def test_batch_past_the_limit_is_413(
    api: APIClient, settings: Any, unchanged: Any, path: str, wrap: Callable[[Any], Any]
) -> None:
    settings.SESSIONHUB = {**settings.SESSIONHUB, "MAX_BATCH_EVENTS": 50}
    base = INGEST[path]
    items = []
    for i in range(51):
        item = json.loads(json.dumps(base))
        if path == "events":
            item["event_id"] = f"evt-{i}"
        elif path in ("hooks/claude-code", "hooks/codex", "hooks/gemini-cli"):
            item["sessionhub"] = {"event_id": f"cc-{i}"}
        else:
            item["eventId"] = f"oc-{i}"
        items.append(item)
    assert_4xx(api.post(f"/api/v1/{path}", wrap(items), format="json"), 413, "batch_too_large")
    unchanged()
    assert api.post(f"/api/v1/{path}", wrap(items[:50]), format="json").status_code == 200
    assert LifecycleEvent.objects.count() == 50


def test_empty_and_odd_top_levels(api: APIClient, unchanged: Any) -> None:
    for path in INGEST:
        for raw, code in (
            (b"[]", "empty_batch"),
            (b"   ", "empty_body"),
            (b'"text"', "invalid_events"),
            (b"42", "invalid_events"),
            (b"null", "invalid_events"),
            (b"[1, 2, 3]", "invalid_events"),
            (b"[[]]", "invalid_events"),
        ):
            assert_4xx(post_raw(api, path, raw), None, code)
    assert_4xx(post_raw(api, "events", b'{"events": {"a": 1}}'), 400, "wrong_type")
    unchanged()


# --- wrong types in every field -----------------------------------------------------------

WRONG = {
    "int": 7,
    "float": 1.5,
    "bool": True,
    "list": ["x"],
    "dict": {"x": 1},
    "string": "not-what-was-expected",
    "null-ish": "",
}

# Each field an adapter reads, the body it lives in, and which wrong values it must
# refuse (a value of the right type is skipped: "string" for a string field, ...).
CANONICAL_FIELDS = {
    "event_id": "str-id",
    "kind": "choice",
    "occurred_at": "time",
    "source": "choice",
    "agent_id": "str-id",
    "agent_name": "str",
    "session_id": "str-id",
    "session_key": "str",
    "channel": "str",
    "cwd": "str",
    "project": "str",
    "git_remote": "str",
    "model": "str",
    "reason": "str",
    "previous_session_id": "str-id",
    "next_session_id": "str-id",
    "text": "str",
    "final_message": "str",
    "reasoning": "str",
    "tool_name": "str",
    "phase": "choice",
    "message_count": "count",
    "token_count": "count",
    "payload": "dict",
}


def wrong_values(kind: str) -> list[Any]:
    """Values of the wrong type for a field of this kind (null is absence for optional
    fields, so it is left out; "" is refused only where a value is required)."""
    values: list[Any] = [1.5, True, ["x"], {"x": 1}]
    if kind != "count":
        values.append(7)
    if kind in ("count", "time", "dict", "choice"):
        values.append("not-what-was-expected")
    if kind == "count":
        values += [-1, 2**31, "7"]
    if kind == "time":
        values += ["yesterday", "2026-13-40T99:00:00Z", "1700000000"]
    if kind == "dict":
        values = [7, 1.5, True, ["x"], "x"]
    return values


REQUIRED_CANONICAL = {"event_id", "agent_id", "session_id"}


@pytest.mark.parametrize("field", list(CANONICAL_FIELDS))
def test_canonical_wrong_types_in_every_field(api: APIClient, unchanged: Any, field: str) -> None:
    kind = CANONICAL_FIELDS[field]
    values = wrong_values(kind)
    if field in REQUIRED_CANONICAL:
        values += ["", None]
    for value in values:
        body = assert_4xx(
            api.post("/api/v1/events", {**CANONICAL, field: value}, format="json"), 400
        )
        result = body["extra"]["results"][0]
        assert result["status"] == "rejected" and result["field"] == field, (value, result)
        assert result["reason"] and result["code"]
    unchanged()


# Claude Code: (the hook it matters for, the field path) for every field the adapter reads.
CLAUDE_FIELDS = [
    ("UserPromptSubmit", "hook_event_name", "required-str"),
    ("UserPromptSubmit", "session_id", "str-id"),
    ("UserPromptSubmit", "cwd", "str"),
    ("UserPromptSubmit", "model", "str"),
    ("UserPromptSubmit", "prompt", "str"),
    ("UserPromptSubmit", "sessionhub", "dict"),
    ("UserPromptSubmit", "sessionhub.event_id", "str-id"),
    ("UserPromptSubmit", "sessionhub.occurred_at", "time"),
    ("UserPromptSubmit", "sessionhub.git_remote", "str"),
    ("SessionStart", "source", "str"),
    ("SessionEnd", "reason", "str"),
    ("PostToolUse", "tool_name", "str"),
    ("PreCompact", "trigger", "str"),
    ("Stop", "last_assistant_message", "str"),
    ("Stop", "sessionhub.final_message", "str"),
    ("Stop", "sessionhub.reasoning_tail", "str"),
]

OPENCLAW_FIELDS = [
    ("message_received", "hook", "required-str"),
    ("message_received", "event", "dict"),
    ("message_received", "ctx", "dict"),
    ("message_received", "ts", "epoch"),
    ("message_received", "eventId", "str-id"),
    ("message_received", "ctx.sessionId", "str-id"),
    ("message_received", "ctx.sessionKey", "str"),
    ("message_received", "ctx.agentId", "str-id"),
    ("message_received", "ctx.channelId", "str"),
    ("message_received", "ctx.workspaceDir", "str"),
    ("message_received", "ctx.messageProvider", "str"),
    ("session_start", "event.resumedFrom", "str-id"),
    ("session_end", "event.reason", "str"),
    ("session_end", "event.nextSessionId", "str-id"),
    ("session_end", "event.messageCount", "count"),
    ("before_compaction", "event.tokenCount", "count"),
    ("after_tool_call", "event.toolName", "str"),
    ("before_agent_finalize", "event.lastAssistantMessage", "str"),
]


def _set(body: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    body = json.loads(json.dumps(body))
    parts = dotted.split(".")
    target = body
    for part in parts[:-1]:
        target = target.setdefault(part, {})
        if not isinstance(target, dict):
            return body
    target[parts[-1]] = value
    return body


def _gateway_wrong_values(kind: str) -> list[Any]:
    if kind == "epoch":
        return ["now", True, ["x"], {"x": 1}, 10**16, -(10**16), 1e300]
    if kind == "required-str":
        return [7, True, ["x"], {"x": 1}, ""]
    if kind == "str-id":
        return [7, True, ["x"], {"x": 1}, "has space", "new\nline", "x" * 201]
    return wrong_values(kind)


@pytest.mark.parametrize(("hook", "field", "kind"), CLAUDE_FIELDS, ids=lambda v: str(v))
def test_claude_code_wrong_types_in_every_field(
    api: APIClient, unchanged: Any, hook: str, field: str, kind: str
) -> None:
    base = {**CLAUDE, "hook_event_name": hook}
    if field.startswith("sessionhub.") or field == "sessionhub":
        base["sessionhub"] = {"event_id": "cc-1"}
    for value in _gateway_wrong_values(kind):
        if field == "sessionhub.event_id" and value == "":
            continue
        body = assert_4xx(
            api.post("/api/v1/hooks/claude-code", _set(base, field, value), format="json"), 400
        )
        result = body["extra"]["results"][0]
        assert result["field"] in (field, field.split(".")[-1]), (value, result)
    unchanged()


@pytest.mark.parametrize(("hook", "field", "kind"), OPENCLAW_FIELDS, ids=lambda v: str(v))
def test_openclaw_wrong_types_in_every_field(
    api: APIClient, unchanged: Any, hook: str, field: str, kind: str
) -> None:
    base = {**OPENCLAW, "hook": hook}
    for value in _gateway_wrong_values(kind):
        body = assert_4xx(
            api.post("/api/v1/hooks/openclaw", _set(base, field, value), format="json"), 400
        )
        result = body["extra"]["results"][0]
        assert result["status"] == "rejected", (value, result)
        assert result["field"].split(".")[-1] == field.split(".")[-1] or result["field"] in (
            "ctx.sessionId",
            "ctx.agentId",
        ), (field, value, result)
    unchanged()


READ_API_BODIES = {
    "continuity": {
        "source": ["nope", 7, ["x"]],
        "session_id": [["x"], {"x": 1}, True, "", "x" * 201, None],
        "agent_id": [["x"], {"x": 1}, True, "x" * 201],
        "session_key": [["x"], {"x": 1}, True, "x" * 301],
        "keywords": ["a b", 7, {"x": 1}, [["x"], {"x": 1}], ["x" * 101], ["k"] * 201],
        "prompt": [["x"], {"x": 1}, True, "x" * 100_001],
    },
    "pins": {
        "label": [["x"], {"x": 1}, True, "", "x" * 201, None],
        "content": [["x"], {"x": 1}, True, "x" * 4001],
        "priority": ["urgent", 7, ["x"]],
        "origin_session": ["not-a-uuid", 7, ["x"], True],
    },
    "pin": {
        "label": [["x"], {"x": 1}, True, "", "x" * 201],
        "content": [["x"], {"x": 1}, True, "x" * 4001],
        "priority": ["urgent", 7, ["x"]],
    },
    "continue": {"source_session_id": ["not-a-uuid", 7, ["x"], None, "", True]},
}
# UUID fields: DRF reads an integer as UUID(int=n), a well-formed id of nothing: 404.
UUID_FIELDS = {"origin_session", "source_session_id"}


def _memory_target(targets: Any, endpoint: str) -> tuple[str, str, dict[str, Any]]:
    return {
        "continuity": targets[3],
        "pins": targets[4],
        "pin": targets[5],
        "continue": targets[6],
    }[endpoint]


@pytest.mark.parametrize(
    ("endpoint", "field"),
    [(e, f) for e, fields in READ_API_BODIES.items() for f in fields],
)
def test_memory_endpoints_wrong_types_in_every_field(
    api: APIClient, targets: Any, unchanged: Any, endpoint: str, field: str
) -> None:
    unchanged.reset()
    method, path, body = _memory_target(targets, endpoint)
    pin_before = list(Pin.objects.values())
    for value in READ_API_BODIES[endpoint][field]:
        response = send(api, method, path, json.dumps({**body, field: value}).encode())
        if field in UUID_FIELDS and response.status_code == 404:
            continue
        error = assert_4xx(response, 400)
        assert field in json.dumps(error["extra"]), (value, error)
    unchanged()
    assert list(Pin.objects.values()) == pin_before


@pytest.mark.parametrize(
    ("endpoint", "field"),
    [
        ("continuity", "session_id"),
        ("continuity", "agent_id"),
        ("continuity", "prompt"),
        ("pins", "label"),
        ("pins", "content"),
        ("pin", "label"),
        ("pin", "content"),
    ],
)
def test_memory_endpoints_refuse_numbers_for_strings(
    api: APIClient, targets: Any, unchanged: Any, endpoint: str, field: str
) -> None:
    unchanged.reset()
    method, path, body = _memory_target(targets, endpoint)
    pin_before = list(Pin.objects.values())
    for value in (7, 1.5):
        response = send(api, method, path, json.dumps({**body, field: value}).encode())
        assert_4xx(response, 400)
    unchanged()
    assert list(Pin.objects.values()) == pin_before


# --- timestamps ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "0001-01-01T00:00:00Z",
        "0001-01-01T00:00:00+05:00",
        "1970-01-01T00:00:00Z",
        "2000-01-01T00:00:00Z",
        "2999-01-01T00:00:00Z",
        "9999-12-31T23:59:59-05:00",
        "+275760-09-13T00:00:00Z",
        "2026-02-30T00:00:00Z",
        "2026-01-01T25:00:00Z",
        "2026-01-01T00:00:00+24:00",
        "",
        "T",
    ],
)
def test_canonical_timestamps_out_of_range_or_invalid(
    api: APIClient, unchanged: Any, value: str
) -> None:
    body = assert_4xx(
        api.post("/api/v1/events", {**CANONICAL, "occurred_at": value}, format="json"), 400
    )
    assert body["extra"]["results"][0]["field"] == "occurred_at"
    unchanged()


@pytest.mark.parametrize("offset", ["+16:49", "-23:59", "+15:59", "-00:30"])
def test_any_iso_offset_is_stored_as_the_same_instant(api: APIClient, offset: str) -> None:
    """PostgreSQL refuses offsets past ±15:59; the adapter stores the instant in UTC."""
    from datetime import datetime

    from django.utils import timezone

    local = timezone.now().replace(microsecond=0).isoformat().replace("+00:00", offset)
    response = api.post("/api/v1/events", {**CANONICAL, "occurred_at": local}, format="json")
    assert response.status_code == 200, response.content
    assert LifecycleEvent.objects.get().occurred_at == datetime.fromisoformat(local)


@pytest.mark.parametrize(
    "ts", [0, -1, 1, 10**15, 2**63 - 1, -(2**63), 1e300, -1e300, 253402300800000]
)
def test_openclaw_epochs_out_of_range(api: APIClient, unchanged: Any, ts: Any) -> None:
    body = assert_4xx(
        api.post("/api/v1/hooks/openclaw", {**OPENCLAW, "ts": ts}, format="json"), 400
    )
    assert body["extra"]["results"][0]["field"] == "ts"
    unchanged()


@pytest.mark.parametrize("value", ["1999-01-01T00:00:00Z", "2999-01-01T00:00:00Z", "soon"])
def test_claude_code_timestamps_out_of_range(api: APIClient, unchanged: Any, value: str) -> None:
    line = {**CLAUDE, "sessionhub": {"event_id": "cc-1", "occurred_at": value}}
    body = assert_4xx(api.post("/api/v1/hooks/claude-code", line, format="json"), 400)
    assert body["extra"]["results"][0]["field"] == "sessionhub.occurred_at"
    unchanged()


# --- ids that are not ids -----------------------------------------------------------------

NOT_IDS = [
    "",
    " ",
    "has space",
    "tab\there",
    "new\nline",
    "x" * 201,
    "\u200b",  # zero-width space
    "\u202eevil",  # right-to-left override
    "bell\x07",
    "-leading-dash",
    "ünïcode",
    'quote"s',
]


@pytest.mark.parametrize("value", NOT_IDS)
def test_event_ids_that_are_not_ids(api: APIClient, unchanged: Any, value: str) -> None:
    response = api.post("/api/v1/events", {**CANONICAL, "event_id": value}, format="json")
    body = assert_4xx(response, 400)
    assert body["extra"]["results"][0]["field"] == "event_id"
    line = {**CLAUDE, "sessionhub": {"event_id": value}}
    body = assert_4xx(api.post("/api/v1/hooks/claude-code", line, format="json"), 400)
    assert body["extra"]["results"][0]["field"] == "sessionhub.event_id"
    body = assert_4xx(
        api.post("/api/v1/hooks/openclaw", {**OPENCLAW, "eventId": value}, format="json"), 400
    )
    assert body["extra"]["results"][0]["field"] == "eventId"
    unchanged()


@pytest.mark.parametrize(
    "value", ["", " ", "tab\there", "new\nline", "x" * 201, "\u200b", "bell\x07"]
)
def test_session_and_agent_ids_that_are_not_ids(api: APIClient, unchanged: Any, value: str) -> None:
    for field in ("session_id", "agent_id"):
        response = api.post("/api/v1/events", {**CANONICAL, field: value}, format="json")
        assert assert_4xx(response, 400)["extra"]["results"][0]["field"] == field
    body = assert_4xx(
        api.post("/api/v1/hooks/claude-code", {**CLAUDE, "session_id": value}, format="json"), 400
    )
    assert body["extra"]["results"][0]["field"] == "session_id"
    unchanged()


@pytest.mark.parametrize(
    "path",
    [
        "sessions/not-a-uuid",
        "sessions/00000000-0000-0000-0000-000000000000",
        "sessions/' OR 1=1 --",
        "sessions/%00",
        "sessions/%E2%80%AE/events",
        "sessions/1/memory",
        "sessions/x/export",
        "sessions/x/continuity",
        "agents/not-a-uuid/pins",
        "agents/%00/pins",
    ],
)
def test_path_ids_that_are_not_ids_are_404(api: APIClient, path: str) -> None:
    assert_4xx(api.get(f"/api/v1/{path}"), 404, "not_found")


@pytest.mark.django_db(transaction=True)  # each request its own transaction, as in production
@pytest.mark.parametrize(
    "query",
    [
        "agent=not-a-uuid",
        "status=exploded",
        "started_after=yesterday",
        "started_after=1970-08-02T16:50:00%2B16:49",
        "agent_external_id=%00",
        "project=a%00b",
        "cursor=garbage",
        "cursor=%00",
        "page_size=-1",
        "page_size=99999999999999999999999",
    ],
)
def test_filters_that_are_not_values_never_5xx(api: APIClient, query: str) -> None:
    response = api.get(f"/api/v1/sessions?{query}")
    assert response.status_code < 500, response.content
    if response.status_code >= 400:
        assert set(response.json()) == {"message", "code", "extra"}
    response = api.get(f"/api/v1/agents?{query.replace('agent_external_id', 'external_id')}")
    assert response.status_code < 500, response.content


# --- unknown fields -----------------------------------------------------------------------


def test_canonical_rejects_unknown_fields_even_with_good_ones(
    api: APIClient, unchanged: Any
) -> None:
    for extra in ({"surprise": 1}, {"Event_ID": "x"}, {"": 1}, {"payload ": {}}):
        body = assert_4xx(api.post("/api/v1/events", {**CANONICAL, **extra}, format="json"), 400)
        assert body["extra"]["results"][0]["code"] == "unknown_field"
    unchanged()


def test_gateways_keep_unknown_fields_of_known_hooks_as_payload(api: APIClient) -> None:
    """By design: gateways add fields over time; they are kept, redacted, never refused."""
    line = {**CLAUDE, "brand_new_field": {"nested": [1, 2]}, "transcript_path": 7}
    assert api.post("/api/v1/hooks/claude-code", line, format="json").status_code == 200
    claw = _set(OPENCLAW, "event.brandNew", {"a": True})
    claw = _set(claw, "ctx.newContext", "x")
    assert api.post("/api/v1/hooks/openclaw", claw, format="json").status_code == 200
    stored = {e.source: e.payload for e in LifecycleEvent.objects.all()}
    assert stored["claude-code"]["brand_new_field"] == {"nested": [1, 2]}
    assert stored["openclaw"]["event"]["brandNew"] == {"a": True}
    assert stored["openclaw"]["ctx"]["newContext"] == "x"


def test_the_memory_endpoints_ignore_or_refuse_unknown_fields_never_5xx(
    api: APIClient, targets: Any
) -> None:
    for method, path, body in targets[3:]:
        response = send(api, method, path, json.dumps({**body, "surprise": [1]}).encode())
        assert response.status_code < 500


# --- tokens that are garbage --------------------------------------------------------------

GARBAGE_TOKENS = [
    "Bearer",
    "Bearer ",
    "Bearer shub_",
    "Bearer shub__",
    "Bearer shub_12345678_",
    "Bearer shub_1234567_short-prefix",
    "Bearer shub_123456789_long-prefix",
    "Bearer shub_zzzzzzzz_" + "a" * 43,
    "Bearer shub_%00%00%00%00_x",
    "Bearer shub_\x00\x00\x00\x00\x00\x00\x00\x00_x",
    "Bearer " + "A" * 100_000,
    "Bearer a b c",
    "Bearer\tshub_12345678_x",
    "bearer shub_12345678_x",
    "Token shub_12345678_x",
    "Basic dXNlcjpwYXNz",
    "Bearer \xff\xfe\xfd",
    "Bearer shub_12345678_\xe9",
    "Bearer ' OR '1'='1",
    "Bearer ../../../../etc/passwd",
]


@pytest.mark.parametrize("header", GARBAGE_TOKENS, ids=lambda h: repr(h[:40]))
def test_garbage_tokens_are_401(unchanged: Any, header: str) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    for method, path in (("post", "/api/v1/events"), ("get", "/api/v1/sessions")):
        response = (
            getattr(client, method)(path, CANONICAL, format="json")
            if method == "post"
            else client.get(path)
        )
        assert_4xx(response, 401)
        assert response["WWW-Authenticate"] == "Bearer"
    unchanged()


def test_a_real_prefix_with_a_wrong_secret_is_401(
    team: Team, make_token: Any, unchanged: Any
) -> None:
    token, raw = make_token(team)
    unchanged.reset()
    forged = raw[:-4] + ("AAAA" if not raw.endswith("AAAA") else "BBBB")
    for candidate in (forged, raw + "x", raw[:-1], raw.upper(), f"shub_{token.prefix}_"):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {candidate}")
        assert_4xx(client.post("/api/v1/events", CANONICAL, format="json"), 401)
    unchanged()
    assert ApiToken.objects.get(pk=token.pk).last_used_at is None


# --- over a real socket: chunked bodies and a body past the limit --------------------------


def _raw_http(port: int, request: bytes, timeout: float = 10) -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        data = b""
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
                if b"\r\n\r\n" in data:
                    head, _, rest = data.partition(b"\r\n\r\n")
                    length = next(
                        (
                            int(line.split(b":", 1)[1])
                            for line in head.split(b"\r\n")
                            if line.lower().startswith(b"content-length:")
                        ),
                        None,
                    )
                    if length is not None and len(rest) >= length:
                        break
        except (ConnectionResetError, TimeoutError):
            pass
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    return status, data


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_over_the_web_server_oversize_and_chunked_bodies_store_nothing(
    team: Team, make_token: Any
) -> None:
    """Production's server: a body past the limit is 413 — before it is read when it has
    a Content-Length, after the limit's worth when it is chunked — and stores nothing; a
    chunked body within the limit is taken like any other."""
    import subprocess

    from .helpers import REPO, current_database_url, free_port, service_env, stop_process, wait_http

    _, raw = make_token(team)
    port = free_port()
    server = subprocess.Popen(
        [sys_executable(), "-m", "sessionhub.serve"],
        cwd=REPO,
        env=service_env(
            DATABASE_URL=current_database_url(),
            REDIS_URL="",
            SESSIONHUB_MAX_BODY_BYTES="65536",
            SESSIONHUB_WEB_BIND=f"127.0.0.1:{port}",
            SESSIONHUB_WEB_WORKERS="1",
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz")
        url = f"http://127.0.0.1:{port}/api/v1/events"
        headers = {"Authorization": f"Bearer {raw}", "Content-Type": "application/json"}
        big = json.dumps({**CANONICAL, "payload": {"blob": "x" * 200_000}}).encode()
        response = requests.post(url, data=big, headers=headers, timeout=30)
        assert response.status_code == 413 and response.json()["code"] == "payload_too_large"

        def chunks(payload: bytes, size: int = 8192) -> Any:
            for i in range(0, len(payload), size):
                yield payload[i : i + size]

        # A generator body makes requests send Transfer-Encoding: chunked: past the limit
        # it is a 413 like any other; within it, it is read and stored like any other.
        response = requests.post(url, data=chunks(big), headers=headers, timeout=30)
        assert response.status_code == 413 and response.json()["code"] == "payload_too_large"
        assert LifecycleEvent.objects.count() == 0
        small = {**CANONICAL, "event_id": "chunked-1"}
        response = requests.post(
            url, data=chunks(json.dumps(small).encode(), 16), headers=headers, timeout=30
        )
        assert response.status_code == 200 and response.json()["accepted"] == 1, response.text
        assert list(LifecycleEvent.objects.values_list("event_id", flat=True)) == ["chunked-1"]
        LifecycleEvent.objects.all().delete()
        Session.objects.all().delete()

        # A request head past the server's limit (16 KB) never reaches Django.
        status, _ = _raw_http(
            port,
            b"POST /api/v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + b"A" * 20_000
            + b"\r\nContent-Length: 2\r\n\r\n{}",
        )
        assert 400 <= status < 500
        assert LifecycleEvent.objects.count() == 0
        assert Session.objects.count() == 0
    finally:
        stop_process(server)


def _answer(sock: socket.socket) -> tuple[int, dict[str, str]]:
    """One answer read off a kept-alive connection: its status and headers (lowercase
    names); (0, {}) when the server closed the connection instead."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return 0, {}
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in lines[1:])
    }
    while len(rest) < int(headers.get("content-length", "0")):
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return int(lines[0].split()[1]), headers


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_answer_given_before_the_body_was_read_says_the_connection_closes(
    team: Team, make_token: Any, tmp_path: Any
) -> None:
    """Production's server closes a connection after an answer given before the request's
    body was read (every refusal: 401, 403, 406...). The answer must say so: before, it
    did not, and a client that sent its next request down the same connection got no
    answer at all. Here each body follows its head 50 ms later, as a client's second
    packet can under load; an answer that read the whole body keeps the connection."""
    import time

    from .helpers import current_database_url, service_env, stop_process, web_as_deployed

    _, good = make_token(team)
    _, read_only = make_token(team, scopes=("read",), name="read-only")
    env = service_env(DATABASE_URL=current_database_url(), REDIS_URL="")
    server, port = web_as_deployed(env, tmp_path / "web.log", workers=1)

    def head(token: str, length: int, extra: str = "") -> bytes:
        return (
            "POST /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n{extra}\r\n"
        ).encode()

    body = json.dumps(CANONICAL).encode()
    refusals = {
        401: head("not-a-token", len(body)),
        403: head(read_only, len(body)),
        406: head(good, len(body), "Accept: text/html\r\n"),
    }
    try:
        for status, request_head in refusals.items():
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(request_head)
                time.sleep(0.05)
                sock.sendall(body)
                answered, headers = _answer(sock)
                assert answered == status, (status, headers)
                assert headers.get("connection") == "close", (status, headers)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            for n in range(3):
                event = json.dumps({**CANONICAL, "event_id": f"kept-{n}"}).encode()
                sock.sendall(head(good, len(event)))
                time.sleep(0.05)
                sock.sendall(event)
                answered, headers = _answer(sock)
                assert answered == 200 and "connection" not in headers, headers
    finally:
        stop_process(server)
    assert LifecycleEvent.objects.filter(event_id__startswith="kept-").count() == 3
    assert LifecycleEvent.objects.count() == 3


def sys_executable() -> str:
    import sys

    return sys.executable
