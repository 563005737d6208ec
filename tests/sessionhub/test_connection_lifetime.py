"""Kept database connections expire one by one: each is given its own lifetime within
``CONN_MAX_AGE`` as it opens, so a web process's threads do not all reconnect in the
same second (``sessionhub/db/lifetime.py``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connections

from sessionhub.db.lifetime import SHORTEST_SHARE

pytestmark = pytest.mark.django_db


@contextmanager
def _opened(max_age: int | None) -> Iterator[Any]:
    """A connection of its own (not the test's), opened with this CONN_MAX_AGE."""
    wrapper = connections.create_connection("default")
    wrapper.settings_dict["CONN_MAX_AGE"] = max_age
    wrapper.connect()
    try:
        yield wrapper
    finally:
        wrapper.close()


def test_each_kept_connection_gets_its_own_lifetime_within_the_max_age() -> None:
    lifetimes = []
    for _ in range(30):
        with _opened(60) as wrapper:
            lifetimes.append(wrapper.close_at - time.monotonic())
    assert all(60 * SHORTEST_SHARE - 1 <= left <= 60 for left in lifetimes), lifetimes
    # Thirty connections opened together no longer expire together: spread over the
    # half-period (a range under 10 s of 30 s has a chance below 1 in 10^12).
    assert max(lifetimes) - min(lifetimes) > 10, lifetimes


@pytest.mark.parametrize("max_age", [0, None])
def test_a_connection_per_request_and_a_connection_for_life_are_left_alone(
    max_age: int | None,
) -> None:
    with _opened(max_age) as wrapper:
        if max_age is None:
            assert wrapper.close_at is None
        else:
            assert wrapper.close_at <= time.monotonic()


def test_django_closes_the_connection_at_the_lifetime_it_was_given() -> None:
    """The lifetime is the one Django reads at each request's start and end: kept while
    it has not passed, closed once it has."""
    with _opened(60) as wrapper:
        wrapper.close_if_unusable_or_obsolete()
        assert wrapper.connection is not None
        wrapper.close_at = time.monotonic() - 0.001
        wrapper.close_if_unusable_or_obsolete()
        assert wrapper.connection is None
