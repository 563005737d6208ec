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
        """The answer's fields that are set, in this order (one per event of a batch)."""
        found: dict[str, Any] = {"index": self.index, "status": self.status}
        if self.event_id is not None:
            found["event_id"] = self.event_id
        if self.session_id is not None:
            found["session_id"] = self.session_id
        if self.field is not None:  # a refused event's field, reason and code
            found["field"] = self.field
        if self.reason is not None:
            found["reason"] = self.reason
        if self.code is not None:
            found["code"] = self.code
        return found


Adapter = Callable[[Any, datetime], NormalizedEvent]
