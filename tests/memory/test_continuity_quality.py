"""A fast subset of the continuity-quality benchmark (``bench/continuity_quality.py``):
the same scenarios, built through the public API and asked as each gateway's client asks,
must pick the expected source, say every required fact and leak nothing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from sessionhub.models import Team
from sessionhub.services import api_token_create

pytestmark = pytest.mark.django_db(transaction=True)

_PATH = Path(__file__).resolve().parents[2] / "bench" / "continuity_quality.py"
_SPEC = importlib.util.spec_from_file_location("continuity_quality", _PATH)
assert _SPEC and _SPEC.loader
quality = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = quality  # dataclasses look their module up by name
_SPEC.loader.exec_module(quality)

SUBSET = {
    "pending-simple",
    "old-relevant-beats-fresh",
    "finished-in-a-later-session",
    "finished-in-the-same-session",
    "two-projects",
    "cold-start-in-a-new-project",
    "other-team-same-project",
    "secrets-in-the-prior-session",
    "pending-pin-survives-the-end",
}
LEAKS = ("project", "team", "secret", "finished")


def test_the_fast_subset(team: Team, other_team: Team) -> None:
    tokens = {
        "A": api_token_create(team=team, name="first-token", scopes=["ingest", "read"])[1],
        "B": api_token_create(team=other_team, name="second-token", scopes=["ingest", "read"])[1],
    }
    client = APIClient()

    def post(path: str, body: Any, token: str) -> tuple[int, Any, float]:
        response = client.post(path, body, format="json", HTTP_AUTHORIZATION=f"Bearer {token}")
        return response.status_code, response.json(), 0.0

    def get(path: str, which: str) -> tuple[int, Any, float]:
        response = client.get(path, HTTP_AUTHORIZATION=f"Bearer {tokens[which]}")
        return response.status_code, response.json(), 0.0

    outcomes = quality.run_all(post, get, tokens, SUBSET)
    assert {o.slug for o in outcomes} == SUBSET
    assert len(outcomes) == 3 * len(SUBSET)
    wrong = [
        (o.channel, o.slug, o.top, o.expected, o.leaks, o.must_found, o.must_total)
        for o in outcomes
        if o.top != o.expected
        or o.must_found < o.must_total
        or any(o.leaks.get(c) for c in LEAKS)
        or any(t > quality.TOKEN_LIMIT for t in o.preamble_tokens)
    ]
    assert wrong == [], "\n".join(map(str, wrong))
    table = quality.table(outcomes)
    assert "| all | 27 | 1.00 (27/27) | 1.00" in table, table
