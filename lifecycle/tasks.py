"""Periodic lifecycle work: the crash sweep and the outbox sweep."""

from __future__ import annotations

from celery import shared_task

from . import services


@shared_task(acks_late=True)
def close_crashed_sessions() -> int:
    """Close sessions silent past the crash horizon."""
    return services.crashed_sessions_close()


@shared_task(acks_late=True)
def sweep_outbox() -> int:
    """Queue background work that could not be queued when its events came in."""
    return services.outbox_sweep()
