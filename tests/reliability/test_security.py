"""Security: each team's data stays the team's, tokens are kept and compared safely,
limits hold per token, forms need their CSRF token, the admin is for staff, the headers
are set, and no token or secret reaches the logs.

Routes are enumerated from the URL configuration, so an endpoint or dashboard page added
later is covered (or fails loudly here when it takes a parameter this suite cannot fill).
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from lifecycle import services
from lifecycle.adapters import claude_code
from lifecycle.models import Agent, LifecycleEvent, Session
from memory.models import ContinuityRecord, Pin
from memory.services.pins import pin_create
from sessionhub import authentication
from sessionhub.models import Team, hash_token
from sessionhub.services import api_token_create, membership_add
from tests.conftest import claude_code_hooks, secret_cases

pytestmark = pytest.mark.django_db

METHODS = ("get", "post", "put", "patch", "delete")


def routes() -> Iterator[tuple[str, URLPattern]]:
    """(route template, pattern) for every URL the project serves."""

    def walk(patterns: list[Any], prefix: str) -> Iterator[tuple[str, URLPattern]]:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            else:
                yield prefix + str(pattern.pattern), pattern

    yield from walk(get_resolver().url_patterns, "/")


def api_routes() -> list[tuple[str, Any, list[str]]]:
    """(template, view class, methods) of every API endpoint (DRF's, and the MCP
    endpoint's plain Django view)."""
    found = []
    for template, pattern in routes():
        if template.startswith("/api/v1/"):
            callback: Any = pattern.callback
            view = getattr(callback, "cls", None) or callback.view_class
            found.append((template, view, [m for m in METHODS if hasattr(view, m)]))
    return found


def dashboard_routes() -> list[tuple[str, str]]:
    """(template, url name) of every dashboard page."""
    return [
        (template, pattern.name or "")
        for template, pattern in routes()
        if pattern.callback.__module__.startswith("dashboard.")
    ]


def fill(template: str, ids: dict[str, Any]) -> str:
    """The template with each ``<converter:name>`` replaced by ``ids[name]``."""
    path = template
    while "<" in path:
        start, end = path.index("<"), path.index(">")
        name = path[start + 1 : end].split(":")[-1]
        assert name in ids, f"no id for <{name}> in {template}: extend this suite"
        path = path[:start] + str(ids[name]) + path[end + 1 :]
    return path


# --- two teams with data ------------------------------------------------------------------


def _claude(gateway: str) -> Any:
    return lambda body, now: claude_code.adapt(body, gateway=gateway, now=now)


def team_with_data(
    slug: str, marker: str, capture: Any
) -> tuple[Team, str, dict[str, Any], set[str]]:
    """A team holding a full session (with memory), a pin, a continuity record and a token
    with every scope; (team, raw token, its ids, strings that identify its data)."""
    from memory.services.continuity import continuity_build

    team = Team.objects.create(slug=slug, name=slug)
    _, raw = api_token_create(team=team, name=f"{slug}-admin", scopes=["admin"])
    lines = [
        {**line, "session_id": f"{marker}-session", "cwd": f"/home/{marker}/project"}
        for line in claude_code_hooks("basic")
    ]
    lines[1]["prompt"] = f"the {marker} secret plan"
    with capture(execute=True):
        services.events_ingest(team=team, bodies=lines, adapter=_claude(f"{marker}-gw"))
    session = Session.objects.get(team=team)
    pin = pin_create(agent=session.agent, label=f"{marker} pin", content=f"{marker} pin content")
    continuity_build(session=session, keywords=[marker], prompt="", requested_by="test")
    ids = {"session_id": session.pk, "agent_id": session.agent_id, "pin_id": pin.pk}
    strings = {f"{marker}-session", f"{marker} secret plan", f"{marker} pin", str(session.pk)}
    strings |= {str(session.agent_id), f"/home/{marker}/project"}
    return team, raw, ids, strings


@pytest.fixture
def two_teams(django_capture_on_commit_callbacks: Any) -> dict[str, Any]:
    mine = team_with_data("mine", "alpha", django_capture_on_commit_callbacks)
    theirs = team_with_data("theirs", "omega", django_capture_on_commit_callbacks)
    return {"mine": mine, "theirs": theirs}


def snapshot_of(team: Team) -> dict[str, Any]:
    return {
        "sessions": list(Session.objects.filter(team=team).order_by("pk").values()),
        "events": LifecycleEvent.objects.filter(team=team).count(),
        "pins": list(Pin.objects.filter(team=team).order_by("pk").values()),
        "records": ContinuityRecord.objects.filter(session__team=team).count(),
        "agents": list(Agent.objects.filter(team=team).order_by("pk").values()),
    }


def assert_no_leak(content: bytes, strings: set[str]) -> None:
    text = content.decode("utf-8", errors="replace")
    leaked = [s for s in strings if s in text]
    assert not leaked, (leaked, text[:500])


BODIES: dict[str, Any] = {
    "/api/v1/agents/<str:agent_id>/pins": {"label": "planted", "content": "x"},
    "/api/v1/pins/<int:pin_id>": {"content": "overwritten", "label": "overwritten"},
    "/api/v1/sessions/<str:session_id>/continue": "SOURCE",
}


def test_every_api_endpoint_with_another_teams_ids_is_404(two_teams: dict[str, Any]) -> None:
    _, my_raw, my_ids, _ = two_teams["mine"]
    their_team, _, their_ids, their_strings = two_teams["theirs"]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {my_raw}")
    before = snapshot_of(their_team)
    covered = []
    for template, _view, methods in api_routes():
        if "<" not in template:
            continue
        path = fill(template, their_ids)
        for method in methods:
            body = BODIES.get(template, {})
            if body == "SOURCE":
                body = {"source_session_id": str(my_ids["session_id"])}
            response = getattr(api, method)(path, body, format="json")
            assert response.status_code == 404, (method, path, response.content[:300])
            assert response.json()["code"] == "not_found"
            assert_no_leak(response.content, their_strings)
            covered.append(f"{method.upper()} {template}")
        if template.endswith("/continue"):
            # Their session as the source of mine: 404 too, nothing inherited.
            mine = fill(template, my_ids)
            response = api.post(
                mine, {"source_session_id": str(their_ids["session_id"])}, format="json"
            )
            assert response.status_code == 404, response.content
    assert snapshot_of(their_team) == before
    assert len(covered) >= 10, covered
    print(f"tenant isolation: {len(covered)} (method, endpoint) pairs with another team's ids")


def test_lists_filters_and_ingest_never_reach_another_team(two_teams: dict[str, Any]) -> None:
    my_team, my_raw, _, _ = two_teams["mine"]
    their_team, _, their_ids, their_strings = two_teams["theirs"]
    their_session = Session.objects.get(pk=their_ids["session_id"])
    their_agent = Agent.objects.get(pk=their_ids["agent_id"])
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {my_raw}")
    before = snapshot_of(their_team)
    gets = [
        "/api/v1/sessions",
        f"/api/v1/sessions?agent={their_agent.pk}",
        f"/api/v1/sessions?external_id={their_session.external_id}",
        f"/api/v1/sessions?session_key={their_session.session_key}",
        f"/api/v1/sessions?agent_external_id={their_agent.external_id}",
        "/api/v1/agents",
        f"/api/v1/agents?external_id={their_agent.external_id}",
        f"/api/v1/agents?source={their_agent.source}",
    ]
    for path in gets:
        response = api.get(path)
        assert response.status_code == 200, (path, response.content)
        assert_no_leak(response.content, their_strings)
    # Posting events that name their session and agent makes sessions of my own team.
    line = {**claude_code_hooks("basic")[1], "session_id": their_session.external_id}
    assert api.post("/api/v1/hooks/claude-code", line, format="json").status_code == 200
    canonical = {
        "event_id": "evt-x",
        "kind": "prompt",
        "agent_id": their_agent.external_id,
        "session_id": their_session.external_id,
    }
    assert api.post("/api/v1/events", canonical, format="json").status_code == 200
    # Continuity for a session id they use: my own (new) session, nothing of theirs.
    response = api.post(
        "/api/v1/continuity",
        {
            "source": their_session.source,
            "session_id": their_session.external_id,
            "agent_id": their_agent.external_id,
            "keywords": ["omega"],
        },
        format="json",
    )
    assert response.status_code == 200
    assert_no_leak(response.content, their_strings - {their_session.external_id})
    assert response.json()["sources"] == [] and response.json()["inherited_pins"] == []
    assert snapshot_of(their_team) == before
    assert Session.objects.filter(team=my_team, external_id=their_session.external_id).exists()


@pytest.fixture
def members(two_teams: dict[str, Any]) -> dict[str, Any]:
    users = get_user_model()
    me = users.objects.create_user("me", password="pw-me-123456")
    membership_add(team=two_teams["mine"][0], user=me)
    staff = users.objects.create_superuser("root", password="pw-root-123456")
    return {"me": me, "staff": staff}


def test_every_dashboard_page_with_another_teams_ids_is_404(
    two_teams: dict[str, Any], members: dict[str, Any]
) -> None:
    their_team, _, their_ids, their_strings = two_teams["theirs"]
    client = Client()
    client.force_login(members["me"])
    before = snapshot_of(their_team)
    covered = []
    for template, _name in dashboard_routes():
        if "<" in template:
            path = fill(template, their_ids)
            for method in ("get", "post"):
                response = getattr(client, method)(path, {"label": "planted", "content": "x"})
                # GET-only and POST-only views answer 405 to the other method: no data.
                assert response.status_code in (404, 405), (method, path, response.status_code)
                assert_no_leak(response.content, their_strings)
                covered.append(f"{method.upper()} {template}")
        else:
            response = client.get(template)
            assert response.status_code in (200, 405), (template, response.status_code)
            assert_no_leak(response.content, their_strings)
            covered.append(f"GET {template}")
    # Asking the poller for their session by id, and switching to their team.
    response = client.get(f"/live/sessions?ids={their_ids['session_id']}")
    assert response.status_code == 200 and response.json()["sessions"] == []
    response = client.post("/team", {"team": their_team.slug})
    assert response.status_code == 404
    assert_no_leak(client.get("/").content, their_strings)
    assert snapshot_of(their_team) == before
    print(f"dashboard isolation: {len(covered)} (method, page) pairs")


def test_every_form_and_post_needs_its_csrf_token(
    two_teams: dict[str, Any], members: dict[str, Any]
) -> None:
    _, _, my_ids, _ = two_teams["mine"]
    client = Client(enforce_csrf_checks=True)
    client.force_login(members["me"])
    pin_before = list(Pin.objects.order_by("pk").values())
    posts = [fill(t, my_ids) for t, _ in dashboard_routes()]
    posts += ["/accounts/logout/", "/accounts/login/", "/admin/login/"]
    for path in posts:
        response = client.post(path, {"label": "forged", "content": "x", "team": "mine"})
        assert response.status_code == 403, (path, response.status_code)
        assert b"CSRF" in response.content
    assert list(Pin.objects.order_by("pk").values()) == pin_before

    # With the token, the same forms work: the 403s above were the CSRF check.
    client.get(fill("/agents/<str:agent_id>/", my_ids))
    token = client.cookies["csrftoken"].value
    pin = Pin.objects.get(pk=my_ids["pin_id"])
    response = client.post(
        f"/pins/{pin.pk}/unpin", {"csrfmiddlewaretoken": token}, HTTP_X_CSRFTOKEN=token
    )
    assert response.status_code == 302
    assert Pin.objects.get(pk=pin.pk).unpinned_at is not None

    # Every form the dashboard renders carries the token.
    for template, _ in dashboard_routes():
        if "live" in template:
            continue
        page = client.get(fill(template, my_ids))
        html = page.content.decode()
        forms = html.count("<form")
        if page.status_code == 200 and 'method="post"' in html:
            assert html.count("csrfmiddlewaretoken") >= html.count('method="post"'), template
        assert forms >= 0


def test_admin_is_for_staff_only(two_teams: dict[str, Any], members: dict[str, Any]) -> None:
    urls = ["/admin/"] + [
        f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        for model in admin.site._registry
    ]
    anonymous, member, staff = Client(), Client(), Client()
    member.force_login(members["me"])
    staff.force_login(members["staff"])
    their_strings = two_teams["theirs"][3]
    for url in urls:
        for client in (anonymous, member):
            response = client.get(url)
            assert response.status_code == 302, (url, response.status_code)
            assert "/admin/login/" in response["Location"]
            assert_no_leak(response.content, their_strings)
        assert staff.get(url).status_code == 200, url
    print(f"admin: {len(urls)} pages refused to anonymous users and to non-staff members")


# --- tokens -------------------------------------------------------------------------------


def every_row_as_text() -> Iterator[tuple[str, str]]:
    tables = connection.introspection.table_names()
    with connection.cursor() as cursor:
        for table in tables:
            if connection.vendor == "postgresql":
                cursor.execute(f'SELECT t::text FROM "{table}" t')  # noqa: S608 - own table names
            else:
                cursor.execute(f'SELECT * FROM "{table}"')  # noqa: S608
            for row in cursor.fetchall():
                yield table, json.dumps(row, default=str)


def secret_part(raw: str) -> str:
    """A token's random part: ``shub_<prefix>_<random>``, where the random part itself may
    hold underscores (URL-safe base64), so it is what follows the second one."""
    return raw.split("_", 2)[2]


def test_tokens_are_stored_hashed_and_the_raw_token_is_nowhere(team: Team, make_token: Any) -> None:
    token, raw = make_token(team)
    secret = secret_part(raw)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    event = {"event_id": "evt-1", "kind": "session_start", "agent_id": "a", "session_id": "s"}
    assert client.post("/api/v1/events", event, format="json").status_code == 200
    token.refresh_from_db()
    assert token.token_hash == hash_token(raw) and len(token.token_hash) == 64
    assert token.last_used_at is not None
    rows = 0
    for table, text in every_row_as_text():
        rows += 1
        assert raw not in text and secret not in text, table
    assert rows > 0


def test_tokens_are_compared_in_constant_time(team: Team, make_token: Any) -> None:
    token, raw = make_token(team)
    authentication._token_cache.clear()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw[:-2]}xx")
    with mock.patch("sessionhub.models.hmac.compare_digest", wraps=hmac.compare_digest) as spy:
        assert client.get("/api/v1/sessions").status_code == 401
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        assert client.get("/api/v1/sessions").status_code == 200
    assert spy.call_count == 2
    assert spy.call_args_list[1].args == (token.token_hash, hash_token(raw))


def test_rate_limits_are_per_token_with_retry_after(
    team: Team, make_token: Any, settings: Any
) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"token": "5/min"},
    }
    clients = []
    for name in ("gw-1", "gw-2"):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token(team, name=name)[1]}")
        clients.append(client)
    first, second = clients
    for _ in range(5):
        assert first.get("/api/v1/sessions").status_code == 200
    limited = first.post(
        "/api/v1/events",
        {"event_id": "late", "kind": "prompt", "agent_id": "a", "session_id": "s"},
        format="json",
    )
    assert limited.status_code == 429
    assert 1 <= int(limited["Retry-After"]) <= 60
    assert limited.json()["code"] == "throttled"
    assert not LifecycleEvent.objects.exists()
    # Another token of the same team has its own budget.
    assert second.get("/api/v1/sessions").status_code == 200


def test_api_answers_when_the_rate_limit_cache_is_away(
    team: Team, make_token: Any, settings: Any
) -> None:
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",
            "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2},
        }
    }
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token(team)[1]}")
    assert client.get("/api/v1/sessions").status_code == 200


# --- headers ------------------------------------------------------------------------------


def test_security_headers_on_pages_api_and_errors(token: str, client: Client) -> None:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    responses = [
        client.get("/accounts/login/"),
        client.get("/"),
        api.get("/api/v1/sessions"),
        APIClient().get("/api/v1/sessions"),
        api.post("/api/v1/events", {"kind": 1}, format="json"),
        client.get("/healthz"),
    ]
    for response in responses:
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["Referrer-Policy"] == "same-origin"
        assert response["X-Frame-Options"] == "DENY"
        assert response["Cross-Origin-Opener-Policy"] == "same-origin"


def test_hsts_and_secure_cookies_under_production_settings(client: Client) -> None:
    from django.conf import settings

    assert not settings.DEBUG  # the tests run with production settings
    response = client.get("/accounts/login/", secure=True)
    assert response["Strict-Transport-Security"] == ("max-age=31536000; includeSubDomains; preload")
    assert response.cookies["csrftoken"]["secure"]
    assert settings.SESSION_COOKIE_SECURE and settings.SESSION_COOKIE_HTTPONLY
    assert settings.CSRF_COOKIE_SECURE


# --- logs ---------------------------------------------------------------------------------

SECRETS = [s for case in secret_cases() for s in case["secrets"]]


def test_no_token_or_secret_reaches_the_logs(
    team: Team, make_token: Any, caplog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    _, raw = make_token(team)
    _, read_only = make_token(team, scopes=("read",), name="reader")
    revoked_token, revoked = make_token(team, name="old")
    revoked_token.revoke()
    forged = raw[:-6] + "ABCDEF"
    garbage = "shub_deadbeef_" + "S3cr3tGarbageT0ken" * 3
    caplog.set_level(logging.DEBUG)

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    texts = [case["text"] for case in secret_cases()]
    with django_capture_on_commit_callbacks(execute=True):
        for i, text in enumerate(texts):
            line = {
                **claude_code_hooks("basic")[1],
                "prompt": text,
                "sessionhub": {"event_id": f"p{i}"},
            }
            assert api.post("/api/v1/hooks/claude-code", line, format="json").status_code == 200
        end = {**claude_code_hooks("basic")[-1], "reason": texts[0]}
        api.post("/api/v1/hooks/claude-code", end, format="json")
    # Secrets in places that fail: bad fields, bad bodies, query strings.
    for text in texts[:10]:
        api.post("/api/v1/events", {"event_id": "x", "kind": text}, format="json")
        api.post("/api/v1/events", {"event_id": text}, format="json")
        api.generic(
            "POST",
            "/api/v1/events",
            ("{" + json.dumps(text)).encode(),
            content_type="application/json",
        )
        api.get(f"/api/v1/sessions?project={text[:50]}&token={raw}")
        api.get(f"/api/v1/sessions/{text[:40]}")
    for bad in (forged, garbage, revoked, raw + "\x00", f"{raw} extra"):
        other = APIClient()
        other.credentials(HTTP_AUTHORIZATION=f"Bearer {bad}")
        assert other.post("/api/v1/events", {"kind": "prompt"}, format="json").status_code == 401
    reader = APIClient()
    reader.credentials(HTTP_AUTHORIZATION=f"Bearer {read_only}")
    assert reader.post("/api/v1/events", {"kind": "prompt"}, format="json").status_code == 403

    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    logged = "\n".join(formatter.format(record) for record in caplog.records)
    assert logged, "nothing was logged: the capture is not working"
    for value in [raw, read_only, revoked, forged, garbage, secret_part(raw), *SECRETS]:
        assert value not in logged, value
    print(f"logs: {len(caplog.records)} records searched for {len(SECRETS) + 6} secrets")


def test_content_security_policy_on_pages_and_api(token: str, client: Client) -> None:
    """No inline script, inline style or foreign source on the dashboard or the admin
    (the browser tests check that no page needs one)."""
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    for response in (
        client.get("/accounts/login/"),
        client.get("/admin/login/"),
        client.get("/"),
        api.get("/api/v1/sessions"),
        client.get("/healthz"),
    ):
        policy = response["Content-Security-Policy"]
        directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
        assert directives["script-src"] == "'self'"
        assert directives["style-src"] == "'self'"
        assert directives["object-src"] == "'none'"
        assert directives["frame-ancestors"] == "'none'"
        assert "unsafe" not in policy
    # The API viewers start with an inline script: left out, and only they are.
    assert "Content-Security-Policy" not in client.get("/api/docs")
