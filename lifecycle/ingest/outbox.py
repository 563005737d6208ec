"""Background work after commit: queueing a session's memory work, or leaving it marked
(``memory_dirty_at``) for the outbox sweep, which queues what is still marked."""

from __future__ import annotations

import atexit
import functools
import logging
import os
import queue
import threading
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from sessionhub.db.statements import column_of, concrete_fields
from sessionhub.resilience import breaker_for, throttled

from .. import signals
from ..models import Session

logger = logging.getLogger(__name__)

# --- background work -------------------------------------------------------------------


def settle_delay(memory_run_at: datetime | None, now: datetime) -> float:
    """Seconds until an open session that has just turned dirty gets its memory run.

    A burst of events settles for MEMORY_SETTLE_SECONDS first. A session whose memory ran
    less than MEMORY_BUSY_SECONDS ago is a busy agent whose last run happened to find it
    clean: its next run waits out the rest of that interval, as a run that found it still
    dirty would have queued it. Without this every event after such a run started a new
    short wait, and a busy session's memory ran about once a second instead of at the
    pace MEMORY_BUSY_SECONDS sets.
    """
    return settle_delay_after(
        None if memory_run_at is None else (now - memory_run_at).total_seconds()
    )


def settle_delay_after(since_run: float | None) -> float:
    """:func:`settle_delay` from the seconds since the session's memory last ran (None:
    never)."""
    limits = settings.SESSIONHUB
    settle = float(limits["MEMORY_SETTLE_SECONDS"])
    if since_run is None:
        return settle
    busy = float(limits["MEMORY_BUSY_SECONDS"])
    return max(settle, busy - max(0.0, since_run))  # max: a worker's clock ahead


def enqueue_session_work(session_ids: Iterable[str], countdown: float = 0) -> int:
    """Queue memory processing; a broker outage leaves the work to the outbox sweep.

    The sessions stay marked (``memory_dirty_at``) until their work is done, so nothing is
    lost by not queueing: after a first failure the broker's circuit breaker skips the
    publish at once, and the outage is logged once per interval, not per request.
    """
    process_session = signals.session_task()
    if process_session is None:
        return 0  # no app distils sessions here; the marks stay for when one does
    ids = list(session_ids)
    conf = process_session.app.conf
    breaker = None if conf.task_always_eager else breaker_for(conf.broker_url)
    if breaker is not None and not breaker.available:
        throttled.warning(
            "broker", "broker at %s unavailable; the outbox sweep will queue the work", breaker.name
        )
        return 0
    queued = 0
    for session_id in ids:
        try:
            process_session.apply_async((session_id,), countdown=countdown or None)
            queued += 1
        except Exception as exc:  # noqa: BLE001 - the outbox keeps the work
            if breaker is not None:
                breaker.failed(exc)
            throttled.warning(
                "broker",
                "could not queue work (%s); the outbox sweep will queue it",
                exc.__class__.__name__,
            )
            break
    return queued


class _Publisher:
    """A thread per process that queues memory work for the request threads, so a hook's
    answer does not wait on the broker.

    Under 300 hook requests a second a publish took 4.3 ms at the median and 75 ms at
    p99 (about 1.7 ms of it CPU), on the request of each session's event that turned it
    dirty, about 2% of the requests (docs/benchmarks.md). Work
    handed over here and not yet published when the process dies is no more lost than
    work the broker refused: the session stays marked and the outbox sweep queues it.
    """

    # Past this many waiting hand-overs (a broker far slower than ingestion), a new one
    # is left to the outbox sweep rather than held in memory.
    LIMIT = 10_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._thread: threading.Thread | None = None
        # Work to publish; an Event to set once all before it is done; None to stop.
        self._queue: queue.Queue[tuple[list[str], float] | threading.Event | None] = queue.Queue(
            self.LIMIT
        )

    def submit(self, session_ids: list[str], countdown: float) -> None:
        self._start()
        try:
            self._queue.put_nowait((session_ids, countdown))
        except queue.Full:
            throttled.warning(
                "publisher", "memory work left to the outbox sweep: the broker is behind"
            )

    def flush(self, timeout: float) -> bool:
        """Wait until all handed over so far is published (or given up on); False if
        that took longer than ``timeout``."""
        if not self._running():
            return self._queue.empty()
        done = threading.Event()
        try:
            self._queue.put(done, timeout=timeout)
        except queue.Full:
            return False
        return done.wait(timeout)

    def stop(self, timeout: float = 5.0) -> None:
        """Publish what is waiting, then end the thread (at the process's exit)."""
        if not self._running():
            return
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            return  # a broker that far behind: what waits is the outbox sweep's
        assert self._thread is not None
        self._thread.join(timeout)

    def _running(self) -> bool:
        return self._pid == os.getpid() and self._thread is not None and self._thread.is_alive()

    def _start(self) -> None:
        if self._running():
            return
        with self._lock:
            if self._running():
                return
            if self._pid != os.getpid():  # a forked child: its parent's hand-overs are not its
                self._queue = queue.Queue(self.LIMIT)
            self._pid = os.getpid()
            self._thread = threading.Thread(
                target=self._run, name="sessionhub-publisher", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            if isinstance(item, threading.Event):
                item.set()
                continue
            try:
                enqueue_session_work(*item)
            except Exception:  # the thread outlives any one failure; the outbox keeps it
                logger.exception("could not queue memory work")


_publisher = _Publisher()
atexit.register(_publisher.stop)


def enqueue_session_work_soon(session_ids: Iterable[str], countdown: float = 0) -> None:
    """:func:`enqueue_session_work` without waiting for it: handed to this process's
    publishing thread. Where tasks run in the process (embedded mode), they run now, as
    before: the request that queued them is their only thread."""
    process_session = signals.session_task()
    if process_session is None or process_session.app.conf.task_always_eager:
        enqueue_session_work(session_ids, countdown)
        return
    _publisher.submit(list(session_ids), countdown)


def published(timeout: float = 5.0) -> bool:
    """Wait until the memory work handed over by this process so far is published."""
    return _publisher.flush(timeout)


def outbox_sweep(*, now: datetime | None = None, limit: int = 500) -> int:
    """Re-queue sessions whose marked work was not done within the grace period."""
    now = now or timezone.now()
    grace = settings.SESSIONHUB["OUTBOX_GRACE"]
    ids = list(
        Session.objects.filter(memory_dirty=True, memory_dirty_at__lt=now - grace)
        .order_by("memory_dirty_at")
        .values_list("pk", flat=True)[:limit]
    )
    return enqueue_session_work([str(pk) for pk in ids])


def memory_caught_up(session_id: str, *, dirty_mark: datetime | None, cursor: int) -> str | None:
    """A memory run has taken in the session's events up to ``cursor``; what waits now.

    The outbox mark is cleared only if no event came in meanwhile (a newer mark means
    another run is queued and will see those events); the time of the run paces the next
    one ingestion queues for a busy session (:func:`settle_delay`). The cursor only moves
    forward. Returns the session's status when its mark is still set (events came in
    during the run: the caller decides whether to go round again), None when it is clean
    or gone.

    One statement where this was two updates and a read: a run costs its statements
    whatever it finds, and most runs of a session that is not busy take in a few events
    (docs/benchmarks.md). An event that lands after it sets the mark again and, having
    found the session clean, queues its own run; so the status read here is all that
    can wait on this run.
    """
    params: dict[str, Any] = {
        "id": Session._meta.pk.get_db_prep_value(session_id, connection),
        "cursor": cursor,
        "now": connection.ops.adapt_datetimefield_value(timezone.now()),
        "mark": connection.ops.adapt_datetimefield_value(dirty_mark),
    }
    with connection.cursor() as db:
        db.execute(_caught_up_statement(dirty_mark is None), params)
        row = db.fetchone()
    if row is None or row[0] is None:
        return None
    return str(row[1])


@functools.cache
def _caught_up_statement(unmarked: bool) -> str:
    """The statement of :func:`memory_caught_up`, built once per process for either kind
    of mark (a run that started on a session nobody marked compares with NULL)."""
    quote = connection.ops.quote_name
    table = quote(Session._meta.db_table)
    names = ("memory_dirty_at", "memory_run_at", "memory_cursor", "status", "id")
    dirty, run_at, cursor, status, pk = (
        quote(column_of(f)) for f in concrete_fields(Session, names)
    )
    same = f"{dirty} IS NULL" if unmarked else f"{dirty} = %(mark)s"
    # Every SET reads the row as it was before the statement, on both databases.
    return f"""
        UPDATE {table} SET
            {cursor} = CASE WHEN {cursor} < %(cursor)s THEN %(cursor)s ELSE {cursor} END,
            {run_at} = CASE WHEN {same} THEN %(now)s ELSE {run_at} END,
            {dirty} = CASE WHEN {same} THEN NULL ELSE {dirty} END
        WHERE {pk} = %(id)s
        RETURNING {dirty}, {status}
    """  # noqa: S608 - table and column names from the model, values bound
