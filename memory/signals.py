"""The memory app's receivers: pins released when a session closes, task failures kept
in the database so the admin shows them."""

from __future__ import annotations

import logging
import traceback as tb
from typing import Any

from .models import TaskFailure
from .services.pins import pins_release

logger = logging.getLogger(__name__)


def release_pins_at_close(sender: Any, session: Any, ended_at: Any, **_: Any) -> None:
    """A closed session's pins go back to its agent (inside the ingest transaction)."""
    pins_release(session, ended_at)


def record_task_failure(
    sender: Any = None,
    task_id: str | None = None,
    exception: BaseException | None = None,
    args: Any = None,
    traceback: Any = None,
    **_: Any,
) -> None:
    """Store one failed task run (never raising: a failure to record is only logged)."""
    try:
        TaskFailure.objects.create(
            task_name=getattr(sender, "name", str(sender))[:200],
            task_id=(task_id or "")[:200],
            args=[str(a)[:200] for a in (args or [])],
            exception=f"{exception.__class__.__name__}: {exception}"[:2000] if exception else "",
            traceback="".join(tb.format_tb(traceback))[-8000:] if traceback else "",
        )
    except Exception:
        logger.exception("could not record a task failure")
