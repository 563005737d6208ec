"""Each error status of the ingestion contract, provoked by a bad request, answered in
the one error shape, and leaving the database unchanged."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from lifecycle.models import LifecycleEvent, Session
from tests.conftest import claude_code_hooks, openclaw_hooks

pytestmark = pytest.mark.django_db

GOOD = {
    "event_id": "evt-1",
    "kind": "session_start",
    "agent_id": "research",
    "session_id": "s-1",
}


def raw_post(client: APIClient, path: str, body: bytes, **extra: Any) -> Any:
    return client.generic("POST", f"/api/v1/{path}", body, content_type="application/json", **extra)


def assert_error(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"message", "code", "extra"}
    assert body["message"]
    if code:
        assert body["code"] == code
    return body


def assert_nothing_stored() -> None:
    assert LifecycleEvent.objects.count() == 0
    assert Session.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", "malformed_json"),
        (b'{"kind": "session_start",', "malformed_json"),
        (b"\xff\xfe{}", "invalid_encoding"),
        (b"[" * 10_000 + b"]" * 10_000, "too_deep"),
        (b'{"a": NaN}', "malformed_json"),
        (b'{"n": 123456789012345678901234567890}', "number_out_of_range"),
        (b'{"s": "\\ud800"}', "invalid_unicode"),
        (b'{"s": "a\\u0000b"}', "nul_character"),
        (b"", "empty_body"),
    ],
)
def test_malformed_bodies_are_400(api: APIClient, body: bytes, code: str) -> None:
    for path in ("events", "hooks/claude-code", "hooks/openclaw"):
        assert_error(raw_post(api, path, body), 400, code)
    assert_nothing_stored()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"kind": 5}, "kind"),
        ({"kind": "session_begin"}, "kind"),
        ({"event_id": 12}, "event_id"),
        ({"event_id": "has space"}, "event_id"),
        ({"event_id": "x" * 201}, "event_id"),
        ({"session_id": ["s"]}, "session_id"),
        ({"session_id": None}, "session_id"),
        ({"agent_id": {"a": 1}}, "agent_id"),
        ({"occurred_at": "yesterday"}, "occurred_at"),
        ({"occurred_at": "1970-01-01T00:00:00Z"}, "occurred_at"),
        ({"occurred_at": "2999-01-01T00:00:00Z"}, "occurred_at"),
        ({"message_count": -1}, "message_count"),
        ({"message_count": 2**40}, "message_count"),
        ({"message_count": "7"}, "message_count"),
        ({"payload": []}, "payload"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_wrong_fields_are_rejected_with_field_and_reason(
    api: APIClient, change: dict[str, Any], field: str
) -> None:
    body = assert_error(api.post("/api/v1/events", {**GOOD, **change}, format="json"), 400)
    result = body["extra"]["results"][0]
    assert result["status"] == "rejected"
    assert result["field"] == field
    assert result["reason"]
    assert_nothing_stored()


def test_a_batch_keeps_its_good_events_and_names_the_bad_ones(api: APIClient) -> None:
    batch = [
        GOOD,
        {**GOOD, "event_id": "evt-2", "kind": "nope"},
        {**GOOD, "event_id": "evt-3", "kind": "prompt"},
    ]
    response = api.post("/api/v1/events", {"events": batch}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert [r["status"] for r in body["results"]] == ["accepted", "rejected", "accepted"]
    assert body["results"][1]["field"] == "kind"
    assert set(LifecycleEvent.objects.values_list("event_id", flat=True)) == {"evt-1", "evt-3"}


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("hooks/claude-code", {"hook_event_name": "Stop"}, "session_id"),
        ("hooks/claude-code", {"session_id": "abc"}, "hook_event_name"),
        ("hooks/claude-code", {"session_id": 7, "hook_event_name": "Stop"}, "session_id"),
        ("hooks/claude-code", {"session_id": "a", "hook_event_name": "Stop", "cwd": 3}, "cwd"),
        ("hooks/openclaw", {"event": {}, "ctx": {}}, "hook"),
        ("hooks/openclaw", {"hook": "session_start", "event": "x", "ctx": {}}, "event"),
        ("hooks/openclaw", {"hook": "session_start", "event": {}, "ctx": {}}, "ctx.sessionId"),
        (
            "hooks/openclaw",
            {"hook": "x", "event": {}, "ctx": {"sessionId": "s"}, "ts": "now"},
            "ts",
        ),
        (
            "hooks/openclaw",
            {"hook": "x", "event": {}, "ctx": {"sessionId": "s"}, "ts": 10**15},
            "ts",
        ),
    ],
)
def test_gateway_payloads_with_wrong_types(
    api: APIClient, path: str, body: Any, field: str
) -> None:
    response = assert_error(api.post(f"/api/v1/{path}", body, format="json"), 400, "invalid_events")
    assert response["extra"]["results"][0]["field"] == field
    assert_nothing_stored()


def test_unknown_hooks_are_stored_as_other(api: APIClient) -> None:
    line = dict(claude_code_hooks("basic")[0], hook_event_name="SomethingNew", extra={"x": 1})
    assert api.post("/api/v1/hooks/claude-code", line, format="json").status_code == 200
    claw = dict(openclaw_hooks("basic")[2], hook="brand_new_hook")
    assert api.post("/api/v1/hooks/openclaw", claw, format="json").status_code == 200
    kinds = sorted(LifecycleEvent.objects.values_list("kind", "hook"))
    assert kinds == [("other", "SomethingNew"), ("other", "brand_new_hook")]
    assert LifecycleEvent.objects.get(hook="SomethingNew").payload["extra"] == {"x": 1}


def test_oversize_body_is_413(api: APIClient, settings: Any) -> None:
    settings.SESSIONHUB = {**settings.SESSIONHUB, "MAX_BODY_BYTES": 2048}
    big = json.dumps({**GOOD, "payload": {"blob": "x" * 4096}}).encode()
    assert_error(raw_post(api, "events", big), 413, "payload_too_large")
    assert_nothing_stored()


def test_oversize_batch_is_413(api: APIClient) -> None:
    batch = [{**GOOD, "event_id": f"e{i}"} for i in range(1001)]
    assert_error(api.post("/api/v1/events", batch, format="json"), 413, "batch_too_large")
    assert_nothing_stored()


@pytest.mark.parametrize(
    "header",
    [
        None,
        "Bearer nope",
        "Bearer shub_deadbeef_wrong",
        "Basic dXNlcjpwYXNz",
        "Bearer",
        "Bearer a b",
    ],
)
def test_bad_token_is_401(header: str | None) -> None:
    client = APIClient()
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = client.post("/api/v1/events", GOOD, format="json")
    assert response.status_code == 401
    assert set(response.json()) == {"message", "code", "extra"}
    assert_nothing_stored()


def test_revoked_token_is_401(team: Any, make_token: Any, client_for: Any) -> None:
    token, raw = make_token(team)
    token.revoke()
    assert client_for(raw).post("/api/v1/events", GOOD, format="json").status_code == 401


def test_read_only_token_cannot_ingest(team: Any, make_token: Any, client_for: Any) -> None:
    _, raw = make_token(team, scopes=("read",))
    assert_error(client_for(raw).post("/api/v1/events", GOOD, format="json"), 403)
    assert_nothing_stored()


def test_another_teams_session_is_404(api: APIClient, stranger: APIClient) -> None:
    assert api.post("/api/v1/events", GOOD, format="json").status_code == 200
    session = Session.objects.get()
    assert api.get(f"/api/v1/sessions/{session.pk}").status_code == 200
    assert_error(stranger.get(f"/api/v1/sessions/{session.pk}"), 404, "not_found")
    assert_error(stranger.get(f"/api/v1/sessions/{session.pk}/events"), 404, "not_found")
    assert stranger.get("/api/v1/sessions").json()["results"] == []
    assert_error(api.get("/api/v1/sessions/not-a-uuid"), 404)


def test_same_event_id_in_another_team_is_its_own_event(
    api: APIClient, stranger: APIClient
) -> None:
    assert api.post("/api/v1/events", GOOD, format="json").json()["accepted"] == 1
    assert stranger.post("/api/v1/events", GOOD, format="json").json()["accepted"] == 1
    assert LifecycleEvent.objects.count() == 2
    assert Session.objects.values("team").distinct().count() == 2


def test_too_fast_is_429_with_retry_after(api: APIClient, settings: Any) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"token": "3/min"},
    }
    for i in range(3):
        assert (
            api.post("/api/v1/events", {**GOOD, "event_id": f"e{i}"}, format="json").status_code
            == 200
        )
    response = api.post("/api/v1/events", {**GOOD, "event_id": "e9"}, format="json")
    assert_error(response, 429, "throttled")
    assert 1 <= int(response["Retry-After"]) <= 60
    assert not LifecycleEvent.objects.filter(event_id="e9").exists()


def test_non_json_content_type_is_415(api: APIClient) -> None:
    response = api.generic(
        "POST", "/api/v1/events", b"a=b", content_type="application/x-www-form-urlencoded"
    )
    assert_error(response, 415)
    assert_nothing_stored()


@pytest.mark.parametrize("encoding", ["br", "gzip", "deflate", "zstd", "gzip, br", "x-made-up"])
@pytest.mark.parametrize("path", ["events", "hooks/claude-code", "hooks/openclaw"])
def test_a_content_encoding_the_server_does_not_decode_is_415(
    api: APIClient, path: str, encoding: str
) -> None:
    """Before: ``Content-Encoding: br`` with a plain body was taken as plain JSON."""
    body = json.dumps(GOOD).encode()
    response = raw_post(api, path, body, HTTP_CONTENT_ENCODING=encoding)
    error = assert_error(response, 415, "unsupported_encoding")
    assert error["extra"] == {"content_encoding": encoding}
    assert_nothing_stored()


def test_identity_encoding_is_plain_json(api: APIClient) -> None:
    response = raw_post(api, "events", json.dumps(GOOD).encode(), HTTP_CONTENT_ENCODING="identity")
    assert response.status_code == 200, response.content
    assert LifecycleEvent.objects.count() == 1


@pytest.mark.parametrize(
    "path", ["events", "hooks/claude-code", "hooks/openclaw", "hooks/codex", "hooks/gemini-cli"]
)
def test_a_host_outside_allowed_hosts_is_refused_on_every_ingest_endpoint(
    api: APIClient, settings: Any, path: str
) -> None:
    """One way through every request: the ingest endpoints check the Host header like
    every other page, before anything is stored."""
    settings.ALLOWED_HOSTS = ["sessionhub.example.com"]
    refused = raw_post(api, path, json.dumps(GOOD).encode(), HTTP_HOST="evil.example")
    assert assert_error(refused, 400, "disallowed_host")
    assert_nothing_stored()
    allowed = raw_post(api, path, json.dumps(GOOD).encode(), HTTP_HOST="sessionhub.example.com")
    assert allowed.status_code in (200, 400), allowed.content  # a hook body may not fit
    assert allowed.status_code != 400 or allowed.json()["code"] == "invalid_events"
