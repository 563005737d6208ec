"""The data every stage of a continuity answer shares: the knobs and a candidate as read
(``Prior`` and its ``Features``; its words are ``relevance.SessionText``).

Plain values only: no queries and no models, so that the deciding and rendering stages
can take them without reaching the database.
"""

from __future__ import annotations

import functools
import json
import uuid
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any, NamedTuple, cast

from django.conf import settings

UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# The summary sections continuity reads of every candidate, in this order (relevance
# reads these), then how its last turn ended (the preamble says it).
SUMMARY_SECTIONS = ("request", "learned", "completed", "next_steps")
SUMMARY_COLUMNS = (*SUMMARY_SECTIONS, "outcome", "outcome_detail")


@dataclass(frozen=True, slots=True)
class Knobs:
    """``SESSIONHUB["CONTINUITY"]`` as typed values: the settings (sessionhub/settings.py,
    each from the environment, with its default) are their only source; the field names
    are the settings' keys in lower case."""

    lookback_days: int
    weight_recency: float
    weight_topics: float
    weight_pending: float
    recency_hours: float
    pending_per_task: float
    threshold: float
    max_sources: int
    max_inherited_pins: int
    critical_pin_days: int
    decay_floor: float
    decay_per_week: float
    min_pin_confidence: float
    max_candidates: int
    weight_relevance: float
    relevance_min: float
    relevance_strong: float
    relevance_margin: float
    strong_min_terms: int
    preamble_max_chars: int
    preamble_max_tasks: int
    preamble_max_topics: int

    @classmethod
    def of(cls, values: dict[str, Any]) -> Knobs:
        """The knobs of a settings mapping (upper-case keys, every one of them)."""
        return cls(**{f.name: values[f.name.upper()] for f in fields(cls)})


def knobs() -> Knobs:
    """The knobs as the settings give them now."""
    return Knobs.of(cast(dict[str, Any], settings.SESSIONHUB["CONTINUITY"]))


class Prior(NamedTuple):
    """A prior session as continuity reads it: the columns it needs, not the model."""

    pk: uuid.UUID
    external_id: str
    ended_at: datetime | None
    last_event_at: datetime | None = None
    # The session this one continues under a name it gave (a resume, a fork), if any:
    # not a /clear or a replacement, which start another conversation.
    continues: uuid.UUID | None = None


_UNREAD = object()


@functools.lru_cache(maxsize=2048)
def decoded(text: str) -> Any:
    """A features column decoded, cached by its text: continuity reads the same candidates
    request after request (2,048 texts: the three columns of 200 candidates for a few
    agents). The value is shared between requests, so it is only read."""
    return json.loads(text)


@functools.lru_cache(maxsize=4096)
def split_topics(text: str) -> tuple[list[str], frozenset[str]]:
    """A hot topics column decoded, and lowercased as scoring compares it (cached)."""
    topics = json.loads(text)
    return topics, _lowered(topics)


def _lowered(topics: list[str]) -> frozenset[str]:
    return frozenset(topic.lower() for topic in topics)


class Features:
    """What scoring and the preamble read of a session's features.

    Scoring reads every candidate's hot topics and number of pending tasks; the rest
    (projects, tasks, done tasks) only the preamble reads, for the chosen sessions and
    the ones newer than them. Those stay JSON text until first read.
    """

    __slots__ = (
        "_active_projects",
        "_done_tasks",
        "_pending_tasks",
        "_texts",
        "hot_topics",
        "pending_count",
        "topic_set",
    )

    def __init__(
        self,
        hot_topics: list[str],
        pending_count: int,
        *,
        active_projects: Any = _UNREAD,
        pending_tasks: Any = _UNREAD,
        done_tasks: Any = _UNREAD,
        texts: tuple[str, str, str] | None = None,
        topic_set: frozenset[str] | None = None,
    ) -> None:
        self.hot_topics = hot_topics
        # The hot topics lowercased, as scoring compares them.
        self.topic_set = topic_set if topic_set is not None else _lowered(hot_topics)
        self.pending_count = pending_count
        self._active_projects = active_projects
        self._pending_tasks = pending_tasks
        self._done_tasks = done_tasks
        # (active projects, pending tasks, done tasks) as JSON, read when first asked for;
        # without it every list was given decoded.
        self._texts = texts or ("[]", "[]", "[]")

    @property
    def active_projects(self) -> list[str]:
        if self._active_projects is _UNREAD:
            self._active_projects = decoded(self._texts[0])
        return cast(list[str], self._active_projects)

    @property
    def pending_tasks(self) -> list[dict[str, Any]]:
        if self._pending_tasks is _UNREAD:
            self._pending_tasks = decoded(self._texts[1])
        return cast(list[dict[str, Any]], self._pending_tasks)

    @property
    def done_tasks(self) -> list[str]:
        if self._done_tasks is _UNREAD:
            self._done_tasks = decoded(self._texts[2])
        return cast(list[str], self._done_tasks)
