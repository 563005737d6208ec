"""A fast subset of the memory-quality benchmark (``bench/memory_quality.py``): the corpus's
sessions of four projects replayed through the hook client, as Claude Code fired the
hooks, into this test's database, then judged against their ground truth with the
benchmark's own targets."""

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

_PATH = Path(__file__).resolve().parents[2] / "bench" / "memory_quality.py"
_SPEC = importlib.util.spec_from_file_location("memory_quality", _PATH)
assert _SPEC and _SPEC.loader
quality = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = quality  # dataclasses look their module up by name
_SPEC.loader.exec_module(quality)

# Whole projects (continuity reads a project's earlier sessions), and two sessions that
# stand alone: the background subagent and the 10 KB report.
PROJECTS = {"billing-api", "mobile-app", "legacy-crm"}
ALSO = {"in-02", "dp-01"}


def test_the_fast_subset_meets_the_targets(team: Team) -> None:
    corpus = quality.load_corpus()
    names = {n for n, t in corpus.truth.items() if t["project"] in PROJECTS} | ALSO
    subset = corpus.only(names)
    token = api_token_create(team=team, name="corpus-token", scopes=["ingest", "read"])[1]
    client = APIClient()

    def post(path: str, body: bytes, token: str) -> tuple[int, Any]:
        response = client.post(
            path, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
        )
        return response.status_code, response.json()

    result = quality.replay_and_evaluate(subset, post, token)

    # Every kind of case is in the subset, and judged.
    assert len(subset.truth) >= 25
    assert result.tasks_truth >= 10 and result.unfinished >= 6 and result.links_expected >= 3
    assert result.prompt_total >= 15 and result.preambles >= 20
    assert result.meets_targets() == [], quality.details(result)
    assert result.outcome_right == result.outcome_total, quality.details(result)
    assert not result.turns_wrong and not result.end_lost and not result.log_in_asked
    assert not result.key_topics_features, result.key_topics_features
