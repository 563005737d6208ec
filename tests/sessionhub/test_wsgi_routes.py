"""The application the server runs (``sessionhub.wsgi.application``) sends requests under
/api/v1/ through the API's short middleware list and the rest through the whole one:
the API keeps every security header, the dashboard keeps its sessions and CSRF."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.signals import request_finished, request_started

from lifecycle.models import LifecycleEvent
from sessionhub.models import Team
from sessionhub.wsgi import ApiHandler, application

pytestmark = pytest.mark.django_db(transaction=True)

SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
}


def _call(method: str, path: str, body: bytes = b"", **headers: str) -> tuple[int, dict, bytes]:
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "443",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "https",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": io.StringIO(),
        "wsgi.version": (1, 0),
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "HTTP_HOST": "testserver",
        **headers,
    }
    if body:
        environ["CONTENT_LENGTH"] = str(len(body))
        environ["CONTENT_TYPE"] = "application/json"
    answer: dict[str, Any] = {}

    def start_response(status: str, response_headers: list[tuple[str, str]], *_: Any) -> None:
        answer["status"] = int(status.split()[0])
        answer["headers"] = [(k.lower(), v) for k, v in response_headers]

    chunks = application(environ, start_response)
    try:
        content = b"".join(chunks)
    finally:
        getattr(chunks, "close", lambda: None)()
    return answer["status"], answer["headers"], content


def test_an_ingest_request_takes_the_api_chain_and_keeps_every_security_header(
    team: Team, token: str
) -> None:
    body = json.dumps(
        {"event_id": "wsgi-1", "kind": "prompt", "agent_id": "a", "session_id": "s", "text": "hi"}
    ).encode()
    status, headers, content = _call(
        "POST", "/api/v1/events", body, HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert status == 200, content
    assert LifecycleEvent.objects.filter(team=team, event_id="wsgi-1").count() == 1
    found = dict(headers)
    for name, value in SECURITY_HEADERS.items():
        assert found[name] == value, name
    assert "frame-ancestors 'none'" in found["content-security-policy"]
    assert found["content-length"] == str(len(content))
    # No browser machinery: no cookie set, no answer varying on one.
    assert "set-cookie" not in found
    assert "Cookie" not in found.get("vary", "")


def test_the_api_chain_checks_the_host(team: Team, token: str, settings: Any) -> None:
    settings.ALLOWED_HOSTS = ["testserver"]
    body = json.dumps(
        {"event_id": "wsgi-h", "kind": "prompt", "agent_id": "a", "session_id": "s", "text": "x"}
    ).encode()
    status, _, _ = _call(
        "POST",
        "/api/v1/events",
        body,
        HTTP_AUTHORIZATION=f"Bearer {token}",
        HTTP_HOST="evil.example",
    )
    assert status == 400
    assert not LifecycleEvent.objects.filter(event_id="wsgi-h").exists()


def test_refusals_under_the_api_chain_keep_their_shape_and_headers(token: str) -> None:
    status, headers, content = _call("POST", "/api/v1/events", b'{"kind": 1}')
    assert status == 401
    assert json.loads(content)["code"] == "not_authenticated"
    assert dict(headers)["x-frame-options"] == "DENY"
    status, _, content = _call("GET", "/api/v1/no-such-thing", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert status == 404
    assert json.loads(content)["code"] == "not_found"


def test_pages_keep_the_whole_chain() -> None:
    status, headers, _ = _call("GET", "/accounts/login/")
    assert status == 200
    cookies = [v.strip() for k, v in headers if k == "set-cookie"]
    assert any(c.startswith(django_settings.CSRF_COOKIE_NAME + "=") for c in cookies)
    assert dict(headers)["x-frame-options"] == "DENY"
    # The dashboard asks a visitor to sign in (the sessions and sign-in middleware).
    status, headers, _ = _call("GET", "/")
    assert status == 302
    assert dict(headers)["location"] == "/accounts/login/?next=/"


def test_the_api_handler_builds_only_the_api_middleware() -> None:
    before = list(django_settings.MIDDLEWARE)
    handler = ApiHandler()
    assert before == django_settings.MIDDLEWARE  # the whole list is back once the chain is built
    chain: list[str] = []
    layer: Any = handler._middleware_chain
    while True:
        layer = getattr(layer, "__wrapped__", layer)  # Django's exception wrapper
        if not hasattr(layer, "get_response"):
            break
        chain.append(f"{type(layer).__module__}.{type(layer).__name__}")
        layer = layer.get_response
    assert chain == django_settings.API_MIDDLEWARE


def test_both_chains_send_the_request_signals(token: str) -> None:
    seen: list[str] = []

    def started(**_: Any) -> None:
        seen.append("started")

    def finished(**_: Any) -> None:
        seen.append("finished")

    request_started.connect(started)
    request_finished.connect(finished)
    try:
        _call("GET", "/api/v1/whoami", HTTP_AUTHORIZATION=f"Bearer {token}")
        _call("GET", "/healthz")
    finally:
        request_started.disconnect(started)
        request_finished.disconnect(finished)
    assert seen == ["started", "finished", "started", "finished"]
