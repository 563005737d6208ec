"""Searching a team's memory for an agent: which sessions speak of these words, best first.

The words of the query are weighed as continuity weighs a first prompt's words against
its candidates (``relevance``): each term by how rare it is among the sessions found, a
session by the share of the terms its memory holds (summary, first prompts and final
message, the tool uses its summary names, hot topics, pins), matched by PostgreSQL's
English lexemes or, elsewhere, by crude stems. Recency then lifts the fresher of two
equally relevant sessions: ``score = relevance * (1 - w + w * recency)``, recency as
continuity's (1 for a session that just ended, 0 a week later), ``w`` =
``SESSIONHUB["MCP"]["SEARCH_RECENCY_WEIGHT"]``.

Which sessions are looked at, whatever the number of sessions a team has:

* the team's newest ``SEARCH_RECENT`` sessions (within the filters), whatever words they
  hold: a partial match among them is found without asking the index for every session
  holding a common word, which on a large team costs more than the whole answer may;
* unless those already give ``limit`` sessions holding every term, every session however
  old whose summary, prompts or final message hold *all* the terms: the full-text
  indexes the dashboard's search reads (on PostgreSQL,
  ``dashboard/migrations/0001_search_indexes.py``; elsewhere a plain scan), newest first,
  up to ``SEARCH_MATCHES`` from each.

An old session that holds only some of the terms is not found; a query of fewer, rarer
words finds it.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db import connection
from django.db.models import F, Func, Q, QuerySet, TextField, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce

from lifecycle.models import Agent, EventKind, LifecycleEvent, Session

from . import features as feature_lib
from . import relevance as relevance_lib
from .continuity.data import UNIX_EPOCH, split_topics
from .continuity.data import knobs as continuity_knobs
from .continuity.decide import prompt_terms, recency, relevance_scores
from .continuity.read import EpochMicroseconds
from .models import Observation, Pin, StreamTail, Summary
from .summaries import SECTIONS

SEARCH_CONFIG = "english"
# What the search reads of a summary: the expression the dashboard's GIN index holds.
SUMMARY_SEARCH_FIELDS = (*SECTIONS, "final_message")
SNIPPET_CHARS = 200
# How many rows of a full-text match are read, for each session of the answer's share.
SCAN_FACTOR = 10
# The team's active pins a search reads at most (ten an agent).
PINS_READ = 2000


def _knobs() -> dict[str, Any]:
    return cast(dict[str, Any], settings.SESSIONHUB["MCP"])


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """What narrows a search: a project, an agent, a time range (of the session's last
    activity), and the asking session left out."""

    project: str = ""
    agent: Agent | None = None
    since: datetime | None = None
    until: datetime | None = None
    # The session that asks: its own words are in its context already.
    exclude: uuid.UUID | None = None

    def q(self, prefix: str = "") -> Q:
        """The filters on sessions, or (``prefix="session__"``) on rows of a session."""
        found = Q()
        if self.project:
            found &= project_q(self.project, prefix)
        if self.agent is not None:
            found &= Q(**{f"{prefix}agent_id": self.agent.pk})
        if self.since is not None:
            found &= Q(**{f"{prefix}last_event_at__gte": self.since})
        if self.until is not None:
            found &= Q(**{f"{prefix}started_at__lte": self.until})
        if self.exclude is not None:
            found &= ~Q(**{f"{prefix}pk": self.exclude})
        return found


def project_q(project: str, prefix: str = "") -> Q:
    """Sessions of a project as SessionHub names it (``git.example.com/acme/api``), or by
    its last part (``api``); case does not matter."""
    name = project.strip().rstrip("/")
    return Q(**{f"{prefix}project__iexact": name}) | Q(
        **{f"{prefix}project__iendswith": "/" + name}
    )


@dataclass(slots=True)
class Hit:
    """One session found, why, and the words that show it."""

    line: SessionLine
    score: float
    relevance: float
    recency: float
    matched: list[str]
    where: list[str]
    snippet: str = ""
    pins: list[Pin] = field(default_factory=list)


@dataclass(slots=True)
class SearchResult:
    terms: list[str]
    hits: list[Hit]
    looked_at: int
    pins: list[Pin] = field(default_factory=list)


def memory_search(
    *, team_id: int, query: str, filters: SearchFilters, limit: int, now: datetime
) -> SearchResult:
    """The team's sessions that best answer ``query`` (already redacted), best first."""
    terms = prompt_terms(query)
    if not terms:
        return SearchResult(terms=[], hits=[], looked_at=0)
    knobs = _knobs()
    # In the (team, -started_at) index's own order: a tie-break would read every tied row.
    recent = Session.objects.filter(filters.q(), team_id=team_id).order_by("-started_at")
    rows = _rows(recent[: knobs["SEARCH_RECENT"]])
    matched = _matched(rows, terms)
    full: dict[uuid.UUID, set[str]] = {}
    # The indexes are asked for older sessions holding every term unless the newest
    # sessions already give a full answer of such sessions: an older one would rank below
    # each of them (as relevant, less recent).
    if sum(1 for found in matched.values() if len(found) == len(terms)) < limit:
        full = _sessions_with_every_term(team_id, terms, filters, knobs["SEARCH_MATCHES"])
        older = [pk for pk in full if pk not in rows]
        if older:
            added = _rows(Session.objects.filter(team_id=team_id, pk__in=older))
            rows.update(added)
            matched.update(_matched(added, terms))
    where: dict[uuid.UUID, set[str]] = {pk: set() for pk in rows}
    for pk, found in matched.items():
        if found:
            where[pk].add("summary" if rows[pk].summary else "topics")
    for pk, sources in full.items():
        # The index found every term in these (a prompt's or a final message's words the
        # summary may not repeat).
        if pk in rows:
            matched[pk] = set(terms)
            where[pk] |= sources
    pins = _active_pins_matching(team_id, terms)
    for pin in pins:
        origin = pin.origin_session_id
        if origin is not None and origin in matched:
            matched[origin] = matched[origin] | _words_in(f"{pin.label} {pin.content}", terms)
            where[origin].add("pin")
    candidates = {pk: hits for pk, hits in matched.items() if hits}
    weights = relevance_scores(terms, candidates)
    weight = knobs["SEARCH_RECENCY_WEIGHT"]
    continuity = continuity_knobs()
    ranked = []
    for pk in candidates:
        active = rows[pk].active
        hours = max(0.0, (now - active).total_seconds() / 3600) if active else 1e6
        fresh = recency(hours, continuity)
        score = weights[pk] * (1 - weight + weight * fresh)
        ranked.append((score, active.timestamp() if active else 0.0, pk, fresh))
    ranked.sort(key=lambda r: (-r[0], -r[1]))
    top = ranked[:limit]
    hits = [
        Hit(
            line=rows[pk].line,
            score=score,
            relevance=weights[pk],
            recency=fresh,
            matched=[t for t in terms if t in candidates[pk]],
            where=sorted(where[pk]),
            pins=[p for p in pins if p.origin_session_id == pk],
        )
        for score, _, pk, fresh in top
    ]
    _snippets(hits, rows, terms)
    shown = {h.line.pk for h in hits}
    loose = [p for p in pins if p.origin_session_id not in shown]
    return SearchResult(terms=terms, hits=hits, looked_at=len(rows), pins=loose[:limit])


def _matched(rows: dict[uuid.UUID, _Row], terms: list[str]) -> dict[uuid.UUID, set[str]]:
    """The terms each session's summary and hot topics hold."""
    documents = {pk: _document(row) for pk, row in rows.items()}
    stored = {pk: row.lexemes for pk, row in rows.items() if row.lexemes is not None}
    return relevance_lib.terms_matched(
        documents, terms, {pk: r.topics for pk, r in rows.items()}, stored
    )


@dataclass(frozen=True, slots=True)
class SessionLine:
    """A session as a search answer names it."""

    pk: uuid.UUID
    agent: str
    project: str
    status: str
    started_at: datetime | None
    ended_at: datetime | None


@dataclass(frozen=True, slots=True)
class _Row:
    """What the search reads of a session: when it was last active, its summary, its hot
    topics, and its line in the answer."""

    active: datetime | None
    summary: dict[str, str]
    topics: set[str]
    line: SessionLine
    # PostgreSQL: the stored lexemes of the search's document (its summary's and hot
    # topics', ``search_document``); None elsewhere.
    lexemes: frozenset[str] | None = None


def _when(value: Any) -> datetime | None:
    return UNIX_EPOCH + timedelta(microseconds=value) if type(value) is int else value


def _rows(sessions: QuerySet[Session]) -> dict[uuid.UUID, _Row]:
    """Each session's last activity (its end, else its last event, else its start), summary,
    hot topics and what the answer shows of it, in one query (on PostgreSQL times as
    microseconds and the topics as text: a timestamp or a JSON value costs Python a parse
    each, the topics' parse is cached)."""
    times: list[Any] = [
        Coalesce("ended_at", "last_event_at", "started_at"),
        "started_at",
        "ended_at",
    ]
    topics: Any = "features__hot_topics"
    lexemes: Any = Value(None, output_field=TextField())
    if connection.vendor == "postgresql":
        times = [EpochMicroseconds(t) for t in times]
        topics = Cast(topics, output_field=TextField())
        lexemes = _StoredLexemes("summary__search_document", "features__search_document")
    found: dict[uuid.UUID, _Row] = {}
    columns = [f"summary__{name}" for name in SUMMARY_SEARCH_FIELDS]
    for (
        pk,
        active,
        started,
        ended,
        agent,
        agent_id,
        project,
        status,
        hot,
        stored,
        summary_id,
        *texts,
    ) in sessions.values_list(
        "pk",
        *times,
        "agent__name",
        "agent__external_id",
        "project",
        "status",
        topics,
        lexemes,
        "summary__id",
        *columns,
    ):
        if isinstance(hot, str):
            hot = split_topics(hot)[1]
        found[pk] = _Row(
            active=_when(active),
            summary=dict(zip(SUMMARY_SEARCH_FIELDS, texts, strict=True))
            if summary_id is not None
            else {},
            topics=set(hot) if hot else set(),
            line=SessionLine(pk, agent or agent_id, project, status, _when(started), _when(ended)),
            lexemes=frozenset(stored) if stored is not None else None,
        )
    return found


class _StoredLexemes(Func):
    """PostgreSQL: the lexemes of a session's stored search documents (summary and hot
    topics; either may be missing) as one text array."""

    template = "tsvector_to_array(coalesce(%(expressions)s, ''::tsvector))"
    arg_joiner = ", ''::tsvector) || coalesce("
    output_field = ArrayField(TextField())


# --- which sessions ------------------------------------------------------------------------


def _sessions_with_every_term(
    team_id: int, terms: Sequence[str], filters: SearchFilters, limit: int
) -> dict[uuid.UUID, set[str]]:
    """Sessions (within the filters) whose summary, prompts or final message hold every
    term, newest first, at most ``limit`` from each, with where the terms were found."""
    sql, params = every_term_statement(team_id, terms, filters, limit)
    found: dict[uuid.UUID, set[str]] = {}
    for pk, source in with_index_scans(sql, params):
        found.setdefault(pk if isinstance(pk, uuid.UUID) else uuid.UUID(pk), set()).add(source)
    return found


def every_term_statement(
    team_id: int, terms: Sequence[str], filters: SearchFilters, limit: int
) -> tuple[str, list[Any]]:
    """The statement of ``_sessions_with_every_term``: one SELECT per source, together
    (``tests/memory/test_mcp_search.py`` holds it to the three full-text indexes)."""
    within = filters.q("session__")
    text = " ".join(terms)
    summaries: QuerySet[Any]
    prompts: QuerySet[Any]
    tails: QuerySet[Any]
    if connection.vendor == "postgresql":
        query = SearchQuery(text, search_type="plain", config=SEARCH_CONFIG)
        summaries = Summary.objects.annotate(
            document=SearchVector(*SUMMARY_SEARCH_FIELDS, config=SEARCH_CONFIG)
        ).filter(document=query)
        prompts = LifecycleEvent.objects.annotate(
            document=SearchVector(KT("facts__text"), config=SEARCH_CONFIG)
        ).filter(document=query, kind=EventKind.PROMPT)
        tails = StreamTail.objects.annotate(
            document=SearchVector("final_message", config=SEARCH_CONFIG)
        ).filter(document=query)
    else:
        summaries = Summary.objects.all()
        prompts = LifecycleEvent.objects.filter(kind=EventKind.PROMPT)
        tails = StreamTail.objects.all()
        # By the term's crude stem, so that "migrate" finds "migration" here too.
        for stem in {feature_lib.stem(term) for term in terms}:
            one = Q()
            for name in SUMMARY_SEARCH_FIELDS:
                one |= Q(**{f"{name}__icontains": stem})
            summaries = summaries.filter(one)
            prompts = prompts.filter(facts__text__icontains=stem)
            tails = tails.filter(final_message__icontains=stem)
    scan = limit * SCAN_FACTOR
    sources = (
        ("summary", summaries, "updated_at"),
        ("prompt", prompts, "occurred_at"),
        ("final_message", tails, "captured_at"),
    )
    parts: list[tuple[str, list[Any]]] = []
    for source, rows, moment in sources:
        # No ordering of the rows read (the models' default ones would sort every match).
        matching = rows.filter(within, team_id=team_id).annotate(active=F(moment)).order_by()
        sql, params = matching.values_list("session_id", "active")[:scan].query.sql_with_params()
        # The newest of the rows read: a word most sessions hold matches tens of thousands
        # of rows, and ordering them all before the limit would read every one. A match
        # set larger than ``scan``
        # gives some of its sessions, not its newest; the newest sessions are looked at
        # anyway (``SEARCH_RECENT``).
        n = len(parts)
        parts.append(
            (
                f"SELECT session_id, source FROM (SELECT session_id, %s AS source "  # noqa: S608 - the ORM's own SQL
                f"FROM ({sql}) AS found ORDER BY active DESC NULLS LAST LIMIT %s) AS part{n}",
                [source, *params, limit],
            )
        )
    return (
        " UNION ALL ".join(sql for sql, _ in parts),
        [param for _, params in parts for param in params],
    )


_SCANS_OFF = "SET LOCAL enable_seqscan = off; SET LOCAL enable_indexscan = off; "
_SCANS_BACK = "; SET LOCAL enable_seqscan TO DEFAULT; SET LOCAL enable_indexscan TO DEFAULT"


def with_index_scans(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """The rows of a statement planned, on PostgreSQL, to read the full-text indexes.

    With a limit and a common word the planner walks the table (or its team index) and
    computes each row's text vector until enough rows match, taking that for cheap, where
    a bitmap of the full-text index answers in the same short time whatever the word
    (docs/benchmarks.md, "Why the code is shaped as it is"). The settings go with the
    statement in
    one round trip: several statements in one query run as one transaction of their own
    (or within the caller's), which the settings end with; the last two set them back
    for a caller's transaction, and an error rolls them back.
    """
    with connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            cursor.execute(sql, params)
            return list(cursor.fetchall())
        cursor.execute(_SCANS_OFF + sql + _SCANS_BACK, params)
        raw = cursor.cursor
        while raw.description is None and raw.nextset():
            pass
        return list(raw.fetchall())


# Separators inside paths and names: PostgreSQL's parser keeps ``src/ledger/migrate.py`` as
# one token, where a search for "ledger" should find it.
_JOINERS = re.compile(r"[/\\._:=-]+")


def _document(row: _Row) -> str:
    text = " ".join([*(row.summary.get(f) or "" for f in SUMMARY_SEARCH_FIELDS), *row.topics])
    return _JOINERS.sub(" ", text)


def _words_in(text: str, terms: Sequence[str]) -> set[str]:
    stems = feature_lib.content_stems(text)
    return {t for t in terms if feature_lib.stem(t) in stems}


def _active_pins_matching(team_id: int, terms: Sequence[str]) -> list[Pin]:
    """The team's active pins (at most ``MAX_ACTIVE_PINS`` an agent) that hold a term."""
    pins = Pin.objects.filter(team_id=team_id, unpinned_at__isnull=True).order_by("-pinned_at")
    return [p for p in pins[:PINS_READ] if _words_in(f"{p.label} {p.content}", terms)]


# --- what shows it ---------------------------------------------------------------------------

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def _best_sentence(texts: Sequence[str], terms: Sequence[str]) -> tuple[int, str]:
    best = (0, "")
    for text in texts:
        for sentence in _SENTENCE.split(text or ""):
            sentence = sentence.strip()
            if not sentence:
                continue
            count = len(_words_in(sentence, terms))
            if count > best[0]:
                best = (count, sentence)
    return best


def clip(text: str, limit: int = SNIPPET_CHARS) -> str:
    """At most ``limit`` characters, cut on a word."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " …"


def _snippets(hits: list[Hit], rows: dict[uuid.UUID, _Row], terms: list[str]) -> None:
    """Each hit's line that holds most of its terms: from its summary, its tool uses (one
    query for all hits), its pins, else its summary's request."""
    if not hits:
        return
    pks = [h.line.pk for h in hits]
    used = Q()
    for term in terms:
        used |= Q(input_digest__icontains=term) | Q(tool_name__icontains=term)
    tools: dict[uuid.UUID, list[str]] = {}
    for pk, name, digest in (
        Observation.objects.filter(used, session_id__in=pks)
        .order_by("occurred_at", "id")
        .values_list("session_id", "tool_name", "input_digest")[:200]
    ):
        tools.setdefault(pk, []).append(f"{name} {digest}")
    for hit in hits:
        row = rows.get(hit.line.pk)
        summary = row.summary if row is not None else {}
        candidates = [
            (_best_sentence([summary.get(f) or "" for f in SUMMARY_SEARCH_FIELDS], terms), ""),
            (_best_sentence(tools.get(hit.line.pk, []), terms), "observation"),
            (_best_sentence([f"{p.label}: {p.content}" for p in hit.pins], terms), "pin"),
        ]
        (count, sentence), source = max(candidates, key=lambda c: c[0][0])
        if count and source and source not in hit.where:
            hit.where = sorted({*hit.where, source})
        hit.snippet = clip(sentence if count else summary.get("request") or "")
