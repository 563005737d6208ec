"""Background work after commit: queueing a session's memory work, or leaving it marked
(``memory_dirty_at``) for the outbox sweep, which queues what is still marked."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

from django.conf import settings
from django.utils import timezone

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


def memory_caught_up(session_id: str, *, dirty_mark: datetime | None, cursor: int) -> None:
    """A memory run has taken in the session's events up to ``cursor``.

    The outbox mark is cleared only if no event came in meanwhile (a newer mark means
    another run is queued and will see those events); the time of the run paces the next
    one ingestion queues for a busy session (:func:`settle_delay`)."""
    Session.objects.filter(pk=session_id, memory_dirty_at=dirty_mark).update(
        memory_dirty_at=None, memory_cursor=cursor, memory_run_at=timezone.now()
    )
    Session.objects.filter(pk=session_id, memory_cursor__lt=cursor).update(memory_cursor=cursor)


def memory_waiting(session_id: str) -> str | None:
    """The status of a session whose events wait for its memory (its outbox mark is
    set); None when nothing waits."""
    return (
        Session.objects.filter(pk=session_id, memory_dirty_at__isnull=False)
        .values_list("status", flat=True)
        .first()
    )
