"""What each token scope may do, endpoint by endpoint (the table is the decision, also in
docs/reliability.md and sessionhub/permissions.py). Every API endpoint the URL
configuration serves must be in the table, so a new one cannot slip past unclassified.

``ingest`` posts events and asks continuity preambles (a gateway needs the preamble at a
session's start) and reads nothing else; ``read`` reads everything of the team; writes
that answer with memory the caller picks need both; ``admin`` does everything.
"""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.factories import AgentFactory, PinFactory, session_with_story

from .test_security import api_routes

pytestmark = pytest.mark.django_db

INGEST, READ, BOTH = frozenset({"ingest"}), frozenset({"read"}), frozenset({"ingest", "read"})
ANY: frozenset[str] = frozenset()

NEEDS = {
    ("/api/v1/events", "post"): INGEST,
    ("/api/v1/hooks/claude-code", "post"): INGEST,
    ("/api/v1/hooks/openclaw", "post"): INGEST,
    ("/api/v1/hooks/codex", "post"): INGEST,
    ("/api/v1/hooks/gemini-cli", "post"): INGEST,
    ("/api/v1/continuity", "post"): INGEST,
    ("/api/v1/sessions/<str:session_id>/summarize", "post"): INGEST,
    ("/api/v1/sessions", "get"): READ,
    ("/api/v1/sessions/<str:session_id>", "get"): READ,
    ("/api/v1/sessions/<str:session_id>/events", "get"): READ,
    ("/api/v1/sessions/<str:session_id>/memory", "get"): READ,
    ("/api/v1/sessions/<str:session_id>/continuity", "get"): READ,
    ("/api/v1/sessions/<str:session_id>/export", "get"): READ,
    ("/api/v1/agents", "get"): READ,
    ("/api/v1/agents/<str:agent_id>/pins", "get"): READ,
    ("/api/v1/agents/<str:agent_id>/pins", "post"): BOTH,
    ("/api/v1/pins/<int:pin_id>", "patch"): BOTH,
    ("/api/v1/pins/<int:pin_id>", "delete"): BOTH,
    ("/api/v1/sessions/<str:session_id>/continue", "post"): BOTH,
    # The MCP endpoint: every tool reads the team's memory (docs/integrations.md).
    ("/api/v1/mcp", "post"): READ,
    # Which team and token a token stands for: any valid token may ask (the hook
    # client's `status` checks an ingest-only token with it).
    ("/api/v1/whoami", "get"): ANY,
    ("/api/v1/whoami", "post"): ANY,
}

SCOPE_SETS = [("ingest",), ("read",), ("ingest", "read"), ("admin",)]


def _client(make_token: Any, team: Any, scopes: tuple[str, ...]) -> APIClient:
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION=f"Bearer {make_token(team, scopes=scopes, name='-'.join(scopes))[1]}"
    )
    return client


def test_every_endpoint_is_classified() -> None:
    served = {
        (template, method)
        for template, _, methods in api_routes()
        for method in methods
        if not template.startswith("/api/v1/^")  # the catch-all 404 route
    }
    assert served == set(NEEDS)


@pytest.mark.parametrize("scopes", SCOPE_SETS, ids=["+".join(s) for s in SCOPE_SETS])
def test_scopes_allow_exactly_what_the_table_says(
    team: Any, make_token: Any, scopes: tuple[str, ...]
) -> None:
    agent = AgentFactory(team=team)
    session = session_with_story(team, agent=agent)
    other = session_with_story(team, agent=agent)
    pin = PinFactory(agent=agent)
    client = _client(make_token, team, scopes)
    fill = {
        "<str:session_id>": str(session.pk),
        "<str:agent_id>": str(agent.pk),
        "<int:pin_id>": str(pin.pk),
    }
    bodies = {
        "/api/v1/continuity": {"session_id": session.external_id},
        "/api/v1/agents/<str:agent_id>/pins": {"label": f"pin {'-'.join(scopes)}"},
        "/api/v1/pins/<int:pin_id>": {},
        "/api/v1/sessions/<str:session_id>/continue": {"source_session_id": str(other.pk)},
    }
    have = {"ingest", "read"} if "admin" in scopes else set(scopes)
    for (template, method), needed in NEEDS.items():
        url = template
        for placeholder, value in fill.items():
            url = url.replace(placeholder, value)
        body = bodies.get(template, {"not": "an event"})
        response = getattr(client, method)(url, body if method != "get" else None, format="json")
        if needed <= have:
            assert response.status_code != 403, (scopes, method, template, response.content)
        else:
            assert response.status_code == 403, (scopes, method, template, response.status_code)
            if template == "/api/v1/mcp":  # its errors are JSON-RPC errors
                assert response.json()["error"]["code"] == -32003
            else:
                assert response.json()["code"] == "permission_denied"


def test_an_ingest_only_token_gets_the_preamble_and_nothing_else(
    team: Any, make_token: Any
) -> None:
    """What a gateway does at a session's start works; reading memory around it does not."""
    agent = AgentFactory(team=team, external_id="research")
    prior = session_with_story(team, agent=agent, external_id="prior")
    pin = PinFactory(agent=agent, label="a pinned decision", content="the secret plan")
    gateway = _client(make_token, team, ("ingest",))
    start = {
        "event_id": "start-1",
        "kind": "session_start",
        "agent_id": "research",
        "session_id": "new-session",
    }
    assert gateway.post("/api/v1/events", start, format="json").status_code == 200
    answer = gateway.post("/api/v1/continuity", {"session_id": "new-session"}, format="json")
    assert answer.status_code == 200, answer.content
    assert set(answer.json()) == {
        "record_id",
        "session_id",
        "trigger",
        "preamble",
        "sources",
        "candidates_scored",
        "inherited_pins",
        "keywords",
        "created_at",
        "stage",
        "reason",
    }
    # Around it: the pin by id, the prior session by continuing from it, its memory.
    new = answer.json()["session_id"]
    for response in (
        gateway.patch(f"/api/v1/pins/{pin.pk}", {}, format="json"),
        gateway.post(
            f"/api/v1/sessions/{new}/continue", {"source_session_id": str(prior.pk)}, format="json"
        ),
        gateway.get(f"/api/v1/sessions/{prior.pk}/memory"),
        gateway.get(f"/api/v1/sessions/{prior.pk}/export"),
        gateway.get(f"/api/v1/agents/{agent.pk}/pins"),
    ):
        assert response.status_code == 403
        assert "the secret plan" not in response.content.decode()
