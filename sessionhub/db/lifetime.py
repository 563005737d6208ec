"""Persistent database connections that do not all expire in the same second.

Django closes a kept connection at the end of the first request after ``CONN_MAX_AGE``
seconds from when it opened. A web process opens its threads' connections together
(its first burst of requests), so they all reach that age together too, and every
``CONN_MAX_AGE`` seconds each thread's next request opens a new one at the same moment:
a new PostgreSQL backend each (a fork, its catalogue caches cold, the hot statements
prepared and planned again). Under the benchmark's 300 requests a second, eight to
eleven backends started in the same second, 60 s after the warm-up, in every run, and
the requests around them took 30-150 ms.

:func:`spread_expiry` gives each new connection a lifetime drawn between half of
``CONN_MAX_AGE`` and all of it, so the threads' reconnections are spread over half the
period and each costs only the request that makes it. ``CONN_MAX_AGE`` stays the
longest a connection is kept; 0 (a connection per request) and ``None`` (kept for the
process's life) are left as they are.
"""

from __future__ import annotations

import random
import time
from typing import Any

# The shortest lifetime a connection is given, as a share of CONN_MAX_AGE.
SHORTEST_SHARE = 0.5


def spread_expiry(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created`` receiver: this connection's own expiry, drawn at random
    between ``SHORTEST_SHARE`` of ``CONN_MAX_AGE`` and all of it.

    Django keeps the expiry in the wrapper's ``close_at`` (set as the connection opens,
    read by ``close_if_unusable_or_obsolete`` at each request's start and end).
    """
    max_age = connection.settings_dict.get("CONN_MAX_AGE")
    if not max_age or getattr(connection, "close_at", None) is None:
        return
    connection.close_at = time.monotonic() + max_age * random.uniform(SHORTEST_SHARE, 1.0)  # noqa: S311 - not for security
