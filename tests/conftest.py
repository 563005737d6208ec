"""Shared fixtures: teams and tokens for owner / stranger questions, API clients, the
gateway fixtures of tests/fixtures/, and a header that says which backends ran."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.cache import cache
from rest_framework.test import APIClient

from sessionhub.models import ApiToken, Team
from sessionhub.services import api_token_create, team_get_or_create

REPO = Path(__file__).resolve().parent.parent
# The gateway fixtures (written by tests/fixtures/build.py; see tests/fixtures/README.md).
FIXTURES = REPO / "tests" / "fixtures"

CLAUDE_CODE_SCENARIOS = ["basic", "clear", "compact", "crash", "secrets"]
OPENCLAW_SCENARIOS = ["basic", "compact", "idle", "reset", "restart"]


def pytest_report_header(config: pytest.Config) -> list[str]:
    from sessionhub import settings_test

    db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    lines = [f"sessionhub: database={db} broker={'redis' if settings.REDIS_URL else 'none'}"]
    for warning in settings_test.FALLBACKS:
        lines.append(f"!!! FALLBACK: {warning} !!!")
    return lines


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def secret_cases(per_kind: int = 2) -> list[dict[str, Any]]:
    """The rows of ``secrets.jsonl`` that the end-to-end tests post: every key-format row
    and every kept value, plus the first ``per_kind`` rows of each kind typed with its
    context (the redaction tests and bench/redaction.py go through all of them). Rows of
    kind ``identifier`` are secrets only where an identifier is expected, and are left to
    the identifier tests."""
    chosen: list[dict[str, Any]] = []
    taken: dict[str, int] = {}
    for case in read_jsonl(FIXTURES / "secrets.jsonl"):
        kind = case["kind"]
        if kind == "identifier":
            continue
        if kind in ("format", "keep_value") or taken.get(kind, 0) < per_kind:
            chosen.append(case)
            taken[kind] = taken.get(kind, 0) + 1
    return chosen


def claude_code_hooks(scenario: str) -> list[dict[str, Any]]:
    return read_jsonl(FIXTURES / "claude-code" / scenario / "hooks.jsonl")


def openclaw_hooks(scenario: str) -> list[dict[str, Any]]:
    return read_jsonl(FIXTURES / "openclaw" / f"{scenario}.jsonl")


@pytest.fixture(autouse=True)
def _clear_cache() -> Iterator[None]:
    # Only the in-memory cache: clearing Redis would flush the database that other
    # test runs' Celery queues live in. On Redis each run has its own key prefix.
    if settings.CACHES["default"]["BACKEND"].endswith("LocMemCache"):
        cache.clear()
    yield


@pytest.fixture(autouse=True)
def _no_embedded_sweep_mid_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """Embedded mode runs the crash sweep from the ingest path, at most once a minute by
    the wall clock and per process. Tests stamp their events hours or days ago, so when
    that minute fell inside one, the session it was replaying was closed as crashed part
    way (an export held one event more than was sent; a shuffled replay ended otherwise).
    Each test starts the minute afresh; test_embedded_sweep.py runs the sweep on purpose."""
    from lifecycle import services

    monkeypatch.setattr(services, "_last_housekeeping", time.time())


@pytest.fixture
def team(db: Any) -> Team:
    return team_get_or_create(slug="acme", name="Acme")


@pytest.fixture
def other_team(db: Any) -> Team:
    return team_get_or_create(slug="globex", name="Globex")


@pytest.fixture
def make_token(db: Any) -> Callable[..., tuple[ApiToken, str]]:
    def make(team: Team, scopes: tuple[str, ...] = ("ingest", "read"), **kw: Any):
        return api_token_create(
            team=team, name=kw.pop("name", f"{team.slug}-gw"), scopes=scopes, **kw
        )

    return make


@pytest.fixture
def token(team: Team, make_token: Callable[..., tuple[ApiToken, str]]) -> str:
    return make_token(team)[1]


@pytest.fixture
def client_for(db: Any) -> Callable[[str], APIClient]:
    def make(raw: str) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        return client

    return make


@pytest.fixture
def api(token: str, client_for: Callable[[str], APIClient]) -> APIClient:
    """An API client of the ``acme`` team with ingest and read scopes."""
    return client_for(token)


@pytest.fixture
def stranger(
    other_team: Team,
    make_token: Callable[..., tuple[ApiToken, str]],
    client_for: Callable[[str], APIClient],
) -> APIClient:
    """An API client of another team."""
    return client_for(make_token(other_team)[1])
