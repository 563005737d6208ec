"""Background work: thin wrappers that load ids, call a service and handle retries."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from lifecycle.models import OPEN_STATUSES, Session

from . import pipeline
from .retention import retention_apply
from .services import distil

logger = logging.getLogger(__name__)

# Database hiccups are worth retrying; anything else is a bug and is recorded.
_RETRY: dict[str, Any] = {
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": 2,
    "retry_backoff_max": 120,
    "retry_jitter": True,
    "max_retries": 8,
    "acks_late": True,
}


# A run that ends with events still waiting hands over to a fresh run: a closed
# session's this many seconds later (its summary is wanted), an open session's after
# SESSIONHUB["MEMORY_BUSY_SECONDS"] (see process_session).
REQUEUE_SECONDS = 1


@shared_task(**_RETRY)
def process_session(session_id: str) -> bool:
    """Distil a session's new events: observations, tails, features, summary."""
    eager = process_session.app.conf.task_always_eager
    last = distil.session_process_until_clean(session_id, settle_open=not eager)
    # Ingestion queues a run only when a session turns dirty, so nobody else will queue
    # one for events that came in during the last round: without this they would wait
    # for the outbox sweep (a minute or more). In eager mode this run happens inside the
    # request that queued it and a re-queue would recurse: there the sweep stays the fallback.
    #
    # An open session whose events kept coming through the run is a busy agent: its next
    # run waits longer, to take in more events at once. A run costs several statements
    # whatever it finds, so a few events a run kept the worker busy beside ingestion
    # (docs/benchmarks.md); the first run after a quiet spell still comes after the short
    # settle, and the session's end is queued at once by ingestion.
    if last is not None and last.waiting is not None and not eager:
        countdown = (
            settings.SESSIONHUB["MEMORY_BUSY_SECONDS"]
            if last.waiting in OPEN_STATUSES
            else REQUEUE_SECONDS
        )
        process_session.apply_async((session_id,), countdown=countdown)
    return last is not None


@shared_task(**_RETRY)
def summarize_session(session_id: str) -> bool:
    """Rebuild one session's summary on request."""
    session = Session.objects.select_related("team").filter(pk=session_id).first()
    if session is None:
        return False
    summary = pipeline.summary_build(session)
    logger.info("summary of session %s rebuilt (%s)", session_id, summary.method)
    return True


@shared_task(**_RETRY)
def reredact_sessions(session_ids: list[str]) -> int:
    """Re-apply the current redaction rules to these sessions' rows under older ones."""
    changed = pipeline.reredact_everything(session_ids=session_ids)
    total = sum(changed.values())
    parts = ", ".join(f"{name} {n}" for name, n in changed.items())
    logger.info("re-redacted %s session(s): %s row(s) changed (%s)", len(session_ids), total, parts)
    return total


@shared_task(**_RETRY)
def reredact_all() -> int:
    """Re-apply the current redaction rules to every stored row written under older ones."""
    return sum(pipeline.reredact_everything().values())


@shared_task(**_RETRY)
def apply_retention() -> int:
    """Archive then delete sessions past the retention age (off when RETENTION_DAYS is 0)."""

    return retention_apply().deleted
