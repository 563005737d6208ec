"""Fixtures shared by the reliability tests."""

from __future__ import annotations

import pytest

from .helpers import needs_postgres_and_redis


@pytest.fixture
def real_services() -> None:
    """Skip, saying loudly why, where PostgreSQL, Redis or redis-server is missing: the
    tests that use it start real processes against them."""
    reason = needs_postgres_and_redis()
    if reason:
        pytest.skip(reason)
