"""Django's PostgreSQL backend, with a health check that makes no round trip for a
connection that plainly works.

With ``CONN_HEALTH_CHECKS`` on, Django checks a kept connection at the first query of
every request by sending ``SELECT 1``. The hot path's cursor
(``sessionhub.db.statements.server_bound_cursor``) did not run it at first, and a
``SELECT 1`` there would double a single event's round trips; a connection that broke
while idle failed that request's statement. Such a connection has something
waiting on its socket by the time the next request comes (the server's last message
when PostgreSQL restarts or the backend is terminated, the end of the stream when a
proxy closes it), so the check here looks first, without a round trip:

* psycopg says the connection is open and idle (not broken, no transaction left open);
* nothing is waiting to be read on its socket;
* it was checked, at its last request's start, within ``RECENT_SECONDS``.

When all three hold, the connection is taken as it is (about 2 µs). Otherwise Django's
own check runs (``SELECT 1``), and a connection that fails it is closed and opened anew.
A connection that breaks between the look and the query fails its request, as one that
broke between ``SELECT 1`` and the query always could.
"""

from __future__ import annotations

import select
import time
from typing import Any

from django.db.backends.postgresql.base import DatabaseWrapper as PostgresDatabaseWrapper
from psycopg import pq

# How recently a connection must have been checked (at its last request's first query)
# for its next request to skip the round trip. A busy process's connections are used
# many times a second; an idle one pays the round trip, which costs it nothing that
# matters, and a connection unused for long gets the full check.
RECENT_SECONDS = 2.0

_WAITING = select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP


class DatabaseWrapper(PostgresDatabaseWrapper):
    checked_at: float = float("-inf")

    def close_if_health_check_failed(self) -> None:
        django: Any = self  # the wrapper's state, which the stubs do not describe
        if self.connection is None or not django.health_check_enabled or django.health_check_done:
            return
        now = time.monotonic()
        if now - self.checked_at < RECENT_SECONDS and plainly_alive(self.connection):
            django.health_check_done = True
        else:
            super().close_if_health_check_failed()
        self.checked_at = now

    def connect(self) -> None:
        super().connect()
        self.checked_at = time.monotonic()  # new connections are healthy


def plainly_alive(connection: Any) -> bool:
    """Whether a psycopg connection is open, idle, and has nothing waiting on its socket
    (a healthy server sends nothing to an idle session)."""
    if connection.closed or connection.broken:
        return False
    pgconn = connection.pgconn
    if pgconn.status != pq.ConnStatus.OK:
        return False
    if pgconn.transaction_status != pq.TransactionStatus.IDLE:
        return False
    try:
        poller = select.poll()
        poller.register(pgconn.socket, _WAITING)
        return not poller.poll(0)
    except (OSError, ValueError):  # no socket any more
        return False
