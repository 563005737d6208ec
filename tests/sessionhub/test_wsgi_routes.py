"""The application the server runs (``sessionhub.wsgi.application``) sends requests under
/api/v1/ through the API's short middleware list and the rest through the whole one:
the API keeps every security header, the dashboard keeps its sessions and CSRF."""

from __future__ import annotations

import io
import json
import re
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.exceptions import PermissionDenied
from django.core.signals import request_finished, request_started
from django.http import HttpResponse
from django.utils.deprecation import MiddlewareMixin

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


def _call(
    method: str, path: str, body: bytes = b"", *, app: Any = None, **headers: str
) -> tuple[int, list[tuple[str, str]], bytes]:
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

    chunks = (app or application)(environ, start_response)
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
    layer: Any = handler._built_chain  # the flat chain calls the same layers' hooks
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


# --- the flat chain ----------------------------------------------------------------------


class _Nested(ApiHandler):
    """The API handler as Django runs a chain: nested, every URL resolved afresh."""

    flatten = False

    def resolve_request(self, request: Any) -> Any:
        return super(ApiHandler, self).resolve_request(request)


def _event(event_id: str) -> bytes:
    return json.dumps(
        {"event_id": event_id, "kind": "prompt", "agent_id": "a", "session_id": "s", "text": "x"}
    ).encode()


def _both(method: str, path: str, body: bytes | Any = b"", **headers: str) -> list[Any]:
    """The same request through a flat and a nested handler built now (so from the
    settings as they are): their answers, the flat one's first. A callable body is
    called with each handler's name, for bodies that must differ (new event ids)."""
    answers = []
    for name, handler in (("flat", ApiHandler()), ("nested", _Nested())):
        data = body(name) if callable(body) else body
        answers.append(_call(method, path, data, app=handler, **headers))
    return answers


def _same(flat: Any, nested: Any, *, body: bool = True) -> None:
    assert flat[0] == nested[0]
    assert sorted(flat[1]) == sorted(nested[1])
    if body:
        assert flat[2] == nested[2]


def test_the_api_handler_runs_its_chain_flat() -> None:
    handler = ApiHandler()
    assert handler._middleware_chain == handler._flat_chain
    assert len(handler._request_hooks) == len(django_settings.API_MIDDLEWARE)
    nested = _Nested()
    assert nested._middleware_chain != nested._flat_chain


@pytest.mark.parametrize(
    ("method", "path", "body", "extra"),
    [
        ("POST", "/api/v1/events", b'{"kind": 1}', {}),  # no token: 401
        ("POST", "/api/v1/events", b"{not json", {"auth": True}),  # 400
        ("POST", "/api/v1/events", _event("e"), {"auth": True, "HTTP_ACCEPT": "text/html"}),
        ("GET", "/api/v1/events", b"", {"auth": True}),  # 405
        ("OPTIONS", "/api/v1/hooks/claude-code", b"", {"auth": True}),
        ("POST", "/api/v1/hooks/openclaw", b"[]", {"auth": True}),  # empty batch
        ("GET", "/api/v1/whoami", b"", {"auth": True}),  # a DRF view: a rendered response
        ("GET", "/api/v1/whoami", b"", {}),
        ("GET", "/api/v1/no-such-thing", b"", {"auth": True}),  # 404 in the API's shape
        ("GET", "/api/v1/sessions/unknown", b"", {"auth": True}),
    ],
)
def test_flat_and_nested_chains_answer_alike(
    token: str, method: str, path: str, body: bytes, extra: dict[str, Any]
) -> None:
    headers = {k: v for k, v in extra.items() if k != "auth"}
    if extra.get("auth"):
        headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    flat, nested = _both(method, path, body, **headers)
    _same(flat, nested)


def test_flat_and_nested_chains_store_and_answer_an_event_alike(team: Team, token: str) -> None:
    flat, nested = _both(
        "POST",
        "/api/v1/events",
        lambda name: _event(f"chain-{name[0]}"),
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    _same(flat, nested, body=False)  # each answer names its own event and session
    assert flat[0] == 200
    answers = [json.loads(flat[2]), json.loads(nested[2])]
    assert [a["accepted"] for a in answers] == [1, 1]
    assert LifecycleEvent.objects.filter(team=team, event_id__startswith="chain-").count() == 2


def test_flat_and_nested_chains_answer_alike_where_a_layer_answers_or_raises(
    token: str, settings: Any
) -> None:
    # The outermost layer answers (a redirect to HTTPS): only its own response hook runs.
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 60
    flat, nested = _both("POST", "/api/v1/events", _event("r"), **{"wsgi.url_scheme": "http"})
    _same(flat, nested)
    assert flat[0] == 301
    assert "content-security-policy" not in dict(flat[1])  # an inner layer's header
    # Over HTTPS the same settings add HSTS on the way out.
    flat, nested = _both("GET", "/api/v1/whoami", HTTP_AUTHORIZATION=f"Bearer {token}")
    _same(flat, nested)
    assert "strict-transport-security" in dict(flat[1])
    # A middle layer raises (a refused user agent): the layers outside it still add their
    # headers, it and those inside it do not.
    settings.SECURE_SSL_REDIRECT = False
    settings.DISALLOWED_USER_AGENTS = [re.compile("^evil")]
    flat, nested = _both(
        "GET", "/api/v1/whoami", HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_USER_AGENT="evil/1"
    )
    _same(flat, nested)
    assert flat[0] == 403
    assert "x-content-type-options" in dict(flat[1])
    assert "x-frame-options" not in dict(flat[1])
    # The host check raises in the same layer.
    settings.DISALLOWED_USER_AGENTS = []
    settings.ALLOWED_HOSTS = ["testserver"]
    flat, nested = _both("POST", "/api/v1/events", _event("h"), HTTP_HOST="evil.example")
    _same(flat, nested)
    assert flat[0] == 400


class _Answering(MiddlewareMixin):
    """A layer that answers a request itself, and one whose response hook raises."""

    def process_request(self, request: Any) -> Any:
        if request.path.endswith("/whoami") and request.headers.get("X-Answer"):
            return HttpResponse(b"from a layer", status=202)
        return None

    def process_response(self, request: Any, response: Any) -> Any:
        if request.headers.get("X-Fail-Out"):
            raise PermissionDenied("refused on the way out")
        response["X-Answering"] = "1"
        return response


class _OwnCall:
    """A layer with its own ``__call__``: the chain runs nested, as Django built it."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        response = self.get_response(request)
        response["X-Own-Call"] = "1"
        return response


def test_flat_and_nested_chains_agree_on_a_layer_that_answers_or_fails_on_the_way_out(
    token: str, settings: Any
) -> None:
    settings.API_MIDDLEWARE = [
        *django_settings.API_MIDDLEWARE[:2],
        f"{__name__}._Answering",
        *django_settings.API_MIDDLEWARE[2:],
    ]
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    for extra in ({}, {"HTTP_X_ANSWER": "1"}, {"HTTP_X_FAIL_OUT": "1"}):
        flat, nested = _both("GET", "/api/v1/whoami", **auth, **extra)
        _same(flat, nested)
        if extra.get("HTTP_X_ANSWER"):
            assert flat[0] == 202
            assert flat[2] == b"from a layer"
            assert "x-frame-options" not in dict(flat[1])  # inner layers never ran
    # Raised on the way out: answered as the API refuses, the layers outside it (the CSP
    # and security layers) adding their headers, the answer of those inside it gone.
    assert flat[0] == 403
    assert "content-security-policy" in dict(flat[1])
    assert "x-frame-options" not in dict(flat[1])


def test_a_layer_with_its_own_call_keeps_the_chain_nested(token: str, settings: Any) -> None:
    settings.API_MIDDLEWARE = [*django_settings.API_MIDDLEWARE, f"{__name__}._OwnCall"]
    handler = ApiHandler()
    assert handler._middleware_chain != handler._flat_chain
    status, headers, _ = _call(
        "GET", "/api/v1/whoami", app=handler, HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert status == 200
    assert dict(headers)["x-own-call"] == "1"


def test_only_fixed_routes_are_kept_resolved(token: str) -> None:
    handler = ApiHandler()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    for n in range(20):
        _call("GET", f"/api/v1/sessions/s-{n}", app=handler, **auth)
        _call("GET", f"/api/v1/unrouted-{n}", app=handler, **auth)
        _call("POST", "/api/v1/events", _event(f"fixed-{n}"), app=handler, **auth)
        _call("GET", "/api/v1/whoami", app=handler, **auth)
    assert sorted(path for _, path in handler._routes) == ["/api/v1/events", "/api/v1/whoami"]
    match = handler._routes[next(iter(handler._routes))]
    assert match.url_name in {"events-ingest", "whoami"}
    assert match.namespace == "api"


class _ViewHook(MiddlewareMixin):
    """A layer that sees each view's arguments before the view runs."""

    def process_view(self, request: Any, view: Any, args: Any, kwargs: Any) -> None:
        return None  # it could change ``kwargs``: a kept match's would stay changed


def test_with_a_view_hook_no_route_is_kept_resolved(token: str, settings: Any) -> None:
    settings.API_MIDDLEWARE = [*django_settings.API_MIDDLEWARE, f"{__name__}._ViewHook"]
    handler = ApiHandler()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    for _ in range(3):
        status, _, _ = _call("GET", "/api/v1/whoami", app=handler, **auth)
        assert status == 200
    assert handler._routes == {}
