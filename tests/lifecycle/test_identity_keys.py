"""Identity is a key that redaction never changes (issue 12 item 1, issue 15 item 2).

Two Claude Code projects whose paths and remotes hold digits, under a token named
``*-token`` (as ``create_api_token`` and ``make run`` name them), stay two agents with
separate preambles; identifiers holding a secret stay apart, are found again on a retry,
and are never stored in clear; merged agents of older versions can be split again.
"""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from lifecycle.adapters.base import normalize_git_remote
from lifecycle.models import Agent, LifecycleEvent, Session
from sessionhub.text.redaction import redact_text

# Transactional: the memory pipeline runs after commit, as in production.
pytestmark = pytest.mark.django_db(transaction=True)

NOW = timezone.now()
GHP = "ghp_" + "Zq7Kx2Lm9Np4Rs6Tv8Wy1Ab3Cd5Ef0Gh2Ij4K"  # a made-up token in GitHub's format


def at(minutes_ago: float) -> str:
    return (NOW - timedelta(minutes=minutes_ago)).isoformat()


def hook(session: str, name: str, n: int, minutes_ago: float, cwd: str, remote: str, **more: Any):
    extra = {"event_id": f"{session}-{n}", "occurred_at": at(minutes_ago)}
    if remote:
        extra["git_remote"] = remote
    return {
        "session_id": session,
        "transcript_path": f"/tmp/{session}.jsonl",
        "cwd": cwd,
        "permission_mode": "default",
        "hook_event_name": name,
        **more,
        "sessionhub": extra,
    }


def work_session(api: APIClient, session: str, cwd: str, remote: str, prompt: str) -> None:
    """A finished Claude Code session that leaves a pending task behind."""
    lines = [
        hook(session, "SessionStart", 0, 120, cwd, remote, source="startup"),
        hook(session, "UserPromptSubmit", 1, 110, cwd, remote, prompt=prompt),
        hook(session, "Stop", 2, 100, cwd, remote, last_assistant_message=f"Started: {prompt}"),
        hook(session, "SessionEnd", 3, 90, cwd, remote, reason="prompt_input_exit"),
    ]
    for line in lines:
        response = api.post("/api/v1/hooks/claude-code", line, format="json")
        assert response.status_code == 200, response.content
        assert response.json()["results"][0]["status"] == "accepted", response.content


def new_session_preamble(api: APIClient, session: str, cwd: str, remote: str) -> str:
    start = hook(session, "SessionStart", 0, 1, cwd, remote, source="startup")
    assert api.post("/api/v1/hooks/claude-code", start, format="json").status_code == 200
    response = api.post(
        "/api/v1/continuity", {"source": "claude-code", "session_id": session}, format="json"
    )
    assert response.status_code == 200, response.content
    return response.json()["preamble"]


PROJECTS = {
    "api-v2": ("/home/alice/src/api-v2", "https://github.com/acme/api-v2.git", "task-4101"),
    "web3-app": ("/home/alice/src/web3-app", "git@github.com:acme/web3-app.git", "task-7302"),
}


@pytest.mark.parametrize("with_remote", [True, False], ids=["remotes", "paths"])
def test_two_projects_with_digits_under_a_token_named_token_stay_two_agents(
    team: Any, make_token: Any, client_for: Any, with_remote: bool
) -> None:
    api = client_for(make_token(team, name="first-token")[1])
    # The identity strings that older versions redacted into one.
    for cwd, remote, _task in PROJECTS.values():
        for project in (cwd, normalize_git_remote(remote)):
            assert redact_text(f"first-token:{project}") == f"first-token:{project}"

    for name, (cwd, remote, task) in PROJECTS.items():
        work_session(
            api,
            f"old-{name}",
            cwd,
            remote if with_remote else "",
            f"TODO: {task} finish the {name} release notes in {cwd}",
        )
    agents = Agent.objects.filter(team=team).order_by("project")
    assert agents.count() == 2
    expected = sorted(
        f"github.com/acme/{n}" if with_remote else cwd for n, (cwd, _r, _t) in PROJECTS.items()
    )
    assert [a.project for a in agents] == expected
    assert all("[REDACTED" not in a.external_id + a.name + a.project for a in agents)
    for name in PROJECTS:
        assert Session.objects.get(external_id=f"old-{name}").agent.project.endswith(name)

    for name, (cwd, remote, task) in PROJECTS.items():
        preamble = new_session_preamble(api, f"new-{name}", cwd, remote if with_remote else "")
        (other,) = (n for n in PROJECTS if n != name)
        other_cwd, _other_remote, other_task = PROJECTS[other]
        assert task in preamble, preamble
        assert other_task not in preamble, preamble
        assert other not in preamble and other_cwd not in preamble, preamble
        new = Session.objects.get(external_id=f"new-{name}")
        assert new.agent == Session.objects.get(external_id=f"old-{name}").agent


def test_a_project_that_holds_a_secret_keeps_its_own_agent_and_never_shows_it(
    team: Any, make_token: Any, client_for: Any
) -> None:
    api = client_for(make_token(team, name="first-token")[1])
    cwd_a, cwd_b = f"/home/alice/{GHP}/api-v2", f"/home/alice/{GHP[:-1]}Q/api-v2"
    work_session(api, "s-a", cwd_a, "", "TODO: task-1 in a")
    work_session(api, "s-b", cwd_b, "", "TODO: task-2 in b")
    work_session(api, "s-a2", cwd_a, "", "TODO: task-3 in a")
    agents = list(Agent.objects.filter(team=team))
    assert len(agents) == 2  # redaction makes the two paths alike; the keys do not
    assert (
        Session.objects.get(external_id="s-a").agent
        == Session.objects.get(external_id="s-a2").agent
    )
    for agent in agents:
        assert GHP[:12] not in agent.external_id + agent.name + agent.project
        assert agent.name == "api-v2"


def test_identifiers_holding_secrets_stay_keys_and_a_retry_is_a_duplicate(api: APIClient) -> None:
    other = GHP[:-4] + "AAAA"

    def event(event_id: str, session_id: str, text: str) -> dict[str, Any]:
        return {
            "event_id": event_id,
            "kind": "prompt",
            "agent_id": f"agent-{GHP}",
            "session_id": session_id,
            "text": text,
            "payload": {GHP: "a key named by a secret", other: "another"},
        }

    first = api.post("/api/v1/events", event(f"e-{GHP}", f"s-{GHP}", "one"), format="json")
    assert first.status_code == 200
    (result,) = first.json()["results"]
    assert result["status"] == "accepted" and GHP[:12] not in str(first.json())
    again = api.post("/api/v1/events", event(f"e-{GHP}", f"s-{GHP}", "one"), format="json")
    assert again.json()["results"][0]["status"] == "duplicate"
    second = api.post("/api/v1/events", event(f"e-{other}", f"s-{other}", "two"), format="json")
    assert second.json()["results"][0]["status"] == "accepted"

    assert LifecycleEvent.objects.count() == 2
    assert Session.objects.count() == 2
    assert Agent.objects.count() == 1
    for row in LifecycleEvent.objects.all():
        assert len(row.payload) == 2  # two secret keys, still two keys
        stored = row.event_id + row.session.external_id + str(row.payload)
        assert GHP[:12] not in stored and "ghp_" not in stored
        assert row.event_id.startswith("e-[REDACTED:github_token]~")


def test_merged_agents_are_split_again_from_the_stored_facts(
    team: Any, make_token: Any, client_for: Any
) -> None:
    api = client_for(make_token(team, name="first-token")[1])
    for name, (cwd, _remote, task) in PROJECTS.items():
        work_session(api, f"old-{name}", cwd, "", f"TODO: {task}")
    # As an older version stored them: one agent under the redacted identity.
    merged = Agent.objects.create(
        team=team,
        source="claude-code",
        external_id="first-token:[REDACTED:secret_assignment]",
        name="[REDACTED:secret_assignment] (first-token)",
        project="",
    )
    Session.objects.filter(team=team).update(agent=merged)
    Agent.objects.exclude(pk=merged.pk).delete()
    # ...and one session whose project was stored redacted: nothing to split it by.
    lost = Session.objects.get(external_id="old-web3-app")
    lost.pk = None
    lost.external_id = "old-hidden"
    lost.project = lost.cwd = "/home/[REDACTED:secret_assignment]"
    lost.save()

    out = io.StringIO()
    call_command("split_merged_agents", stdout=out)
    report = out.getvalue()
    assert "2 sessions moved" in report
    assert "1 session could not be split" in report
    for name, (cwd, _remote, _task) in PROJECTS.items():
        agent = Session.objects.get(external_id=f"old-{name}").agent
        assert agent.external_id == f"first-token:{cwd}"
        assert agent.name == name
    assert Session.objects.get(external_id="old-hidden").agent_id == merged.pk
    # Running it again changes nothing.
    out = io.StringIO()
    call_command("split_merged_agents", stdout=out)
    assert "0 sessions moved" in out.getvalue()
    # New sessions join the agents the command made.
    work_session(api, "later-api-v2", PROJECTS["api-v2"][0], "", "TODO: more")
    assert (
        Session.objects.get(external_id="later-api-v2").agent
        == Session.objects.get(external_id="old-api-v2").agent
    )


def test_filters_take_an_identifier_raw_or_as_stored(api: APIClient) -> None:
    body = {"event_id": "f-1", "kind": "session_start", "agent_id": f"a-{GHP}"}
    api.post("/api/v1/events", {**body, "session_id": f"s-{GHP}"}, format="json")
    stored = Session.objects.get().external_id
    assert GHP[:12] not in stored
    for value in (f"s-{GHP}", stored):
        found = api.get("/api/v1/sessions", {"external_id": value}).json()["results"]
        assert [s["external_id"] for s in found] == [stored]
    for value in (f"a-{GHP}", Agent.objects.get().external_id):
        found = api.get("/api/v1/agents", {"external_id": value}).json()
        assert len(found) == 1
        found = api.get("/api/v1/sessions", {"agent_external_id": value}).json()["results"]
        assert len(found) == 1
