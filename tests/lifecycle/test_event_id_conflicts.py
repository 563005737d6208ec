"""One event id several times in one batch: identical repeats are duplicates, repeats
with a different body are refused as conflicts (the first is stored), never silently
taken as duplicates."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from lifecycle.models import LifecycleEvent

pytestmark = pytest.mark.django_db


def prompt(text: str, at: str = "2026-11-20T10:00:00Z", event_id: str = "e-1") -> dict[str, Any]:
    return {
        "event_id": event_id,
        "kind": "prompt",
        "occurred_at": at,
        "agent_id": "research",
        "session_id": "s-1",
        "text": text,
    }


def test_same_id_with_different_bodies_is_a_conflict(api: APIClient) -> None:
    batch = [prompt("first"), prompt("second"), prompt("third")]
    response = api.post("/api/v1/events", batch, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["accepted"], body["duplicates"], body["rejected"]) == (1, 0, 2)
    assert body["results"][0]["status"] == "accepted"
    for result in body["results"][1:]:
        assert result["status"] == "rejected"
        assert result["code"] == "event_id_conflict"
        assert result["field"] == "event_id"
        assert result["event_id"] == "e-1"
        assert "session_id" not in result
    stored = LifecycleEvent.objects.get(event_id="e-1")
    assert stored.facts["text"] == "first"


def test_the_first_in_the_batch_wins_whatever_the_times(api: APIClient) -> None:
    batch = [prompt("late", at="2026-11-20T10:00:05Z"), prompt("early", at="2026-11-20T10:00:00Z")]
    body = api.post("/api/v1/events", batch, format="json").json()
    assert [r["status"] for r in body["results"]] == ["accepted", "rejected"]
    stored = LifecycleEvent.objects.get(event_id="e-1")
    assert stored.occurred_at.second == 5


def test_identical_repeats_stay_duplicates(api: APIClient) -> None:
    batch = [prompt("same"), prompt("same"), prompt("other", event_id="e-2"), prompt("same")]
    body = api.post("/api/v1/events", batch, format="json").json()
    assert [r["status"] for r in body["results"]] == [
        "accepted",
        "duplicate",
        "accepted",
        "duplicate",
    ]
    assert LifecycleEvent.objects.count() == 2


def test_identical_and_different_repeats_together(api: APIClient) -> None:
    batch = [prompt("a"), prompt("a"), prompt("b"), prompt("a")]
    body = api.post("/api/v1/events", batch, format="json").json()
    assert [r["status"] for r in body["results"]] == [
        "accepted",
        "duplicate",
        "rejected",
        "duplicate",
    ]
    assert LifecycleEvent.objects.count() == 1
