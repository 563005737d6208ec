"""The time budget of one run: a hook must be done long before the agent's own
timeout.
"""

from __future__ import annotations

import time

from .constants import SPOOL_RESERVE


class Deadline:
    """A total time budget: network work stops early so the spool can still be written."""

    def __init__(self, seconds: float, reserve: float = SPOOL_RESERVE) -> None:
        self.start = time.monotonic()
        self.end = self.start + seconds
        self.net_end = self.end - min(reserve, seconds / 4)

    def remaining(self) -> float:
        """Seconds left for the whole run."""
        return self.end - time.monotonic()

    def net_remaining(self) -> float:
        """Seconds left for network calls."""
        return self.net_end - time.monotonic()
