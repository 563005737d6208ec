"""What a request's events come to: one result each."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..adapters import NormalizedEvent

ACCEPTED, DUPLICATE, REJECTED = "accepted", "duplicate", "rejected"
# Internal to events_store: answered as REJECTED with the code below.
CONFLICT = "conflict"


@dataclass(slots=True)
class EventResult:
    """What happened to one event of a request."""

    index: int
    status: str
    event_id: str | None = None
    session_id: str | None = None
    field: str | None = None
    reason: str | None = None
    code: str | None = None
    # The event's canonical kind (not part of the answer): what the view may add to it.
    kind: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            name: getattr(self, name)
            for name in ("index", "status", "event_id", "session_id", "field", "reason", "code")
            if getattr(self, name) is not None
        }


Adapter = Callable[[Any, datetime], NormalizedEvent]
