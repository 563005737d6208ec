"""Continuity, first stage: every query that loads what an answer is made of.

The candidates (an agent's completed sessions of the lookback window with their features
and summaries, in one statement), which of the prompt's terms each one's words hold (on
PostgreSQL by its text search), the pins of the agent and of the source, the team's
curated pins, and what the asking session already holds. Everything leaves this stage as
plain data (``data.Prior``, ``data.Features``, ``relevance.SessionText``) or as the pins read,
so the stages after it never query.

The candidates are read as plain rows, the few columns scoring needs, not as model
instances: with hundreds of candidates per request a model of some forty columns each
costs more than the rest of the answer.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import BigIntegerField, F, Func, IntegerField, Q, QuerySet, TextField, Value
from django.db.models.functions import Cast

from lifecycle.models import Session, SessionStatus, foreground_q
from sessionhub.db.statements import Compiled, model_from_row

from .. import relevance as relevance_lib
from ..models import Pin, SessionFeatures, Summary
from ..relevance import SessionText
from ..selectors import pins_held_q
from .data import (
    SUMMARY_COLUMNS,
    UNIX_EPOCH,
    Features,
    Knobs,
    Prior,
    decoded,
    knobs,
    split_topics,
)

CLOSED = (SessionStatus.ENDED, SessionStatus.CRASHED)

# --- the candidates ----------------------------------------------------------------------


class _ArrayLength(Func):
    """PostgreSQL: a jsonb column's array length; NULL when it holds something else."""

    template = (
        "CASE WHEN jsonb_typeof(%(expressions)s) = 'array' "
        "THEN jsonb_array_length(%(expressions)s) END"
    )
    output_field = IntegerField()


class EpochMicroseconds(Func):
    """PostgreSQL: a timestamp as whole microseconds since 1970 (exact: the epoch is numeric).

    Read as an integer the value is decoded in C rather than by Django's datetime loader
    in Python; ``UNIX_EPOCH + timedelta`` gives the same datetime.
    """

    template = "(EXTRACT(EPOCH FROM %(expressions)s) * 1000000)::bigint"
    output_field = BigIntegerField()


def _text(field: str) -> Cast:
    return Cast(field, output_field=TextField())


def _candidates_queryset(
    agent_id: uuid.UUID, exclude_pk: uuid.UUID, since: datetime, limit: int
) -> QuerySet[Session, tuple[Any, ...]]:
    """The candidates' rows as ``candidate_rows`` reads them."""
    ended: Any
    pending_count: Any
    if connection.vendor == "postgresql":
        ended = EpochMicroseconds("ended_at")
        pending_count = _ArrayLength(F("features__pending_tasks"))
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

    Compiling a queryset of a dozen columns across three tables on every request would
    cost about what running it does. The ORM's values list gives each column as the query
    returns it on PostgreSQL, so the rows are the same either way (a test compares them).
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
    rows: list[tuple[Any, ...]] = _candidates_compiled(limit).rows(agent_id, exclude_pk, since)
    return rows


def candidate_rows(
    agent_id: uuid.UUID, *, exclude_pk: uuid.UUID, now: datetime, k: Knobs | None = None
) -> list[tuple[Any, ...]]:
    """The agent's completed sessions of the lookback window with their features and
    summaries, newest first, as plain rows (``candidates_from_rows`` reads them)."""
    k = k or knobs()
    since = now - timedelta(days=k.lookback_days)
    return _candidate_rows(agent_id, exclude_pk, since, k.max_candidates)


def candidates_from_rows(
    rows: Sequence[tuple[Any, ...]],
) -> tuple[list[tuple[Prior, Features | None]], dict[uuid.UUID, dict[str, str]]]:
    """The candidates of ``candidate_rows`` with their features, and each one's summary
    sections by session (a session without a summary is left out): no model instances,
    JSON decoded only where needed."""
    # ended_at is never NULL here (the filter), so the last_event_at fallback is not read.
    loads = decoded
    candidates = []
    summaries: dict[uuid.UUID, dict[str, str]] = {}
    for pk, external_id, ended_at, previous, named, features_id, topics, count, *columns in rows:
        texts, (summary_id, *sections) = (columns[0], columns[1], columns[2]), columns[3:]
        if summary_id is not None:
            summaries[pk] = dict(zip(SUMMARY_COLUMNS, sections, strict=True))
        if type(ended_at) is int:
            ended_at = UNIX_EPOCH + timedelta(microseconds=ended_at)
        features = None
        if features_id is not None:
            if count is None:  # not an array, or not PostgreSQL: len() of the decoded value
                count = len(loads(texts[1]))
            hot_topics, topic_set = split_topics(topics)
            features = Features(hot_topics, count, texts=texts, topic_set=topic_set)
        continues = previous if named else None
        candidates.append((Prior(pk, external_id, ended_at, None, continues), features))
    return candidates, summaries


@dataclass(frozen=True, slots=True)
class Window:
    """An agent's candidates as read: each one with its features, its summary sections,
    its hot topics as stored (JSON text, None without features), and its stored lexemes
    once a first prompt has read them (``lexemes``)."""

    rows: list[tuple[Prior, Features | None]]
    summaries: dict[uuid.UUID, dict[str, str]]
    topics_text: dict[uuid.UUID, str | None]
    stored: list[dict[uuid.UUID, frozenset[str]]]

    def lexemes(self) -> dict[uuid.UUID, frozenset[str]]:
        """The candidates' stored lexemes (PostgreSQL), read at the window's first prompt."""
        if not self.stored:
            expected = {
                prior.pk: (self.summaries.get(prior.pk), self.topics_text.get(prior.pk))
                for prior, _ in self.rows
            }
            self.stored.append(relevance_lib.stored_lexemes(expected))
        return self.stored[0]


def window_of(rows: Sequence[tuple[Any, ...]]) -> Window:
    """The window of candidates ``candidate_rows`` read."""
    parsed, summaries = candidates_from_rows(rows)
    return Window(parsed, summaries, {row[0]: row[6] for row in rows}, [])


def candidate_texts(window: Window, terms: Sequence[str]) -> dict[uuid.UUID, SessionText]:
    """Every candidate's summary words, and which of the prompt's ``terms`` each holds
    (on PostgreSQL by its text search: the window's stored lexemes, and the terms')."""
    rows = window.rows
    stored = window.lexemes() if terms and connection.vendor == "postgresql" else None
    return relevance_lib.session_texts(
        [prior.pk for prior, _ in rows],
        terms,
        {prior.pk: features.hot_topics for prior, features in rows if features},
        window.summaries,
        stored,
    )


# --- the sessions of a request ------------------------------------------------------------


def prior_of(session: Session) -> Prior:
    """A session model as a candidate."""
    continues = session.previous_session_id if session.previous_external_id else None
    return Prior(
        session.pk, session.external_id, session.ended_at, session.last_event_at, continues
    )


def _features_row(session: Session) -> SessionFeatures | None:
    try:
        return session.features
    except SessionFeatures.DoesNotExist:
        return None


def features_of(session: Session) -> Features | None:
    """A session's features as scoring reads them (None without a features row)."""
    found = _features_row(session)
    if found is None:
        return None
    return Features(
        found.hot_topics,
        len(found.pending_tasks),
        active_projects=found.active_projects,
        pending_tasks=found.pending_tasks,
        done_tasks=found.done_tasks,
    )


def hot_topics_of(session: Session) -> list[str]:
    """A session's hot topics (none without features)."""
    found = _features_row(session)
    return list(found.hot_topics) if found is not None else []


# What the preamble quotes of a source's summary.
_QUOTED_COLUMNS = ("request", "completed", "next_steps", "outcome", "outcome_detail")


def summary_text(session_pk: uuid.UUID) -> dict[uuid.UUID, SessionText]:
    """The parts of a session's summary the preamble quotes (one query), by session; empty
    without a summary."""
    found = Summary.objects.filter(session_id=session_pk).values(*_QUOTED_COLUMNS).first()
    if found is None:
        return {}
    request, completed, next_steps, outcome, detail = (found[c] or "" for c in _QUOTED_COLUMNS)
    return {session_pk: SessionText(request, completed, next_steps, "", outcome, detail)}


# --- pins --------------------------------------------------------------------------------


def _pins_read(agent_id: uuid.UUID, source_pk: uuid.UUID) -> QuerySet[Pin]:
    return (
        Pin.objects.filter(Q(agent_id=agent_id, unpinned_at__isnull=True) | pins_held_q(source_pk))
        .select_related("inherited_from")
        .order_by("-pinned_at", "-id")
    )


_PINS_READ = Compiled(
    _pins_read,
    uuid.UUID("00000000-0000-4000-8000-0000000a9e17"),
    uuid.UUID("00000000-0000-4000-8000-00000005e551"),
)


def pins_with_originals(agent_id: uuid.UUID, source_pk: uuid.UUID) -> list[Pin]:
    """``_pins_read``'s pins (the agent's active pins and those the source held), each
    with the original it was copied from (or None); on PostgreSQL from its statement
    compiled once: the pin's columns, then the original's."""
    if connection.vendor != "postgresql":
        return list(_pins_read(agent_id, source_pk))
    width = len(Pin._meta.concrete_fields)
    original = Pin._meta.get_field("inherited_from")
    pins = []
    for row in _PINS_READ.rows(agent_id, source_pk):
        pin = model_from_row(Pin, row[:width])
        original.set_cached_value(
            pin, None if row[width] is None else model_from_row(Pin, row[width:])
        )
        pins.append(pin)
    return pins


def curated_pins_of(agent_id: uuid.UUID) -> list[Pin]:
    """The agent's active pins set by people, critical first, then oldest first."""
    pins = Pin.objects.filter(
        agent_id=agent_id,
        unpinned_at__isnull=True,
        inherited_from__isnull=True,
        inherited_into__isnull=True,
    ).order_by("pinned_at", "id")
    return sorted(pins, key=lambda p: p.priority != Pin.Priority.CRITICAL)
