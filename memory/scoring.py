"""Scoring an agent's prior sessions for continuity: the candidates (plain rows, a few
columns each), their features, and the score ``0.4·recency + 0.35·topic overlap +
0.25·pending`` plus relevance to the prompt when there is one."""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple, cast

from django.conf import settings
from django.db import connection
from django.db.models import BigIntegerField, F, Func, IntegerField, TextField, Value
from django.db.models.functions import Cast

from lifecycle.models import Session, SessionStatus, foreground_q
from sessionhub.db.statements import Compiled

from . import features as feature_lib
from .models import SessionFeatures, Summary

CLOSED = (SessionStatus.ENDED, SessionStatus.CRASHED)


def knobs() -> dict[str, Any]:
    return cast(dict[str, Any], settings.SESSIONHUB["CONTINUITY"])


# --- scoring -----------------------------------------------------------------------------


class Prior(NamedTuple):
    """A prior session as continuity reads it: the columns it needs, not the model."""

    pk: uuid.UUID
    external_id: str
    ended_at: datetime | None
    last_event_at: datetime | None = None
    # The session this one continues under a name it gave (a resume, a fork), if any:
    # not a /clear or a replacement, which start another conversation.
    continues: uuid.UUID | None = None

    @classmethod
    def of(cls, session: Session) -> Prior:
        continues = session.previous_session_id if session.previous_external_id else None
        return cls(
            session.pk, session.external_id, session.ended_at, session.last_event_at, continues
        )


_UNREAD = object()


@functools.lru_cache(maxsize=2048)
def _decoded(text: str) -> Any:
    """A features column decoded, cached by its text: continuity reads the same candidates
    request after request (2,048 texts: the three columns of 200 candidates for a few
    agents). The value is shared between requests, so it is only read."""
    return json.loads(text)


@functools.lru_cache(maxsize=4096)
def _topics(text: str) -> tuple[list[str], frozenset[str]]:
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
        "_topic_set",
        "hot_topics",
        "pending_count",
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
        self._topic_set = topic_set
        self.pending_count = pending_count
        self._active_projects = active_projects
        self._pending_tasks = pending_tasks
        self._done_tasks = done_tasks
        # (active projects, pending tasks, done tasks) as JSON, read when first asked for;
        # without it every list was given decoded.
        self._texts = texts or ("[]", "[]", "[]")

    @classmethod
    def of(cls, features: SessionFeatures | None) -> Features | None:
        if features is None:
            return None
        return cls(
            features.hot_topics,
            len(features.pending_tasks),
            active_projects=features.active_projects,
            pending_tasks=features.pending_tasks,
            done_tasks=features.done_tasks,
        )

    @property
    def topic_set(self) -> frozenset[str]:
        """The hot topics lowercased, as scoring compares them."""
        if self._topic_set is None:
            self._topic_set = _lowered(self.hot_topics)
        return self._topic_set

    @property
    def active_projects(self) -> list[str]:
        if self._active_projects is _UNREAD:
            self._active_projects = _decoded(self._texts[0])
        return cast(list[str], self._active_projects)

    @property
    def pending_tasks(self) -> list[dict[str, Any]]:
        if self._pending_tasks is _UNREAD:
            self._pending_tasks = _decoded(self._texts[1])
        return cast(list[dict[str, Any]], self._pending_tasks)

    @property
    def done_tasks(self) -> list[str]:
        if self._done_tasks is _UNREAD:
            self._done_tasks = _decoded(self._texts[2])
        return cast(list[str], self._done_tasks)


@dataclass(frozen=True, slots=True)
class Candidate:
    """One prior session and its score, with the parts of the score."""

    session: Prior
    hours: float
    recency: float
    topic_overlap: float
    pending: float
    score: float
    features: Features | None
    relevance: float = 0.0
    matched: tuple[str, ...] = ()
    pending_tasks_open: int = 0
    pending_tasks_finished_later: int = 0

    def as_dict(self, k: dict[str, Any] | None = None) -> dict[str, Any]:
        k = k or knobs()
        return {
            "session_id": str(self.session.pk),
            "external_id": self.session.external_id,
            "ended_at": self.session.ended_at.isoformat() if self.session.ended_at else None,
            "hours": round(self.hours, 2),
            "recency": round(self.recency, 4),
            "topic_overlap": round(self.topic_overlap, 4),
            "pending": round(self.pending, 4),
            "relevance": round(self.relevance, 4),
            "matched_terms": list(self.matched),
            "pending_tasks": self.pending_tasks_open,
            "pending_finished_later": self.pending_tasks_finished_later,
            # The score's parts, each weighted: they add up to the score.
            "parts": {
                "recency": round(k["WEIGHT_RECENCY"] * self.recency, 4),
                "topics": round(k["WEIGHT_TOPICS"] * self.topic_overlap, 4),
                "pending": round(k["WEIGHT_PENDING"] * self.pending, 4),
                "relevance": round(k["WEIGHT_RELEVANCE"] * self.relevance, 4),
            },
            "score": round(self.score, 4),
        }

    def as_record_entry(
        self, used: bool, k: dict[str, Any] | None = None, rank: int | None = None
    ) -> dict[str, Any]:
        """``as_dict()`` with ``used``: what the record keeps of a candidate it explains;
        a source also has its ``source_rank`` (0: the session the preamble quotes first,
        which need not have the best score: a session continued, the start's choice kept)."""
        entry = {**self.as_dict(k), "used": used}
        if used and rank is not None:
            entry["source_rank"] = rank
        return entry

    def as_record_brief(self) -> dict[str, Any]:
        """What the record keeps of a candidate ranked below the ones it explains: which
        session, and its score."""
        return {
            "session_id": str(self.session.pk),
            "external_id": self.session.external_id,
            "score": round(self.score, 4),
        }


def recency(hours: float, k: dict[str, Any] | None = None) -> float:
    """1 for a session that just ended, falling to 0 at ``RECENCY_HOURS``."""
    return max(0.0, 1.0 - hours / float((k or knobs())["RECENCY_HOURS"]))


def decayed_confidence(hours: float, confidence: float = 1.0) -> float:
    """``confidence · max(floor, 1 - hours/168 · 0.4)``: used to filter, never stored."""
    k = knobs()
    factor = max(k["DECAY_FLOOR"], 1.0 - hours / k["RECENCY_HOURS"] * k["DECAY_PER_WEEK"])
    return confidence * float(factor)


def score_session(
    session: Prior,
    features: Features | None,
    keywords: set[str],
    now: datetime,
    k: dict[str, Any] | None = None,
    *,
    relevance: float = 0.0,
    matched: tuple[str, ...] = (),
    finished_later: frozenset[str] = frozenset(),
) -> Candidate:
    """Score one completed session against the current keywords (and, with a prompt, its
    relevance); tasks a later session finished do not count as pending."""
    k = k or knobs()
    ended = session.ended_at or session.last_event_at or now
    hours = max(0.0, (now - ended).total_seconds() / 3600)
    recency_part = recency(hours, k)
    if features:
        topic_part = feature_lib.jaccard(keywords, features.topic_set)
        open_count = features.pending_count
        finished = 0
        if finished_later and open_count:
            finished = sum(1 for t in features.pending_tasks if t.get("id") in finished_later)
            open_count -= finished
        pending_part = min(1.0, k["PENDING_PER_TASK"] * open_count)
    else:  # no topics, no pending tasks
        topic_part = pending_part = 0.0
        open_count = finished = 0
    score = (
        k["WEIGHT_RECENCY"] * recency_part
        + k["WEIGHT_TOPICS"] * topic_part
        + k["WEIGHT_PENDING"] * pending_part
        + k["WEIGHT_RELEVANCE"] * relevance
    )
    return Candidate(
        session,
        hours,
        recency_part,
        topic_part,
        pending_part,
        score,
        features,
        relevance,
        matched,
        open_count,
        finished,
    )


class _ArrayLength(Func):
    """PostgreSQL: a jsonb column's array length; NULL when it holds something else."""

    template = (
        "CASE WHEN jsonb_typeof(%(expressions)s) = 'array' "
        "THEN jsonb_array_length(%(expressions)s) END"
    )
    output_field = IntegerField()


class _EpochMicroseconds(Func):
    """PostgreSQL: a timestamp as whole microseconds since 1970 (exact: the epoch is numeric).

    A timestamp Django reads goes through its own psycopg loader, in Python (some 10 µs a
    value); an integer is read in C, and ``_EPOCH + timedelta`` gives the same datetime.
    """

    template = "(EXTRACT(EPOCH FROM %(expressions)s) * 1000000)::bigint"
    output_field = BigIntegerField()


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _text(field: str) -> Cast:
    return Cast(field, output_field=TextField())


# The summary sections continuity reads of every candidate, in this order (relevance
# reads these), then how its last turn ended (the preamble says it).
SUMMARY_SECTIONS = ("request", "learned", "completed", "next_steps")
SUMMARY_COLUMNS = (*SUMMARY_SECTIONS, "outcome", "outcome_detail")


def _candidates_queryset(
    agent_id: uuid.UUID, exclude_pk: uuid.UUID, since: datetime, limit: int
) -> Any:
    """The candidates' rows as ``candidate_rows`` reads them."""
    if connection.vendor == "postgresql":
        ended: Any = _EpochMicroseconds("ended_at")
        pending_count: Any = _ArrayLength(F("features__pending_tasks"))
    else:  # the datetime, and the count from the decoded tasks
        ended, pending_count = "ended_at", Value(None, output_field=IntegerField())
    return (
        # Background runs (a heartbeat) never hand their work on.
        Session.objects.filter(
            foreground_q(), agent_id=agent_id, status__in=CLOSED, ended_at__gte=since
        )
        .exclude(pk=exclude_pk)
        .order_by("-ended_at")
        .values_list(
            "pk",
            "external_id",
            ended,
            "previous_session_id",
            "previous_external_id",
            "features__id",  # NULL: no features row
            _text("features__hot_topics"),
            pending_count,
            _text("features__active_projects"),
            _text("features__pending_tasks"),
            _text("features__done_tasks"),
            "summary__id",  # NULL: no summary
            *(f"summary__{column}" for column in SUMMARY_COLUMNS),
        )[:limit]
    )


# Stand-ins for the values of one request, found again among the compiled parameters.
_AGENT = uuid.UUID("00000000-0000-4000-8000-00000000a9e1")
_EXCLUDED = uuid.UUID("00000000-0000-4000-8000-00000000e8c1")
_SINCE = datetime(1971, 2, 3, 4, 5, 6, 789, tzinfo=UTC)


@functools.cache
def _candidates_compiled(limit: int) -> Compiled:
    """PostgreSQL: the candidates' query compiled once per process (and prepared once per
    connection) for each request's agent, excluded session and window start.

    Compiling the queryset (a dozen columns across three tables) cost about as much CPU as
    running it. The ORM's values list gives each column as the query returns it on
    PostgreSQL, so the rows are the same either way (a test compares them).
    """
    return Compiled(
        lambda agent_id, exclude_pk, since: _candidates_queryset(
            agent_id, exclude_pk, since, limit
        ),
        _AGENT,
        _EXCLUDED,
        _SINCE,
    )


def _candidate_rows(
    agent_id: uuid.UUID, exclude_pk: uuid.UUID, since: datetime, limit: int
) -> list[tuple[Any, ...]]:
    """``_candidates_queryset``'s rows."""
    return _candidates_compiled(limit).rows(agent_id, exclude_pk, since)


def candidate_rows(
    agent_id: uuid.UUID, *, exclude_pk: uuid.UUID, now: datetime
) -> list[tuple[Any, ...]]:
    """The agent's completed sessions of the lookback window with their features and
    summaries, newest first, as plain rows (``candidates_from_rows`` reads them)."""
    k = knobs()
    since = now - timedelta(days=k["LOOKBACK_DAYS"])
    return _candidate_rows(agent_id, exclude_pk, since, k["MAX_CANDIDATES"])


def candidates_from_rows(
    rows: Sequence[tuple[Any, ...]],
) -> tuple[list[tuple[Prior, Features | None]], dict[uuid.UUID, dict[str, str]]]:
    """The candidates of ``candidate_rows`` with their features, and each one's summary
    sections by session (a session without a summary is left out): no model instances,
    JSON decoded only where needed."""
    # ended_at is never NULL here (the filter), so the last_event_at fallback is not read.
    loads = _decoded
    candidates = []
    summaries: dict[uuid.UUID, dict[str, str]] = {}
    for pk, external_id, ended_at, previous, named, features_id, topics, count, *columns in rows:
        texts, (summary_id, *sections) = tuple(columns[:3]), columns[3:]
        if summary_id is not None:
            summaries[pk] = dict(zip(SUMMARY_COLUMNS, sections, strict=True))
        if type(ended_at) is int:
            ended_at = _EPOCH + timedelta(microseconds=ended_at)
        features = None
        if features_id is not None:
            if count is None:  # not an array, or not PostgreSQL: len() of the decoded value
                count = len(loads(texts[1]))
            hot_topics, topic_set = _topics(topics)
            features = Features(hot_topics, count, texts=texts, topic_set=topic_set)
        continues = previous if named else None
        candidates.append((Prior(pk, external_id, ended_at, None, continues), features))
    return candidates, summaries


def _features(session: Session) -> SessionFeatures | None:
    try:
        return session.features
    except SessionFeatures.DoesNotExist:
        return None


# What the preamble quotes of the best session's summary.
_SUMMARY_COLUMNS = ("request", "completed", "next_steps", "outcome", "outcome_detail")


def _summary_of(session_pk: uuid.UUID) -> dict[str, str] | None:
    """The parts of a session's summary the preamble quotes (one query), None without one."""
    found: dict[str, str] | None = (
        Summary.objects.filter(session_id=session_pk).values(*_SUMMARY_COLUMNS).first()
    )
    return found
