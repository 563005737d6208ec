"""The ingest endpoints' short way (lifecycle/fast_path.py): an ordinary request is
answered without DRF's dispatch, anything else goes the ordinary way, and every request
gets the same status, body and headers either way."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import OperationalError
from rest_framework.test import APIClient
from rest_framework.views import APIView

from lifecycle import services
from lifecycle.models import LifecycleEvent
from sessionhub.authentication import ApiTokenAuthentication
from sessionhub.models import ApiToken, Team

pytestmark = pytest.mark.django_db

SESSION = "5b0e4a1c-2f0d-4c55-9e8e-0c6d1f6a7b10"


def claude_hook(n: int, hook: str = "PostToolUse") -> dict[str, Any]:
    return {
        "session_id": SESSION,
        "transcript_path": f"/tmp/{SESSION}.jsonl",
        "cwd": "/home/dev/src/app",
        "hook_event_name": hook,
        "tool_name": "Bash",
        "tool_input": {"command": f"echo {n}"},
        "tool_response": {"stdout": "x" * 2048, "stderr": "", "interrupted": False},
    }


def canonical(n: int, **changes: Any) -> dict[str, Any]:
    return {
        "event_id": f"evt-{n}",
        "kind": "session_start",
        "agent_id": "research",
        "session_id": "s-1",
        **changes,
    }


OPENCLAW = {
    "hook": "session_start",
    "event": {"sessionId": "oc-1", "sessionKey": "research:main"},
    "ctx": {"agentId": "research", "sessionKey": "research:main", "sessionId": "oc-1"},
    "ts": 1764100000000,
}


@pytest.fixture
def dispatched(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The views DRF's dispatch ran for: empty when the short way answered."""
    calls: list[str] = []
    real = APIView.dispatch

    def spy(self: APIView, request: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(type(self).__name__)
        return real(self, request, *args, **kwargs)

    monkeypatch.setattr(APIView, "dispatch", spy)
    return calls


@pytest.fixture
def fast_path(settings: Any) -> Callable[[bool], None]:
    def switch(on: bool) -> None:
        settings.SESSIONHUB = {**settings.SESSIONHUB, "INGEST_FAST_PATH": on}

    return switch


@pytest.fixture
def new_client(
    make_token: Callable[..., tuple[ApiToken, str]], client_for: Callable[[str], APIClient]
) -> Iterator[Callable[..., APIClient]]:
    """A client of a team of its own, so the same body is new to each."""

    def make(scopes: tuple[str, ...] = ("ingest", "read")) -> APIClient:
        slug = f"t-{uuid.uuid4().hex[:8]}"
        team = Team.objects.create(slug=slug, name=slug)
        return client_for(make_token(team, scopes)[1])

    yield make


def post(client: APIClient, path: str, body: Any, **extra: Any) -> Any:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    content_type = extra.pop("content_type", "application/json")
    return client.generic("POST", f"/api/v1/{path}", raw, content_type=content_type, **extra)


def masked(response: Any) -> Any:
    """The answer without what differs from team to team (the sessions' ids; the
    browsable API's page, with its CSRF token, is compared by its headers alone)."""
    if not response.get("Content-Type", "").startswith("application/json"):
        return None
    body = response.json()
    results = body.get("results") or body.get("extra", {}).get("results") or []
    for result in results:
        result.pop("session_id", None)
    return body


# name, path, body, request headers, scopes, whether the short way answers it
CASES: list[tuple[str, str, Any, dict[str, Any], tuple[str, ...], bool]] = [
    ("hook", "hooks/claude-code", claude_hook(1), {}, ("ingest",), True),
    ("hook batch", "hooks/claude-code", [claude_hook(1), claude_hook(2)], {}, ("ingest",), True),
    ("canonical", "events", canonical(1), {}, ("ingest", "read"), True),
    ("canonical wrapped", "events", {"events": [canonical(1), canonical(2)]}, {}, ("admin",), True),
    ("openclaw", "hooks/openclaw", OPENCLAW, {}, ("ingest",), True),
    ("all rejected", "events", canonical(1, kind="no_such_kind"), {}, ("ingest",), True),
    ("some rejected", "events", [canonical(1), {"kind": "x"}], {}, ("ingest",), True),
    (
        "charset",
        "events",
        canonical(1),
        {"content_type": "application/json; charset=utf-8"},
        ("ingest",),
        True,
    ),
    ("accept json", "events", canonical(1), {"HTTP_ACCEPT": "application/json"}, ("ingest",), True),
    ("accept any", "events", canonical(1), {"HTTP_ACCEPT": "*/*;q=0.8"}, ("ingest",), True),
    ("no scope", "events", canonical(1), {}, ("read",), False),
    ("wrong type", "events", b"a=b", {"content_type": "text/plain"}, ("ingest",), False),
    ("malformed", "events", b"{not json", {}, ("ingest",), False),
    ("empty batch", "hooks/claude-code", [], {}, ("ingest",), False),
    ("events not a list", "events", {"events": 3}, {}, ("ingest",), False),
    ("gzip", "events", canonical(1), {"HTTP_CONTENT_ENCODING": "gzip"}, ("ingest",), False),
    ("query", "events?format=json", canonical(1), {}, ("ingest",), False),
    (
        "accept indent",
        "events",
        canonical(1),
        {"HTTP_ACCEPT": "application/json; indent=4"},
        ("ingest",),
        False,
    ),
    ("accept html", "events", canonical(1), {"HTTP_ACCEPT": "text/html"}, ("ingest",), False),
    ("accept xml", "events", canonical(1), {"HTTP_ACCEPT": "application/xml"}, ("ingest",), False),
    ("bad token", "events", canonical(1), {"HTTP_AUTHORIZATION": "Bearer shub_nope"}, (), False),
    ("no token", "events", canonical(1), {"HTTP_AUTHORIZATION": ""}, (), False),
]


@pytest.mark.parametrize(
    ("path", "body", "headers", "scopes", "short"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_each_request_gets_the_same_answer_either_way(
    new_client: Callable[..., APIClient],
    fast_path: Callable[[bool], None],
    dispatched: list[str],
    path: str,
    body: Any,
    headers: dict[str, Any],
    scopes: tuple[str, ...],
    short: bool,
) -> None:
    answers = []
    for on in (False, True):
        fast_path(on)
        dispatched.clear()
        client = new_client(scopes or ("ingest",))
        if "HTTP_AUTHORIZATION" in headers:
            client.credentials(HTTP_AUTHORIZATION=headers["HTTP_AUTHORIZATION"])
        extra = {k: v for k, v in headers.items() if k != "HTTP_AUTHORIZATION"}
        response = post(client, path, body, **extra)
        answers.append((response.status_code, masked(response), dict(response.headers)))
        assert bool(dispatched) is (not on or not short), (on, dispatched)
    assert answers[0] == answers[1]


def test_an_ordinary_request_is_stored_without_drf(api: APIClient, dispatched: list[str]) -> None:
    for n in range(3):
        response = post(api, "hooks/claude-code", claude_hook(n))
        assert response.status_code == 200, response.content
        assert response.json()["accepted"] == 1
    assert post(api, "hooks/claude-code", claude_hook(0)).json()["duplicates"] == 1
    assert dispatched == []
    assert LifecycleEvent.objects.filter(hook="PostToolUse").count() == 3


def test_past_the_rate_limit_the_ordinary_path_answers_429(
    api: APIClient, settings: Any, dispatched: list[str]
) -> None:
    # A day's window: a minute's could roll over between the requests (each runs the
    # memory work in process on SQLite), and the third would count from zero.
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"token": "2/day"},
    }
    assert [post(api, "events", canonical(n)).status_code for n in range(2)] == [200, 200]
    assert dispatched == []
    response = post(api, "events", canonical(9))
    assert response.status_code == 429, response.content
    assert response.json()["code"] == "throttled"
    assert 1 <= int(response["Retry-After"]) <= 86_400
    assert dispatched == ["EventsIngestApi"]
    assert not LifecycleEvent.objects.filter(event_id="evt-9").exists()


def test_a_database_outage_is_503_with_retry_after_either_way(
    api: APIClient,
    fast_path: Callable[[bool], None],
    dispatched: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def down(**_: Any) -> Any:
        raise OperationalError("the database went away")

    monkeypatch.setattr(services, "events_ingest", down)
    answers = []
    for on in (False, True):
        fast_path(on)
        response = post(api, "events", canonical(1))
        answers.append((response.status_code, response.json(), dict(response.headers)))
    assert answers[0] == answers[1]
    assert answers[1][0] == 503
    assert answers[1][1]["code"] == "database_unavailable"
    assert answers[1][2]["Retry-After"]
    assert dispatched == ["EventsIngestApi"]


def test_the_database_down_before_storing_is_the_ordinary_503(
    api: APIClient, dispatched: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The token's lookup failing takes the ordinary way, which answers it: not a 500."""

    def down(*_: Any) -> Any:
        raise OperationalError("the database went away")

    monkeypatch.setattr(ApiTokenAuthentication, "authenticate", down)
    response = post(api, "hooks/claude-code", claude_hook(1))
    assert response.status_code == 503, response.content
    assert response.json()["code"] == "database_unavailable"
    assert dispatched == ["ClaudeCodeHookApi"]


def test_a_body_past_djangos_memory_limit_goes_the_ordinary_way(
    api: APIClient, settings: Any, dispatched: list[str]
) -> None:
    """The short way reads the body into memory only within DATA_UPLOAD_MAX_MEMORY_SIZE;
    a larger body (within the API's own limit) is read by the parser as a stream."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    response = post(api, "hooks/claude-code", claude_hook(1))
    assert response.status_code == 200, response.content
    assert dispatched == ["ClaudeCodeHookApi"]
    assert response.json()["accepted"] == 1


def test_other_methods_and_paths_go_the_ordinary_way(api: APIClient, dispatched: list[str]) -> None:
    assert api.get("/api/v1/hooks/claude-code").status_code == 405
    assert api.get("/api/v1/sessions").status_code == 200
    assert dispatched == ["ClaudeCodeHookApi", "SessionListApi"]


def test_behind_a_script_prefix_the_short_way_still_answers(
    api: APIClient, dispatched: list[str]
) -> None:
    """Mounted under a sub-path (SCRIPT_NAME), the endpoints' paths carry the prefix."""
    response = post(api, "hooks/claude-code", claude_hook(1), SCRIPT_NAME="/hub")
    assert response.status_code == 200, response.content
    assert response.json()["accepted"] == 1
    assert dispatched == []
