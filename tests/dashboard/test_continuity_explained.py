"""The session page explains a preamble's choice: each candidate's score parts, the
relevance of the first prompt and the terms it matched (issue 12, item 4)."""

from __future__ import annotations

from django.test import Client
from django.urls import reverse

from sessionhub.models import Team
from tests.factories import AgentFactory, ContinuityRecordFactory, SessionFactory


def test_score_parts_and_matched_terms_are_shown(member_client: Client, team: Team) -> None:
    agent = AgentFactory(team=team)
    old = SessionFactory(agent=agent, external_id="old-websocket")
    new = SessionFactory(agent=agent, external_id="new-one")
    ContinuityRecordFactory(
        session=new,
        stage="prompt",
        candidates=[
            {
                "session_id": str(old.pk),
                "external_id": "old-websocket",
                "score": 0.71,
                "recency": 0.14,
                "topic_overlap": 0.2,
                "pending": 0.0,
                "relevance": 0.92,
                "matched_terms": ["websocket", "backoff"],
                "pending_finished_later": 2,
                "parts": {"recency": 0.06, "topics": 0.07, "pending": 0.0, "relevance": 0.55},
                "used": True,
            }
        ],
    )
    body = member_client.get(reverse("dashboard:session", args=[new.pk])).content.decode()
    assert "first prompt" in body
    assert "0.92" in body  # the relevance column
    assert "0.55 relevance" in body and "matched websocket, backoff" in body
    assert "2 finished later, not counted" in body
