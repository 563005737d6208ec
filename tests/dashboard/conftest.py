"""Dashboard fixtures: members of two teams, logged-in clients, and the browser marker."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from sessionhub.models import Team
from tests.factories import MembershipFactory, UserFactory


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "browser: drives Debian's Chromium through Playwright (skipped without it)"
    )


@pytest.fixture
def member(team: Team) -> Any:
    """A member of ``acme``."""
    return MembershipFactory(team=team, user=UserFactory(username="alice")).user


@pytest.fixture
def stranger_user(other_team: Team) -> Any:
    """A member of ``globex`` only."""
    return MembershipFactory(team=other_team, user=UserFactory(username="mallory")).user


@pytest.fixture
def member_client(member: Any) -> Client:
    client = Client()
    client.force_login(member)
    return client


@pytest.fixture
def stranger_client(stranger_user: Any) -> Client:
    client = Client()
    client.force_login(stranger_user)
    return client
