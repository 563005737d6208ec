"""Logs without secrets (issue 33): a secrets run through the stack as docker-compose
runs it (nginx, the web server with its access log on, a Celery worker, PostgreSQL, a private
Redis), then every log each process wrote is searched for every secret.

The run posts the secrets corpus through the hook endpoint (each text a prompt, in
sessions that end and get summarized), asks for sessions with secrets in the query
string (``?session_key=ghp_...``, ``?project=...``), searches the dashboard with one, and
posts bodies that fail validation with secrets inside. No 12-character piece of any
secret, in any letter case, may be in nginx's, the web server's or the worker's output.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import requests

from lifecycle.models import Session
from memory.models import Summary
from sessionhub.services import api_token_create, team_get_or_create
from tests.conftest import claude_code_hooks, secret_cases

from .helpers import (
    Nginx,
    current_database_url,
    redis_server,
    service_env,
    stop_process,
    wait_until,
    web_as_deployed,
)
from .test_faults import celery_worker

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("real_services"),
]

PIECE = 12


@pytest.fixture
def logged_stack(tmp_path: Path) -> Iterator[dict[str, Any]]:
    with redis_server() as redis:
        env = service_env(
            DATABASE_URL=current_database_url(),
            REDIS_URL=redis.url,
            SESSIONHUB_ACCESS_LOG="-",
            LOG_LEVEL="INFO",
        )
        logs = {name: tmp_path / f"{name}.log" for name in ("web", "nginx", "worker")}
        with ExitStack() as started:  # whatever started is stopped, whatever failed after
            web, web_port = web_as_deployed(env, logs["web"], workers=2)
            started.callback(stop_process, web)
            worker = celery_worker(env, logs["worker"])
            started.callback(stop_process, worker)
            front = Nginx(web_port, logs["nginx"])
            started.callback(front.close)
            front.start()
            yield {"url": front.url, "logs": logs}


def pieces(secret: str) -> set[str]:
    lowered = secret.lower()
    if len(lowered) < PIECE:
        return {lowered}
    return {lowered[i : i + PIECE] for i in range(len(lowered) - PIECE + 1)}


def test_no_secret_in_any_log_after_a_secrets_run(logged_stack: dict[str, Any]) -> None:
    url = logged_stack["url"]
    team = team_get_or_create(slug="acme", name="Acme")
    _, token = api_token_create(team=team, name="gw", scopes=["ingest", "read"])
    cases = [case for case in secret_cases() if case["secrets"]]
    secrets = sorted({s for case in cases for s in case["secrets"]} | {token})
    base = claude_code_hooks("basic")
    start, prompt, end = base[0], base[1], base[-1]
    http = requests.Session()
    http.headers["Authorization"] = f"Bearer {token}"
    sessions = 4
    for n in range(sessions):
        sid = f"logs-{n}-{start['session_id'][7:]}"
        batch = [{**start, "session_id": sid}]
        for i, case in enumerate(cases[n::sessions]):
            batch.append(
                {
                    **prompt,
                    "session_id": sid,
                    "prompt": case["text"],
                    "sessionhub": {"event_id": f"logs-{n}-{i}"},
                }
            )
        batch.append({**end, "session_id": sid})
        response = http.post(url + "/api/v1/hooks/claude-code", json=batch, timeout=60)
        assert response.status_code == 200, response.text[:500]
        assert response.json()["accepted"] == len(batch), response.text[:2000]
    for case in cases[:20]:
        secret = case["secrets"][0]
        quoted = urllib.parse.quote(secret, safe="")
        for path in (
            f"/api/v1/sessions?session_key={quoted}",
            f"/api/v1/sessions?project={quoted}&token={urllib.parse.quote(token)}",
            f"/dashboard/?q={quoted}",
            f"/api/v1/sessions/{quoted}",
        ):
            http.get(url + path, timeout=30, allow_redirects=False)
        bad = http.post(url + "/api/v1/events", json={"event_id": secret}, timeout=30)
        assert bad.status_code in (200, 400), bad.text[:300]
        http.post(
            url + "/api/v1/events",
            data=b'{"kind": "prompt", "text": "' + case["text"].encode() + b'"',  # cut JSON
            headers={"Content-Type": "application/json"},
            timeout=30,
        )
    wait_until(lambda: Summary.objects.filter(team=team).count() >= sessions, 120, 0.5)
    assert Session.objects.filter(team=team).count() == sessions

    logs = logged_stack["logs"]
    assert "GET /api/v1/sessions" in logs["web"].read_text()  # the access log is on
    found = []
    for name, path in logs.items():
        for line in path.read_text(errors="replace").splitlines():
            lowered = line.lower()
            found += [
                f"{name}: {secret[:6]}... in {line[:200]!r}"
                for secret in secrets
                if any(piece in lowered for piece in pieces(secret))
            ]
    assert found == [], "\n".join(found[:20])
