"""The ingest endpoints' answers beyond the body: the headers every answer carries, the
order in which a request is checked, and the methods and media types they take."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from lifecycle.models import LifecycleEvent

pytestmark = pytest.mark.django_db

PATHS = ["events", "hooks/claude-code", "hooks/openclaw", "hooks/codex", "hooks/gemini-cli"]
GOOD = {"event_id": "evt-1", "kind": "session_start", "agent_id": "research", "session_id": "s"}


def post(client: APIClient, path: str, body: bytes, **extra: Any) -> Any:
    content_type = extra.pop("content_type", "application/json")
    return client.generic("POST", f"/api/v1/{path}", body, content_type=content_type, **extra)


def assert_answer(response: Any, status: int, code: str | None = None) -> None:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    assert response["Allow"] == "POST, OPTIONS"
    assert response["Vary"] == "Accept"
    if code is not None:
        assert response.json()["code"] == code


@pytest.mark.parametrize("path", PATHS)
def test_every_answer_carries_allow_and_vary(api: APIClient, path: str) -> None:
    body = json.dumps(GOOD).encode()
    assert post(api, path, body).status_code in (200, 400)
    assert_answer(post(api, path, body), post(api, path, body).status_code)
    assert_answer(api.get(f"/api/v1/{path}"), 405, "method_not_allowed")
    assert api.get(f"/api/v1/{path}").json()["message"] == 'Method "GET" not allowed.'
    assert_answer(post(APIClient(), path, body), 401, "not_authenticated")
    assert post(APIClient(), path, body)["WWW-Authenticate"] == "Bearer"


def test_checks_run_in_order_accept_token_scope_method_body(
    api: APIClient, team: Any, make_token: Any, client_for: Any
) -> None:
    reader = client_for(make_token(team, scopes=("read",), name="reader")[1])
    bad = b"{not json"
    # An Accept no JSON satisfies comes first, before the token is looked at.
    assert_answer(post(APIClient(), "events", bad, HTTP_ACCEPT="application/xml"), 406)
    assert_answer(post(APIClient(), "events", bad), 401, "not_authenticated")
    assert_answer(post(reader, "events", bad), 403, "permission_denied")
    assert_answer(reader.get("/api/v1/events"), 403, "permission_denied")
    assert_answer(post(api, "events", bad, content_type="text/plain"), 415)
    assert_answer(post(api, "events", b"", content_type="text/plain"), 400, "empty_body")
    assert_answer(post(api, "events", bad), 400, "malformed_json")
    assert LifecycleEvent.objects.count() == 0


@pytest.mark.parametrize(
    "accept", ["application/json", "*/*", "application/*", "text/html,application/xml;q=0.9,*/*"]
)
def test_any_accept_that_admits_json_gets_json(api: APIClient, accept: str) -> None:
    response = post(api, "events", json.dumps(GOOD).encode(), HTTP_ACCEPT=accept)
    assert_answer(response, 200)
    assert response.content.startswith(b'{"accepted":1,')


def test_an_accept_without_json_is_406_in_the_error_shape(api: APIClient) -> None:
    response = post(api, "events", json.dumps(GOOD).encode(), HTTP_ACCEPT="text/html")
    assert_answer(response, 406, "not_acceptable")
    assert LifecycleEvent.objects.count() == 0


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "application/*"])
def test_json_media_types_with_parameters_or_wildcards(api: APIClient, content_type: str) -> None:
    assert_answer(post(api, "events", json.dumps(GOOD).encode(), content_type=content_type), 200)


def test_options_describes_the_endpoint(api: APIClient) -> None:
    response = api.options("/api/v1/hooks/claude-code")
    assert_answer(response, 200)
    assert response.json() == {
        "name": "Claude Code Hook Api",
        "description": "The JSON Claude Code writes on a hook's stdin, as is (or a list of them).",
        "renders": ["application/json"],
        "parses": ["application/json"],
    }
