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

On PostgreSQL a search is three prepared statements, whatever the team's size: which
sessions are looked at and which terms each holds (``_search_sql``: both parts above, the
terms tested in SQL against the stored search documents, the indexes read only when the
newest sessions do not answer), the pins that may hold a term, and what the answer shows
of the sessions it names. Elsewhere (SQLite) the ORM reads the sessions and Python matches
their words.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import connection
from django.db.models import F, Func, Q, QuerySet, TextField, Value
from django.db.models.functions import Cast, Coalesce

from lifecycle.models import Agent, EventKind, LifecycleEvent, Session
from sessionhub.db.statements import column_of, model_from_row, server_bound_cursor

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
    found: dict[uuid.UUID, _Found]
    rows: dict[uuid.UUID, _Row] | None = None
    if connection.vendor == "postgresql":
        found = _found_postgres(team_id, terms, filters, limit, knobs)
    else:
        found, rows = _found_elsewhere(team_id, terms, filters, limit, knobs)
    matched = {pk: f.matched for pk, f in found.items()}
    where = {pk: f.where for pk, f in found.items()}
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
        active = found[pk].active
        hours = max(0.0, (now - active).total_seconds() / 3600) if active else 1e6
        fresh = recency(hours, continuity)
        score = weights[pk] * (1 - weight + weight * fresh)
        ranked.append((score, active.timestamp() if active else 0.0, pk, fresh))
    ranked.sort(key=lambda r: (-r[0], -r[1]))
    top = ranked[:limit]
    shown = [pk for _, _, pk, _ in top]
    if rows is None:
        # PostgreSQL: what the answer shows of a session (its line, its summary, its tool
        # uses) is read for the sessions it names only, in one statement.
        lines, summaries, tools = _shown_postgres(team_id, shown, terms)
    else:
        lines = {pk: rows[pk].line for pk in shown}
        summaries = {pk: rows[pk].summary for pk in shown}
        tools = _tool_uses(shown, terms)
    hits = [
        Hit(
            line=lines[pk],
            score=score,
            relevance=weights[pk],
            recency=fresh,
            matched=[t for t in terms if t in candidates[pk]],
            where=sorted(where[pk]),
            pins=[p for p in pins if p.origin_session_id == pk],
        )
        for score, _, pk, fresh in top
    ]
    _snippets(hits, summaries, tools, terms)
    named = set(shown)
    loose = [p for p in pins if p.origin_session_id not in named]
    return SearchResult(terms=terms, hits=hits, looked_at=len(found), pins=loose[:limit])


@dataclass(slots=True)
class _Found:
    """A session looked at: when it was last active, the terms its memory holds, and
    where they were found."""

    active: datetime | None
    matched: set[str]
    where: set[str]


def _found_elsewhere(
    team_id: int, terms: list[str], filters: SearchFilters, limit: int, knobs: dict[str, Any]
) -> tuple[dict[uuid.UUID, _Found], dict[uuid.UUID, _Row]]:
    """The sessions looked at, read through the ORM and matched in Python (SQLite: the
    embedded default), with what the answer shows of each."""
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
    return {pk: _Found(row.active, matched[pk], where[pk]) for pk, row in rows.items()}, rows


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


# PostgreSQL: the search in one statement, compiled once per process and filter shape and
# prepared once per connection (``_statement``). The full-text expressions are the
# dashboard's GIN indexes' own (``dashboard/migrations/0001_search_indexes.py``), written
# out as they are there: a value bound as a parameter instead of the literal '' would not
# match the index's expression.
_SUMMARY_TEXT = (
    "to_tsvector('english'::regconfig, COALESCE(x.request, '') || ' ' || "
    "COALESCE(x.investigated, '') || ' ' || COALESCE(x.learned, '') || ' ' || "
    "COALESCE(x.completed, '') || ' ' || COALESCE(x.next_steps, '') || ' ' || "
    "COALESCE(x.final_message, ''))"
)
_PROMPT_TEXT = "to_tsvector('english'::regconfig, COALESCE((x.facts ->> 'text'), ''))"
_TAIL_TEXT = "to_tsvector('english'::regconfig, COALESCE(x.final_message, ''))"
# Which of the terms (their numbers, from 1) a session's stored search documents hold, as
# ``relevance.terms_matched`` asks it: every lexeme of the term (``plainto_tsquery`` is
# their AND; a term of no lexeme matches nothing), or the term is one of its hot topics.
# The session's document and lowered topics are made once (``OFFSET 0`` keeps the planner
# from copying their expressions into each term's test).
_HITS = (
    "ARRAY(SELECT t.n FROM terms t WHERE (numnode(t.q) > 0 AND d.document @@ t.q) "
    "OR COALESCE(d.topics ? t.t, false))"
)
_DOCUMENT = (
    "LEFT JOIN memory_summary m ON m.session_id = {id} "
    "LEFT JOIN memory_sessionfeatures f ON f.session_id = {id} "
    "CROSS JOIN LATERAL (SELECT COALESCE(m.search_document, ''::tsvector) "
    "|| COALESCE(f.search_document, ''::tsvector) AS document, "
    "lower(f.hot_topics::text)::jsonb AS topics OFFSET 0) AS d"
)


@dataclass(frozen=True, slots=True)
class _Shape:
    """Which filters a search has: each shape is one statement."""

    project: bool
    agent: bool
    since: bool
    until: bool
    exclude: bool

    @classmethod
    def of(cls, filters: SearchFilters) -> _Shape:
        return cls(
            bool(filters.project),
            filters.agent is not None,
            filters.since is not None,
            filters.until is not None,
            filters.exclude is not None,
        )


def _filter_sql(shape: _Shape, session: str, exclude: str) -> str:
    """The filters as SQL on the session's columns (alias ``session``); the asking session
    is left out by ``exclude``, the row's own session column. Written as the ORM writes
    ``SearchFilters.q`` (project: case-insensitive, whole or its last part)."""
    parts = []
    if shape.project:
        parts.append(
            f"(UPPER({session}.project::text) = UPPER(%s) "
            f"OR UPPER({session}.project::text) LIKE UPPER(%s))"
        )
    if shape.agent:
        parts.append(f"{session}.agent_id = %s")
    if shape.since:
        parts.append(f"{session}.last_event_at >= %s")
    if shape.until:
        parts.append(f"{session}.started_at <= %s")
    if shape.exclude:
        parts.append(f"{exclude} <> %s")
    return "".join(f" AND {part}" for part in parts)


def _filter_params(filters: SearchFilters) -> list[Any]:
    """The values of ``_filter_sql``'s placeholders, in their order."""
    params: list[Any] = []
    if filters.project:
        name = filters.project.strip().rstrip("/")
        params += [name, "%" + connection.ops.prep_for_like_query("/" + name)]
    if filters.agent is not None:
        params.append(filters.agent.pk)
    if filters.since is not None:
        params.append(filters.since)
    if filters.until is not None:
        params.append(filters.until)
    if filters.exclude is not None:
        params.append(filters.exclude)
    return params


def _every_term_ctes(shape: _Shape, scan: int, limit: int) -> str:
    """PostgreSQL: the sessions whose summary, prompts or final message hold every term
    (``%(query)s``: the terms as one text; ``%(team)s``; the filters' values after each),
    as CTEs: ``every`` (session_id, source), at most ``limit`` from each source.

    Each source's matches are a materialized CTE: planned whole, its full-text index is
    the cheapest way to all of them (planned under the outer limit, a common word made
    the planner walk the table or its team index and compute each row's text vector:
    docs/benchmarks.md), and read only as far as the limit asks. Of a match
    set larger than ``scan`` rows, the newest of some ``scan`` are kept, not its newest:
    ordering them all would read every one (the newest sessions are looked at anyway).
    """
    sources = (
        ("summary", "memory_summary", _SUMMARY_TEXT, "x.updated_at", ""),
        (
            "prompt",
            "lifecycle_lifecycleevent",
            _PROMPT_TEXT,
            "x.occurred_at",
            "AND x.kind = 'prompt' ",
        ),
        ("final_message", "memory_streamtail", _TAIL_TEXT, "x.captured_at", ""),
    )
    # The session's row only for a filter on its columns: the asking session is left out
    # by the row's own session column.
    joined = shape.project or shape.agent or shape.since or shape.until
    ctes = []
    parts = []
    for n, (source, table, text, moment, kind) in enumerate(sources):
        join = " JOIN lifecycle_session s ON s.id = x.session_id" if joined else ""
        where = _filter_sql(shape, "s", "x.session_id")
        ctes.append(
            f"found{n} AS MATERIALIZED (SELECT x.session_id, {moment} AS active "  # noqa: S608 - constants only
            f"FROM {table} x{join} WHERE {text} @@ plainto_tsquery('english'::regconfig, %s) "
            f"{kind}AND x.team_id = %s{where})"
        )
        parts.append(
            f"(SELECT session_id, '{source}' AS source FROM (SELECT * FROM found{n} LIMIT {scan}) "  # noqa: S608 - constants only
            f"AS f ORDER BY active DESC NULLS LAST LIMIT {limit})"
        )
    ctes.append("every AS (" + " UNION ALL ".join(parts) + ")")
    return ", ".join(ctes)


def _every_term_params(team_id: int, terms: Sequence[str], filters: SearchFilters) -> list[Any]:
    return [" ".join(terms), team_id, *_filter_params(filters)] * 3


@functools.cache
def _search_sql(shape: _Shape, recent: int, matches: int) -> str:
    """The whole search on PostgreSQL, one statement: the team's newest ``recent`` sessions
    (within the filters) with the terms each holds; unless ``%(limit)s`` of them hold every
    term, the sessions whose texts hold every term (``_every_term_ctes``); one row per
    session looked at, the newest first, then the older ones found."""
    return (
        "WITH terms AS MATERIALIZED (SELECT u.n::int AS n, u.t, "  # noqa: S608 - constants only
        "plainto_tsquery('english'::regconfig, u.t) AS q "
        "FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, n)), "
        "recent AS MATERIALIZED (SELECT id, row_number() OVER () AS ord FROM ("
        "SELECT s.id FROM lifecycle_session s "
        f"WHERE s.team_id = %s{_filter_sql(shape, 's', 's.id')} "
        f"ORDER BY s.started_at DESC LIMIT {recent}) AS r), "
        f"matched AS MATERIALIZED (SELECT r.id, r.ord, {_HITS} AS hits, "
        f"m.id IS NOT NULL AS summarised FROM recent r {_DOCUMENT.format(id='r.id')}), "
        f"{_every_term_ctes(shape, matches * SCAN_FACTOR, matches)}, "
        "older AS MATERIALIZED (SELECT e.session_id AS id, array_agg(DISTINCT e.source) AS sources "
        "FROM every e WHERE (SELECT count(*) FROM matched WHERE cardinality(hits) = %s) < %s "
        "GROUP BY e.session_id) "
        "SELECT c.id, (EXTRACT(EPOCH FROM COALESCE(s.ended_at, s.last_event_at, s.started_at)) "
        "* 1000000)::bigint, c.hits, c.summarised, o.sources FROM ("
        "SELECT id, ord, hits, summarised FROM matched UNION ALL "
        f"SELECT o.id, NULL, {_HITS}, m.id IS NOT NULL FROM older o {_DOCUMENT.format(id='o.id')} "
        "WHERE o.id NOT IN (SELECT id FROM recent)) AS c "
        "JOIN lifecycle_session s ON s.id = c.id AND s.team_id = %s "
        "LEFT JOIN older o ON o.id = c.id ORDER BY c.ord NULLS LAST"
    )


def _found_postgres(
    team_id: int, terms: list[str], filters: SearchFilters, limit: int, knobs: dict[str, Any]
) -> dict[uuid.UUID, _Found]:
    """The sessions looked at and the terms each holds, in one prepared statement."""
    sql = _search_sql(_Shape.of(filters), knobs["SEARCH_RECENT"], knobs["SEARCH_MATCHES"])
    params = [
        terms,
        team_id,
        *_filter_params(filters),
        *_every_term_params(team_id, terms, filters),
        len(terms),
        limit,
        team_id,
    ]
    with server_bound_cursor(prepared=True) as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    found: dict[uuid.UUID, _Found] = {}
    for pk, active, hits, summarised, sources in rows:
        matched = {terms[n - 1] for n in hits}
        where = {"summary" if summarised else "topics"} if matched else set()
        if sources:
            # The index found every term in these (a prompt's or a final message's words
            # the summary may not repeat).
            matched = set(terms)
            where.update(sources)
        found[pk] = _Found(_when(active), matched, where)
    return found


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
    """The statement of the sessions whose summary, prompts or final message hold every
    term: one SELECT per source, together (``tests/memory/test_mcp_search.py`` holds it to
    the three full-text indexes). On PostgreSQL the search's own statement holds it
    (``_search_sql``); elsewhere ``_sessions_with_every_term`` runs it."""
    if connection.vendor == "postgresql":
        ctes = _every_term_ctes(_Shape.of(filters), limit * SCAN_FACTOR, limit)
        return (
            f"WITH {ctes} SELECT session_id, source FROM every",  # noqa: S608 - constants only
            _every_term_params(team_id, terms, filters),
        )
    within = filters.q("session__")
    summaries: QuerySet[Any] = Summary.objects.all()
    prompts: QuerySet[Any] = LifecycleEvent.objects.filter(kind=EventKind.PROMPT)
    tails: QuerySet[Any] = StreamTail.objects.all()
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


def with_index_scans(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """The rows of a statement of ``every_term_statement``'s: on PostgreSQL its full-text
    parts are materialized CTEs, which the planner plans whole, so that each reads its
    full-text index whatever the outer limit (planned under the limit, a common word made
    it walk the table or its team index and compute each row's text vector, where a
    bitmap of the index answers in a few ms: docs/benchmarks.md). No planner
    setting is changed: the search's own statement, which holds the same parts, is
    prepared, and a prepared statement is one statement."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


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
    """The team's active pins (at most ``MAX_ACTIVE_PINS`` an agent) that hold a term.

    On PostgreSQL only the pins whose label or content hold a term's stem (whatever the
    case: a word whose stem is the term's holds it) are read, in a prepared statement;
    each is then asked as elsewhere."""
    if connection.vendor != "postgresql":
        pins = Pin.objects.filter(team_id=team_id, unpinned_at__isnull=True).order_by("-pinned_at")
        return [p for p in pins[:PINS_READ] if _words_in(f"{p.label} {p.content}", terms)]
    patterns = [_contains(feature_lib.stem(term)) for term in terms]
    with server_bound_cursor(prepared=True) as cursor:
        cursor.execute(_pins_sql(), [team_id, patterns, patterns])
        read = [model_from_row(Pin, row) for row in cursor.fetchall()]
    return [p for p in read if _words_in(f"{p.label} {p.content}", terms)]


def _contains(text: str) -> str:
    """A LIKE pattern for a text that holds ``text`` (as the ORM's ``contains`` writes it)."""
    return f"%{connection.ops.prep_for_like_query(text)}%"


@functools.cache
def _pins_sql() -> str:
    quote = connection.ops.quote_name
    columns = ", ".join(f"p.{quote(column_of(f))}" for f in Pin._meta.concrete_fields)
    return (
        f"SELECT {columns} FROM {quote(Pin._meta.db_table)} p "  # noqa: S608 - constants only
        "WHERE p.team_id = %s AND p.unpinned_at IS NULL "
        "AND (p.label ILIKE ANY(%s::text[]) OR p.content ILIKE ANY(%s::text[])) "
        f"ORDER BY p.pinned_at DESC LIMIT {PINS_READ}"
    )


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


_SHOWN_SQL = (
    "SELECT 0, s.id, (EXTRACT(EPOCH FROM s.started_at) * 1000000)::bigint, "
    "(EXTRACT(EPOCH FROM s.ended_at) * 1000000)::bigint, a.name, a.external_id, s.project, "
    "s.status, m.id, "
    + ", ".join(f"m.{name}" for name in SUMMARY_SEARCH_FIELDS)
    + ", 0::bigint FROM lifecycle_session s JOIN lifecycle_agent a ON a.id = s.agent_id "
    "LEFT JOIN memory_summary m ON m.session_id = s.id "
    "WHERE s.id = ANY(%s::uuid[]) AND s.team_id = %s "
    "UNION ALL SELECT 1, o.session_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
    "o.tool_name::text, o.input_digest"
    + ", NULL"
    * (len(SUMMARY_SEARCH_FIELDS) - 2)
    + ", row_number() OVER () FROM (SELECT o.session_id, o.tool_name, o.input_digest "
    "FROM memory_observation o WHERE o.session_id = ANY(%s::uuid[]) AND o.team_id = %s "
    "AND (UPPER(o.input_digest) LIKE ANY(%s::text[]) OR UPPER(o.tool_name::text) "
    "LIKE ANY(%s::text[])) ORDER BY o.occurred_at, o.id LIMIT 200) AS o "
    "ORDER BY 1, " + str(len(SUMMARY_SEARCH_FIELDS) + 10)
)


def _shown_postgres(
    team_id: int, pks: list[uuid.UUID], terms: Sequence[str]
) -> tuple[
    dict[uuid.UUID, SessionLine], dict[uuid.UUID, dict[str, str]], dict[uuid.UUID, list[str]]
]:
    """PostgreSQL: the answer's sessions, their summaries and the tool uses that name a
    term (as ``_tool_uses`` reads them), in one prepared statement."""
    lines: dict[uuid.UUID, SessionLine] = {}
    summaries: dict[uuid.UUID, dict[str, str]] = {}
    tools: dict[uuid.UUID, list[str]] = {}
    if not pks:
        return lines, summaries, tools
    patterns = [_contains(term).upper() for term in terms]
    params = [pks, team_id, pks, team_id, patterns, patterns]
    with server_bound_cursor(prepared=True) as cursor:
        cursor.execute(_SHOWN_SQL, params)
        rows = cursor.fetchall()
    for kind, pk, started, ended, agent, agent_id, project, status, summary_id, *rest in rows:
        texts = rest[: len(SUMMARY_SEARCH_FIELDS)]
        if kind:
            tools.setdefault(pk, []).append(f"{texts[0]} {texts[1]}")
            continue
        line = SessionLine(pk, agent or agent_id, project, status, _when(started), _when(ended))
        lines[pk] = line
        summaries[pk] = (
            dict(zip(SUMMARY_SEARCH_FIELDS, texts, strict=True)) if summary_id is not None else {}
        )
    return lines, summaries, tools


def _tool_uses(pks: list[uuid.UUID], terms: Sequence[str]) -> dict[uuid.UUID, list[str]]:
    """The tool uses of these sessions whose tool or input names a term, oldest first (at
    most 200 in all), as "tool input" lines."""
    tools: dict[uuid.UUID, list[str]] = {}
    if not pks:
        return tools
    used = Q()
    for term in terms:
        used |= Q(input_digest__icontains=term) | Q(tool_name__icontains=term)
    for pk, name, digest in (
        Observation.objects.filter(used, session_id__in=pks)
        .order_by("occurred_at", "id")
        .values_list("session_id", "tool_name", "input_digest")[:200]
    ):
        tools.setdefault(pk, []).append(f"{name} {digest}")
    return tools


def _snippets(
    hits: list[Hit],
    summaries: dict[uuid.UUID, dict[str, str]],
    tools: dict[uuid.UUID, list[str]],
    terms: list[str],
) -> None:
    """Each hit's line that holds most of its terms: from its summary, its tool uses, its
    pins, else its summary's request."""
    for hit in hits:
        summary = summaries.get(hit.line.pk, {})
        candidates = [
            (_best_sentence([summary.get(f) or "" for f in SUMMARY_SEARCH_FIELDS], terms), ""),
            (_best_sentence(tools.get(hit.line.pk, []), terms), "observation"),
            (_best_sentence([f"{p.label}: {p.content}" for p in hit.pins], terms), "pin"),
        ]
        (count, sentence), source = max(candidates, key=lambda c: c[0][0])
        if count and source and source not in hit.where:
            hit.where = sorted({*hit.where, source})
        hit.snippet = clip(sentence if count else summary.get("request") or "")
