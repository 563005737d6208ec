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
