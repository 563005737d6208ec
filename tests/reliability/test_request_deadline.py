"""The request deadline: the web server as deployed (``python -m sessionhub.serve``)
gives each database statement of a request ``DB_STATEMENT_TIMEOUT`` seconds. A request
stuck behind a lock that another connection holds answers 503 with ``Retry-After`` once
that time is up, instead of holding its thread for as long as the lock is held; nothing
of it is stored, the same request succeeds once the lock is gone, and the server keeps
answering others meanwhile."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests

from lifecycle.models import LifecycleEvent, Session
from sessionhub.models import Team

from .helpers import (
    current_database_url,
    redis_server,
    service_env,
    stop_process,
    web_as_deployed,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("real_services"),
]

DEADLINE = 0.5
SESSION = "3f6f1c2e-7d51-4a0b-9a57-deadline0001"


@pytest.fixture
def web(tmp_path: Path) -> Iterator[str]:
    with redis_server() as redis:
        env = service_env(
            DATABASE_URL=current_database_url(),
            REDIS_URL=redis.url,
            DB_STATEMENT_TIMEOUT=str(DEADLINE),
        )
        process, port = web_as_deployed(env, tmp_path / "web.log", workers=1)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            stop_process(process)


def _hook(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "session_id": SESSION,
        "transcript_path": f"/home/dev/.claude/projects/deadline/{SESSION}.jsonl",
        "cwd": "/home/dev/src/deadline",
        "permission_mode": "default",
        "hook_event_name": name,
        **fields,
    }


def _tool_use(n: int) -> dict[str, Any]:
    return _hook(
        "PostToolUse",
        tool_name="Bash",
        tool_input={"command": f"sleep {n}"},
        tool_response={"stdout": "done", "stderr": ""},
        tool_use_id=f"toolu_deadline_{n}",
    )


def _held_session_lock() -> psycopg.Connection[Any]:
    """Another connection holding the session's row lock, as a long transaction would."""
    holder = psycopg.connect(current_database_url())
    found = holder.execute(
        "SELECT id FROM lifecycle_session WHERE external_id = %s FOR UPDATE", [SESSION]
    ).fetchone()
    assert found is not None
    return holder


def test_a_request_stuck_on_a_lock_answers_503_at_the_deadline_and_stores_nothing(
    team: Team, token: str, web: str
) -> None:
    http = requests.Session()
    http.headers["Authorization"] = f"Bearer {token}"
    hooks = web + "/api/v1/hooks/claude-code"
    assert http.post(hooks, json=_hook("SessionStart", source="startup"), timeout=10).ok

    holder = _held_session_lock()
    try:
        with ThreadPoolExecutor(2) as pool:
            # A lone tool event (the one-statement path) and a batch (the general path's
            # transaction) both wait on the lock.
            started = time.monotonic()
            lone = pool.submit(http.post, hooks, json=_tool_use(1), timeout=30)
            batch = pool.submit(http.post, hooks, json=[_tool_use(2), _tool_use(3)], timeout=30)
            answers = [lone.result(), batch.result()]
            waited = time.monotonic() - started
            # Meanwhile the server answers what does not need the lock.
            assert http.get(web + "/api/v1/whoami", timeout=10).status_code == 200
        for answer in answers:
            assert answer.status_code == 503, answer.text
            assert answer.json()["code"] == "database_timeout"
            assert int(answer.headers["Retry-After"]) >= 1
        assert waited < 10 * DEADLINE + 5, waited  # not as long as the lock was held
        assert (
            not LifecycleEvent.objects.filter(session__external_id=SESSION)
            .exclude(hook="SessionStart")
            .exists()
        )
    finally:
        holder.rollback()
        holder.close()

    # The lock gone, the client's retry of each stores it once.
    assert http.post(hooks, json=_tool_use(1), timeout=10).json()["accepted"] == 1
    assert http.post(hooks, json=[_tool_use(2), _tool_use(3)], timeout=10).json()["accepted"] == 2
    session = Session.objects.get(external_id=SESSION)
    assert session.tool_use_count == 3
    assert session.event_count == 4
