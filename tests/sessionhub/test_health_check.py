"""The per-request health check of kept PostgreSQL connections
(``sessionhub/db/postgresql/base.py``): no round trip for a connection that served a
request moments ago and shows nothing wrong; Django's ``SELECT 1`` otherwise, so a
connection that broke while idle is still replaced before a request uses it."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, connections

from sessionhub.db.postgresql.base import RECENT_SECONDS, plainly_alive

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the PostgreSQL backend's health check"
)


def test_a_postgresql_url_runs_on_the_checking_backend() -> None:
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "d = s.DATABASES['default']; print(d['ENGINE'], d['CONN_HEALTH_CHECKS'])"
    )
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="sessionhub.settings",
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/sessionhub",
        DEBUG="1",
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.split() == ["sessionhub.db.postgresql", "True"], done.stderr


@pytest.fixture
def kept() -> Iterator[Any]:
    """A connection of its own, kept and checked as the web server's are."""
    wrapper = connections.create_connection("default")
    wrapper.settings_dict["CONN_MAX_AGE"] = 60
    wrapper.settings_dict["CONN_HEALTH_CHECKS"] = True
    wrapper.connect()
    checks: list[bool] = []
    usable = wrapper.is_usable

    def counted() -> bool:
        checks.append(result := usable())
        return result

    wrapper.is_usable = counted
    wrapper.checks = checks
    try:
        yield wrapper
    finally:
        wrapper.close()


def _request(wrapper: Any) -> int:
    """What a request does to the connection: Django's look at its start, then a query
    (the backend's process id)."""
    wrapper.close_if_unusable_or_obsolete()
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


@postgresql
@pytest.mark.django_db
def test_a_connection_in_use_moments_ago_makes_no_round_trip_for_its_check(kept: Any) -> None:
    first = _request(kept)
    for _ in range(5):
        assert _request(kept) == first
    assert kept.checks == []
    assert kept.health_check_done


@postgresql
@pytest.mark.django_db
def test_a_connection_idle_for_a_while_gets_the_full_check(kept: Any) -> None:
    first = _request(kept)
    kept.checked_at -= RECENT_SECONDS + 1
    assert _request(kept) == first
    assert kept.checks == [True]
    assert _request(kept) == first  # checked again moments ago: no round trip
    assert kept.checks == [True]


def _readable(wrapper: Any, seconds: float = 5) -> None:
    poller = select.poll()
    poller.register(wrapper.connection.pgconn.socket, select.POLLIN)
    assert poller.poll(seconds * 1000), "the server's goodbye never arrived"


@postgresql
@pytest.mark.django_db(transaction=True)
def test_a_connection_terminated_while_idle_is_replaced_before_the_query(kept: Any) -> None:
    first = _request(kept)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [first])
    _readable(kept)
    assert not plainly_alive(kept.connection)
    second = _request(kept)  # answered, on a new connection
    assert second != first
    assert kept.checks == [False]


@postgresql
@pytest.mark.django_db
def test_a_connection_left_in_a_transaction_is_not_taken_as_it_is(kept: Any) -> None:
    _request(kept)
    kept.connection.execute("BEGIN")
    assert not plainly_alive(kept.connection)
    kept.connection.execute("ROLLBACK")
    assert plainly_alive(kept.connection)
    kept.connection.close()
    assert not plainly_alive(kept.connection)


@postgresql
@pytest.mark.django_db(transaction=True)
def test_the_hot_paths_cursor_replaces_a_connection_terminated_while_idle(kept: Any) -> None:
    """The hot path's statements go through ``server_bound_cursor``, not Django's own
    cursors: it runs the same check, so a request after a restart of the database finds
    a working connection rather than failing."""
    from sessionhub.db.statements import server_bound_cursor

    first = _request(kept)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [first])
    _readable(kept)
    default = connections["default"]
    connections["default"] = kept
    try:
        kept.close_if_unusable_or_obsolete()  # the next request starts
        with server_bound_cursor(prepared=True) as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            second = cursor.fetchone()[0]
    finally:
        connections["default"] = default
    assert second != first
    assert kept.checks == [False]
