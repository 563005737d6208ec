"""No secret of the corpus survives ingestion, anywhere: every text of
``secrets.jsonl`` is posted through each ingest endpoint in each place a gateway puts
text (and pinned), the memory pipeline runs, then every row of every table and every
read endpoint's answer is searched. Each ``keep`` string must still be there.

The redaction rules have their own unit tests (``test_redaction.py``); this checks the
path around them: that nothing is stored, derived or served before or without them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import requests
from django.apps import apps
from django.core import serializers
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from lifecycle.models import Agent, LifecycleEvent, Session
from memory import pipeline
from memory.models import Observation, Pin, SessionFeatures, StreamTail, Summary
from tests.conftest import secret_cases
from tests.memory.payloads import claude_code_as_sent

CASES = secret_cases()
AWS_KEY_ID = re.compile(r"(?:AKIA|ASIA)[0-9A-Z]{16}")


# --- searching the database and the API -----------------------------------------------------


def strings_in(value: Any) -> Iterator[str]:
    """Every string of a decoded JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings_in(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from strings_in(item)


def database_rows() -> Iterator[tuple[str, Any]]:
    """(table, decoded row) for every row of every table of the database.

    On PostgreSQL each row comes out whole as JSON, so text, JSON and any other column
    are searched as stored; elsewhere every model row is serialized by Django.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for table in connection.introspection.table_names(cursor):
                quoted = connection.ops.quote_name(table)
                cursor.execute(f"SELECT row_to_json(t)::text FROM {quoted} t")  # noqa: S608
                for (row,) in cursor.fetchall():
                    yield table, json.loads(row)
    else:
        for model in apps.get_models(include_auto_created=True):
            for row in serializers.serialize("python", model.objects.all()):
                yield model._meta.db_table, row


def find_in_database(needles: list[str]) -> list[str]:
    """Where any of the needles occurs in the database: 'table: needle in ...' lines."""
    found = []
    for table, row in database_rows():
        for text in strings_in(row):
            for needle in needles:
                if needle in text:
                    found.append(f"{table}: {needle!r} in {text[:160]!r}")
    return found


def api_get_all(api: APIClient, url: str) -> list[Any]:
    """A read endpoint's answers, following cursor pagination to the end."""
    pages = []
    while url:
        response = api.get(url)
        assert response.status_code == 200, (url, response.content)
        body = response.json()
        pages.append(body)
        url = body.get("next") if isinstance(body, dict) else None
    return pages


def api_output(api: APIClient, sessions: list[Session]) -> list[Any]:
    """Everything the read API says about these sessions, their agents and pins."""
    out: list[Any] = api_get_all(api, "/api/v1/sessions?page_size=500")
    out += api_get_all(api, "/api/v1/agents")
    for session in sessions:
        out += api_get_all(api, f"/api/v1/sessions/{session.pk}")
        out += api_get_all(api, f"/api/v1/sessions/{session.pk}/events?page_size=1000")
        out += api_get_all(api, f"/api/v1/sessions/{session.pk}/memory")
        out += api_get_all(api, f"/api/v1/sessions/{session.pk}/export")
    for agent in Agent.objects.all():
        out += api_get_all(api, f"/api/v1/agents/{agent.pk}/pins?all=1")
    return out


# --- what each endpoint is sent ---------------------------------------------------------------


# Every event of this module is timed from one moment, so their order never depends on
# when the module was imported or the test ran.
_BASE = timezone.now() - timedelta(hours=2)


def _time(n: int) -> str:
    return (_BASE + timedelta(seconds=n)).isoformat()


def events_api_batches(text: str, i: int) -> list[dict[str, Any]]:
    """/api/v1/events: the text as a prompt's text, inside a tool use's payload, and as a
    turn's final message and reasoning."""
    base = {"agent_id": "canonical-agent", "session_id": "canonical-session"}
    return [
        {
            **base,
            "event_id": f"ev-{i}-text",
            "kind": "prompt",
            "text": text,
            "occurred_at": _time(3 * i + 1),
        },
        {
            **base,
            "event_id": f"ev-{i}-payload",
            "kind": "tool_use",
            "phase": "post",
            "tool_name": "Bash",
            "occurred_at": _time(3 * i + 2),
            "payload": {"input": {"command": text}, "output": {"stdout": text}, "note": text},
        },
        {
            **base,
            "event_id": f"ev-{i}-turn",
            "kind": "turn_end",
            "final_message": text,
            "reasoning": text,
            "occurred_at": _time(3 * i + 3),
        },
    ]


CC_SESSION = "5d0c6f3e-2f8a-4a5e-9d59-1f3b7d3c0a11"
CC_BASE = {
    "session_id": CC_SESSION,
    "transcript_path": f"/home/dev/.claude/projects/x/{CC_SESSION}.jsonl",
    "cwd": "/home/dev/src/secret-corpus",
    "permission_mode": "default",
}


def claude_code_batches(text: str, i: int) -> list[dict[str, Any]]:
    """/api/v1/hooks/claude-code: the text as a prompt, a Bash command (before and after
    the call) and the assistant's last message (also sent as the reasoning tail)."""

    def line(n: int, hook: str, **fields: Any) -> dict[str, Any]:
        extra = {"event_id": f"cc-{i}-{n}", "occurred_at": _time(4 * i + n)}
        extra.update(fields.pop("sessionhub", {}))
        return {**CC_BASE, "hook_event_name": hook, **fields, "sessionhub": extra}

    tool = {"tool_name": "Bash", "tool_input": {"command": text, "description": "run it"}}
    return [
        line(1, "UserPromptSubmit", prompt=text),
        line(2, "PreToolUse", tool_use_id=f"toolu_{i}", **tool),
        line(
            3,
            "PostToolUse",
            tool_use_id=f"toolu_{i}",
            tool_response={"stdout": "ok", "stderr": ""},
            **tool,
        ),
        line(
            4,
            "Stop",
            stop_hook_active=False,
            last_assistant_message=text,
            sessionhub={"final_message": text, "reasoning_tail": text},
        ),
    ]


OC_SESSION = "0b7e2c54-6a1d-4d0e-8f7a-3c2b1a0f9e88"
OC_KEY = "vault:discord:channel:1234567890"
OC_CTX = {
    "agentId": "vault",
    "sessionId": OC_SESSION,
    "sessionKey": OC_KEY,
    "workspaceDir": "/home/claw/.openclaw/workspace-vault",
    "channelId": "discord",
}


def _ms(n: int) -> int:
    return int((_BASE + timedelta(seconds=n)).timestamp() * 1000)


def openclaw_batches(text: str, i: int) -> list[dict[str, Any]]:
    """/api/v1/hooks/openclaw: the text as a received message, the params of a tool call
    and the messages of an agent_end (thinking and answer)."""
    return [
        {
            "hook": "message_received",
            "eventId": f"oc-{i}-msg",
            "event": {"from": "discord:user:1", "content": text},
            "ctx": {"channelId": "discord", "conversationId": OC_KEY},
            "ts": _ms(3 * i + 1),
        },
        {
            "hook": "after_tool_call",
            "eventId": f"oc-{i}-tool",
            "event": {"toolName": "exec", "params": {"command": text}, "result": "ok"},
            "ctx": OC_CTX,
            "ts": _ms(3 * i + 2),
        },
        {
            "hook": "agent_end",
            "eventId": f"oc-{i}-end",
            "event": {
                "messages": [
                    {"role": "user", "content": text},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "thinking", "thinking": text},
                            {"type": "text", "text": text},
                        ],
                    },
                ],
                "success": True,
            },
            "ctx": OC_CTX,
            "ts": _ms(3 * i + 3),
        },
    ]


ENDPOINTS = {
    "events": (
        "events",
        {
            "event_id": "ev-start",
            "kind": "session_start",
            "agent_id": "canonical-agent",
            "session_id": "canonical-session",
            "cwd": "/srv/canonical",
            "occurred_at": _time(0),
        },
        events_api_batches,
        {
            "event_id": "ev-end",
            "kind": "session_end",
            "agent_id": "canonical-agent",
            "session_id": "canonical-session",
            "reason": "new",
            "occurred_at": _time(1000),
        },
    ),
    "claude-code": (
        "hooks/claude-code",
        {
            **CC_BASE,
            "hook_event_name": "SessionStart",
            "source": "startup",
            "sessionhub": {"event_id": "cc-start", "occurred_at": _time(0)},
        },
        claude_code_batches,
        {
            **CC_BASE,
            "hook_event_name": "SessionEnd",
            "reason": "prompt_input_exit",
            "sessionhub": {"event_id": "cc-end", "occurred_at": _time(1000)},
        },
    ),
    "openclaw": (
        "hooks/openclaw",
        {
            "hook": "session_start",
            "eventId": "oc-start",
            "event": {"sessionId": OC_SESSION, "sessionKey": OC_KEY},
            "ctx": OC_CTX,
            "ts": _ms(0),
        },
        openclaw_batches,
        {
            "hook": "session_end",
            "eventId": "oc-end",
            "event": {"sessionId": OC_SESSION, "sessionKey": OC_KEY, "reason": "new"},
            "ctx": OC_CTX,
            "ts": _ms(1000),
        },
    ),
}
CASE_EVENT_PREFIX = {"events": "ev-{i}-", "claude-code": "cc-{i}-", "openclaw": "oc-{i}-"}


@pytest.mark.django_db
def test_secret_corpus_through_every_ingest_endpoint(
    api: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    def post(path: str, body: Any) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            response = api.post(f"/api/v1/{path}", body, format="json")
        assert response.status_code == 200, response.content
        results = response.json()["results"]
        assert {r["status"] for r in results} == {"accepted"}, results

    for path, start, batches, end in ENDPOINTS.values():
        post(path, start)
        for i, case in enumerate(CASES):
            post(path, batches(case["text"], i))
        post(path, end)

    # Pins: each text pinned as content, never more than the cap active at once.
    agent = Agent.objects.get(external_id="canonical-agent")
    pin_ids: list[int] = []
    for i, case in enumerate(CASES):
        if len(pin_ids) == 10:
            assert api.delete(f"/api/v1/pins/{pin_ids.pop(0)}").status_code == 200
        response = api.post(
            f"/api/v1/agents/{agent.pk}/pins",
            {"label": f"case {i}", "content": case["text"]},
            format="json",
        )
        assert response.status_code == 201, response.content
        pin_ids.append(response.json()["id"])

    sessions = list(Session.objects.order_by("source"))
    assert len(sessions) == 3
    for session in sessions:  # features again, now with the pins
        pipeline.session_process(str(session.pk))
        assert Summary.objects.filter(session=session).exists()
        assert SessionFeatures.objects.filter(session=session).exists()
        assert StreamTail.objects.filter(session=session).count() == len(CASES)
        assert Observation.objects.filter(session=session).count() == len(CASES)
    assert Pin.objects.count() == len(CASES)

    # Not one secret anywhere in the database...
    secrets = [s for case in CASES for s in case["secrets"]]
    assert secrets
    leaks = find_in_database(secrets)
    assert not leaks, "secrets stored:\n" + "\n".join(leaks[:60])

    # ...nor in what the API serves.
    served = [t for page in api_output(api, sessions) for t in strings_in(page)]
    leaked = sorted({s for s in secrets for t in served if s in t})
    assert not leaked, f"secrets served by the API: {leaked}"

    # Every keep string survives in the stored events of its case, and in the API's.
    events_by_id = {
        e.event_id: "\n".join(strings_in([e.facts, e.payload]))
        for e in LifecycleEvent.objects.all()
    }
    served_events: dict[str, str] = {}
    for session in sessions:
        for page in api_get_all(api, f"/api/v1/sessions/{session.pk}/events?page_size=1000"):
            for row in page["results"]:
                served_events[row["event_id"]] = "\n".join(
                    strings_in([row["facts"], row["payload"]])
                )
    pins_by_label = {p.label: p.content for p in Pin.objects.all()}
    missing = []
    for i, case in enumerate(CASES):
        for endpoint, prefix in CASE_EVENT_PREFIX.items():
            prefix = prefix.format(i=i)
            stored = [t for eid, t in events_by_id.items() if eid.startswith(prefix)]
            shown = [t for eid, t in served_events.items() if eid.startswith(prefix)]
            assert stored and len(stored) == len(shown)
            for keep in case["keep"]:
                if not all(keep in t for t in stored):
                    missing.append(f"case {i} via {endpoint}: {keep!r} not stored")
                if not all(keep in t for t in shown):
                    missing.append(f"case {i} via {endpoint}: {keep!r} not served")
        for keep in case["keep"]:
            if keep not in pins_by_label[f"case {i}"]:
                missing.append(f"case {i} pinned: {keep!r} lost")
    assert not missing, "\n".join(missing)


# --- the secrets fixture session, over HTTP -------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_claude_code_secrets_fixture_leaves_no_aws_key(live_server: Any, token: str) -> None:
    lines = claude_code_as_sent("secrets")
    planted = sorted(set(AWS_KEY_ID.findall(json.dumps(lines))))
    assert planted == ["AKIAN9YAT71DNVPUM7HS"]
    for line in lines:
        response = requests.post(
            f"{live_server.url}/api/v1/hooks/claude-code",
            json=line,
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        assert response.json()["results"][0]["status"] == "accepted"

    session = Session.objects.get(external_id=lines[0]["session_id"])
    assert Summary.objects.filter(session=session).exists()  # the pipeline ran
    bash = [o for o in Observation.objects.filter(session=session) if "aws s3" in o.input_digest]
    assert len(bash) == 1
    assert "[REDACTED:" in bash[0].input_digest
    assert "aws s3 ls s3://storefront-media/products/" in bash[0].input_digest

    everywhere = [
        f"{table}: {text[:160]!r}"
        for table, row in database_rows()
        for text in strings_in(row)
        if AWS_KEY_ID.search(text)
    ]
    assert not everywhere, "AWS key stored:\n" + "\n".join(everywhere)
