"""Embedded mode has no Celery beat: the ingest path runs the crash sweep itself, at most
once a minute per process, and never when a broker (and so beat) is configured."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from lifecycle import services
from lifecycle.models import EventKind, Session, SessionStatus
from tests.conftest import claude_code_hooks

pytestmark = pytest.mark.django_db(transaction=True)


def start(api: APIClient, session_id: str, hours_ago: float) -> None:
    line = dict(claude_code_hooks("crash")[0], session_id=session_id)
    line["sessionhub"] = {
        "event_id": f"{session_id}-start",
        "occurred_at": (timezone.now() - timedelta(hours=hours_ago)).isoformat(),
    }
    response = api.post("/api/v1/hooks/claude-code", line, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["results"][0]["status"] == "accepted"


def status(session_id: str) -> str:
    return Session.objects.get(external_id=session_id).status


@override_settings(REDIS_URL="", CELERY_TASK_ALWAYS_EAGER=True)
def test_ingest_runs_the_sweep_once_a_minute(api: APIClient, monkeypatch: Any) -> None:
    start(api, "silent", hours_ago=6)  # past the four-hour crash horizon
    assert status("silent") == SessionStatus.ACTIVE  # the minute began with the test

    monkeypatch.setattr(services, "_last_housekeeping", 0.0)  # the minute is over
    start(api, "busy", hours_ago=0)
    assert status("silent") == SessionStatus.CRASHED
    assert status("busy") == SessionStatus.ACTIVE
    end = Session.objects.get(external_id="silent").events.get(kind=EventKind.SESSION_END)
    assert end.source == "sessionhub"

    # Within the same minute the sweep does not run again.
    start(api, "silent-too", hours_ago=6)
    start(api, "busy-too", hours_ago=0)
    assert status("silent-too") == SessionStatus.ACTIVE


def test_with_a_broker_beat_runs_the_sweep_not_ingest(api: APIClient, monkeypatch: Any) -> None:
    start(api, "silent", hours_ago=6)
    monkeypatch.setattr(services, "_last_housekeeping", 0.0)
    # Only the setting is read: nothing is sent to that Redis.
    with override_settings(REDIS_URL="redis://127.0.0.1:6379/15", CELERY_TASK_ALWAYS_EAGER=True):
        services.embedded_housekeeping(timezone.now())
    assert status("silent") == SessionStatus.ACTIVE
