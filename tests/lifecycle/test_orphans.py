"""Events that name only a session key (an OpenClaw command before its session is known)
wait as orphans and are adopted by the session that later starts with that key."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from lifecycle.models import LifecycleEvent, Session

pytestmark = pytest.mark.django_db

TS = 1795313897000


def _hook(hook: str, ts: int, session_id: str | None, key: str, **event: Any) -> dict[str, Any]:
    ctx: dict[str, Any] = {"agentId": "research", "sessionKey": key}
    if session_id:
        ctx["sessionId"] = session_id
        event.setdefault("sessionId", session_id)
    return {"hook": hook, "event": event, "ctx": ctx, "ts": ts}


def _post(api: Any, bodies: list[dict[str, Any]]) -> dict[str, Any]:
    response = api.post("/api/v1/hooks/openclaw", bodies, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_events_before_the_session_are_adopted_by_it(api: Any) -> None:
    keys = [f"research:discord:channel:{n}" for n in range(3)]
    # Orphans for the first two keys only, before any session has them.
    _post(api, [_hook("command:reset", TS + n, None, key) for n, key in enumerate(keys[:2])])
    assert LifecycleEvent.objects.filter(session__isnull=True).count() == 2

    starts = [_hook("session_start", TS + 1000 + n, f"sid-{n}", key) for n, key in enumerate(keys)]
    _post(api, starts)

    assert not LifecycleEvent.objects.filter(session__isnull=True).exists()
    for n, key in enumerate(keys):
        session = Session.objects.get(external_id=f"sid-{n}", session_key=key)
        events = LifecycleEvent.objects.filter(session=session)
        assert events.count() == (2 if n < 2 else 1)
        assert session.event_count == events.count()
        assert not events.exclude(orphan_key="").exists()


def test_adoption_costs_the_same_for_one_and_for_many_new_sessions(api: Any) -> None:
    def starts(prefix: str, count: int) -> list[dict[str, Any]]:
        return [
            _hook("session_start", TS + n, f"{prefix}-{n}", f"{prefix}:key:{n}")
            for n in range(count)
        ]

    _post(api, starts("warm", 1))
    counts = []
    for prefix, size in (("one", 1), ("ten", 10)):
        with CaptureQueriesContext(connection) as queries:
            _post(api, starts(prefix, size))
        # The event INSERT names the column too; the adoption is what reads or moves it.
        counts.append(
            sum(
                "orphan_key" in q["sql"] and not q["sql"].startswith("INSERT")
                for q in queries.captured_queries
            )
        )
    assert counts[0] == counts[1] == 1, counts  # one read, no UPDATE: nothing to adopt
