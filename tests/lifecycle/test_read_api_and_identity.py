"""Agent identity per gateway, the session chain on replacement, and the read API's
filters, cursor pagination and team scoping."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from lifecycle.adapters.base import normalize_git_remote
from lifecycle.models import Agent, EventKind, Session, SessionStatus
from tests.conftest import claude_code_hooks

pytestmark = pytest.mark.django_db

NOW = timezone.now()


def stamp(line: dict[str, Any], n: int, **extra: Any) -> dict[str, Any]:
    return {**line, "sessionhub": {"event_id": f"{line['session_id']}-{n}", **extra}}


@pytest.mark.parametrize(
    ("remote", "project"),
    [
        ("git@github.com:acme/api.git", "github.com/acme/api"),
        ("https://github.com/acme/api", "github.com/acme/api"),
        ("https://user:s3cret@github.com/acme/api.git", "github.com/acme/api"),
        ("ssh://git@gitlab.example.com:2222/team/api.git", "gitlab.example.com/team/api"),
        ("https://GitHub.com/Acme/api/", "github.com/Acme/api"),
    ],
)
def test_git_remotes_name_the_project(remote: str, project: str) -> None:
    assert normalize_git_remote(remote) == project


def test_two_repositories_called_api_stay_apart(api: APIClient) -> None:
    base = claude_code_hooks("basic")[0]
    for n, cwd in enumerate(["/home/ana/work/api", "/home/ana/oss/api"]):
        body = stamp({**base, "session_id": f"s{n}", "cwd": cwd}, 0)
        assert api.post("/api/v1/hooks/claude-code", body, format="json").status_code == 200
    agents = Agent.objects.order_by("project")
    assert [a.project for a in agents] == ["/home/ana/oss/api", "/home/ana/work/api"]
    assert agents[0].pk != agents[1].pk


def test_the_git_remote_wins_over_the_directory(api: APIClient) -> None:
    base = claude_code_hooks("basic")[0]
    for n, cwd in enumerate(["/home/ana/api", "/tmp/worktree-api"]):
        body = stamp(
            {**base, "session_id": f"s{n}", "cwd": cwd}, 0, git_remote="git@github.com:acme/api.git"
        )
        api.post("/api/v1/hooks/claude-code", body, format="json")
    assert Agent.objects.count() == 1
    assert Agent.objects.get().project == "github.com/acme/api"
    assert set(Session.objects.values_list("project", flat=True)) == {"github.com/acme/api"}


def test_the_gateway_of_the_token_is_part_of_a_claude_code_agent(
    team: Any, make_token: Any, client_for: Any
) -> None:
    base = claude_code_hooks("basic")[0]
    for n, name in enumerate(["laptop", "ci-runner"]):
        client = client_for(make_token(team, name=name)[1])
        client.post(
            "/api/v1/hooks/claude-code", stamp({**base, "session_id": f"s{n}"}, 0), format="json"
        )
    assert sorted(Agent.objects.values_list("external_id", flat=True)) == [
        f"ci-runner:{base['cwd']}",
        f"laptop:{base['cwd']}",
    ]


def test_a_new_start_for_the_same_key_replaces_the_open_session(api: APIClient) -> None:
    def start(session: str, minutes: int) -> dict[str, Any]:
        return {
            "event_id": f"{session}-start",
            "kind": "session_start",
            "agent_id": "main",
            "session_id": session,
            "session_key": "main:signal:dm:42",
            "occurred_at": (NOW - timedelta(minutes=minutes)).isoformat(),
        }

    api.post("/api/v1/events", [start("old", 30)], format="json")
    api.post("/api/v1/events", [start("new", 5)], format="json")
    old, new = Session.objects.get(external_id="old"), Session.objects.get(external_id="new")
    assert old.status == SessionStatus.ENDED
    assert old.end_reason == "replaced"
    assert old.ended_at == new.started_at
    assert new.previous_session_id == old.pk
    assert new.status == SessionStatus.ACTIVE
    end = old.events.get(kind=EventKind.SESSION_END)
    assert end.source == "sessionhub"
    assert end.facts["replaced_by"] == str(new.pk)


def _seed(api: APIClient) -> None:
    events = []
    for n in range(7):
        session = f"s{n}"
        events.append(
            {
                "event_id": f"{session}-0",
                "kind": "session_start",
                "agent_id": "research" if n % 2 else "main",
                "session_id": session,
                "channel": "discord" if n < 4 else "cli",
                "occurred_at": (NOW - timedelta(hours=10 - n)).isoformat(),
            }
        )
        if n < 3:
            events.append(
                {
                    "event_id": f"{session}-1",
                    "kind": "session_end",
                    "agent_id": "research" if n % 2 else "main",
                    "session_id": session,
                    "reason": "idle" if n == 0 else "reset",
                    "occurred_at": (NOW - timedelta(hours=9.5 - n)).isoformat(),
                }
            )
    assert api.post("/api/v1/events", events, format="json").json()["accepted"] == len(events)


def ids(response: Any) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["external_id"] for row in response.json()["results"]]


def test_session_filters(api: APIClient) -> None:
    _seed(api)
    assert ids(api.get("/api/v1/sessions?status=ended")) == ["s2", "s1", "s0"]
    assert ids(api.get("/api/v1/sessions?status=active&channel=cli")) == ["s6", "s5", "s4"]
    assert ids(api.get("/api/v1/sessions?end_reason=idle_timeout")) == ["s0"]
    assert ids(api.get("/api/v1/sessions?agent_external_id=research")) == ["s5", "s3", "s1"]
    agent = Agent.objects.get(external_id="main")
    assert ids(api.get(f"/api/v1/sessions?agent={agent.pk}")) == ["s6", "s4", "s2", "s0"]
    since = (NOW - timedelta(hours=5.5)).isoformat().replace("+00:00", "Z")
    assert ids(api.get("/api/v1/sessions", {"started_after": since})) == ["s6", "s5"]
    assert ids(api.get("/api/v1/sessions?source=generic&status=ended&status=active")) == [
        f"s{n}" for n in range(6, -1, -1)
    ]
    bad = api.get("/api/v1/sessions?status=sleeping")
    assert bad.status_code == 400
    assert bad.json()["code"] == "invalid"


def test_cursor_pagination_walks_every_session_once(api: APIClient) -> None:
    _seed(api)
    seen: list[str] = []
    url = "/api/v1/sessions?page_size=3"
    while url:
        body = api.get(url).json()
        seen += [row["external_id"] for row in body["results"]]
        url = body["next"]
    assert seen == [f"s{n}" for n in range(6, -1, -1)]


def test_session_detail_and_events(api: APIClient) -> None:
    _seed(api)
    session = Session.objects.get(external_id="s0")
    detail = api.get(f"/api/v1/sessions/{session.pk}").json()
    assert detail["status"] == "ended"
    assert detail["end_reason"] == "idle_timeout"
    assert [e["kind"] for e in detail["timeline"]] == ["session_start", "session_end"]
    assert detail["chain"][0]["id"] == str(session.pk)
    events = api.get(f"/api/v1/sessions/{session.pk}/events").json()
    assert [e["event_id"] for e in events["results"]] == ["s0-0", "s0-1"]


def test_read_scope_is_needed_to_read(team: Any, make_token: Any, client_for: Any) -> None:
    _, raw = make_token(team, scopes=("ingest",))
    response = client_for(raw).get("/api/v1/sessions")
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
