"""Reads behind the dashboard, always within the teams the user is a member of.

Every page is built from a fixed number of queries, whatever the number of sessions: lists
are sliced, long per-session lists are capped, and related rows are fetched in one go.
Staff users get nothing more here than any member: the dashboard is scoped by Membership.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any, cast

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.contrib.postgres.search import SearchQuery, SearchVector
from django.core.cache import cache
from django.db import connection
from django.db.models import (
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    Q,
    QuerySet,
    Sum,
    Value,
)
from django.db.models.fields.json import KT
from django.db.models.functions import TruncDate, TruncHour
from django.utils import timezone

from lifecycle import selectors as lifecycle_selectors
from lifecycle.models import (
    OPEN_STATUSES,
    Agent,
    EventKind,
    LifecycleEvent,
    Session,
    SessionStatus,
    foreground_q,
)
from memory.models import (
    ContinuityRecord,
    LlmUsage,
    McpCall,
    Pin,
    StreamTail,
    Summary,
)
from memory.selectors import SessionMemory, active_pins, session_memory
from memory.summaries import SECTIONS
from sessionhub.models import ApiToken, Team
from sessionhub.refusals import refusals_fold

PAGE_SIZE = 50
COUNT_CAP = 1000
TIMELINE_LIMIT = 1000
OBSERVATION_LIMIT = 200
CHAIN_LIMIT = 12
RECORD_LIMIT = 20
GAP_SECONDS = 300
LIVE_IDS_MAX = 100
CHANNEL_CACHE_SECONDS = 300
SEARCH_CONFIG = "english"
# What the search reads of a summary. dashboard/migrations/0001_search_indexes.py indexes
# exactly this expression: change both together (a test checks the index is used).
SUMMARY_SEARCH_FIELDS = (*SECTIONS, "final_message")

User = AbstractBaseUser | AnonymousUser


# --- teams -------------------------------------------------------------------------------


def user_teams(user: User) -> list[Team]:
    """The teams a user is a member of, by name."""
    if not user.is_authenticated:
        return []
    return list(Team.objects.filter(memberships__user_id=user.pk).order_by("name", "pk"))


def tokens_of(team: Team) -> list[ApiToken]:
    """A team's API tokens, newest first, their refused requests brought up to date."""
    tokens = list(ApiToken.objects.filter(team=team).order_by("revoked_at", "-created_at"))
    refusals_fold(tokens)
    return tokens


def team_pick(teams: Sequence[Team], slug: str | None) -> Team | None:
    """The team the switcher chose when the user is still a member, else the first."""
    for team in teams:
        if team.slug == slug:
            return team
    return teams[0] if teams else None


_NO_UUID = uuid.UUID(int=0)  # a key no row has


def _as_uuid(value: object) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


# --- the session list ---------------------------------------------------------------------

SORTS: dict[str, tuple[str, tuple[Any, ...]]] = {
    # key: (label, ordering). "newest" and "oldest" walk the (team, -started_at) index.
    "newest": ("Newest first", ("-started_at", "-id")),
    "oldest": ("Oldest first", ("started_at", "id")),
    "active": ("Recently active", (F("last_event_at").desc(nulls_last=True), "-id")),
    "events": ("Most events", ("-event_count", "-id")),
    "compactions": ("Most compactions", ("-compaction_count", "-id")),
}


def agents_for_filter(team: Team, limit: int = 500) -> list[Agent]:
    """The team's agents for the filter menu."""
    return list(Agent.objects.filter(team=team).order_by("name", "external_id")[:limit])


def channels_for_filter(team: Team) -> list[str]:
    """The channels the team's sessions came through, cached for a few minutes: the
    DISTINCT reads every session of the team (60 ms with 100,000 of them)."""
    key = f"dashboard:channels:{team.pk}"
    channels: list[str] | None = cache.get(key)
    if channels is None:
        channels = list(
            Session.objects.filter(team=team)
            .exclude(channel="")
            .order_by("channel")
            .values_list("channel", flat=True)
            .distinct()[:100]
        )
        cache.set(key, channels, CHANNEL_CACHE_SECONDS)
    return channels


def _session_people(team: Team, limit: int = 300) -> dict[str, list[str]]:
    """The developers and the projects of the team's sessions (the filter menus'
    choices), in one DISTINCT, cached for a few minutes like the channels."""
    key = f"dashboard:people:{team.pk}"
    found: dict[str, list[str]] | None = cache.get(key)
    if found is None:
        pairs = list(
            Session.objects.filter(team=team)
            .values_list("developer", "project")
            .distinct()
            .order_by()[: limit * 10]
        )
        found = {
            "developer": sorted({d for d, _ in pairs if d})[:limit],
            "project": sorted({p for _, p in pairs if p})[:limit],
        }
        cache.set(key, found, CHANNEL_CACHE_SECONDS)
    return found


def developers_for_filter(team: Team) -> list[str]:
    """Who ran the team's sessions (OS user@host, or the token's gateway)."""
    return _session_people(team)["developer"]


def projects_for_filter(team: Team) -> list[str]:
    """The projects of the team's sessions (git remote, else working directory)."""
    return _session_people(team)["project"]


def _search_postgres(team: Team, text: str) -> Q:
    query = SearchQuery(text, search_type="websearch", config=SEARCH_CONFIG)
    prompts = (
        LifecycleEvent.objects.filter(team=team, kind=EventKind.PROMPT)
        .annotate(document=SearchVector(KT("facts__text"), config=SEARCH_CONFIG))
        .filter(document=query)
        .values("session_id")
    )
    summaries = (
        Summary.objects.filter(team=team)
        .annotate(document=SearchVector(*SUMMARY_SEARCH_FIELDS, config=SEARCH_CONFIG))
        .filter(document=query)
        .values("session_id")
    )
    tails = (
        StreamTail.objects.filter(team=team)
        .annotate(document=SearchVector("final_message", config=SEARCH_CONFIG))
        .filter(document=query)
        .values("session_id")
    )
    # Three IN lists, ORed: PostgreSQL hashes each list once (read through the GIN
    # indexes) and walks the team's sessions newest first until the page is full. (A
    # UNION of the ids was measured slower: it made the planner scan every session.)
    return Q(pk__in=prompts) | Q(pk__in=summaries) | Q(pk__in=tails)


def _search_plain(team: Team, text: str) -> Q:
    prompts = LifecycleEvent.objects.filter(
        team=team, kind=EventKind.PROMPT, facts__text__icontains=text
    ).values("session_id")
    in_summary = Q()
    for name in SUMMARY_SEARCH_FIELDS:
        in_summary |= Q(**{f"{name}__icontains": text})
    summaries = Summary.objects.filter(in_summary, team=team).values("session_id")
    tails = StreamTail.objects.filter(team=team, final_message__icontains=text).values("session_id")
    return Q(pk__in=prompts) | Q(pk__in=summaries) | Q(pk__in=tails)


def sessions_filter(
    *,
    team: Team,
    q: str = "",
    agent: Any = None,
    status: str = "",
    channel: str = "",
    source: str = "",
    end_reason: str = "",
    developer: str = "",
    project: str = "",
    started_from: date | None = None,
    started_to: date | None = None,
    sort: str = "newest",
) -> QuerySet[Session]:
    """The team's sessions narrowed by the list's filters and full-text search, sorted."""
    sessions = Session.objects.filter(team=team).select_related("agent")
    agent_pk = _as_uuid(agent) if agent else None
    if agent:
        sessions = sessions.filter(agent_id=agent_pk) if agent_pk else sessions.none()
    if status:
        sessions = sessions.filter(status=status)
    if channel:
        sessions = sessions.filter(channel=channel)
    if source:
        sessions = sessions.filter(source=source)
    if end_reason:
        sessions = sessions.filter(end_reason=end_reason)
    if developer:
        sessions = sessions.filter(developer=developer)
    if project:
        sessions = sessions.filter(project=project)
    tz = timezone.get_current_timezone()
    if started_from:
        sessions = sessions.filter(
            started_at__gte=datetime.combine(started_from, time.min, tzinfo=tz)
        )
    if started_to:
        sessions = sessions.filter(
            started_at__lt=datetime.combine(started_to + timedelta(days=1), time.min, tzinfo=tz)
        )
    text = " ".join(q.split())[:200]
    if text:
        search = _search_postgres if connection.vendor == "postgresql" else _search_plain
        sessions = sessions.filter(search(team, text))
    return sessions.order_by(*SORTS.get(sort, SORTS["newest"])[1])


@dataclass
class SessionPage:
    """One page of a session list, counted only as far as ``COUNT_CAP``."""

    rows: list[Session]
    number: int
    has_next: bool
    start: int
    end: int
    total: int | None
    total_capped: bool
    headlines: dict[Any, str] = field(default_factory=dict)

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def pages(self) -> int | None:
        if self.total_capped or self.total is None:
            return None
        return max(1, -(-self.total // PAGE_SIZE))


def sessions_page(
    sessions: QuerySet[Session], number: int = 1, *, count: bool = True
) -> SessionPage:
    """A page of sessions without a COUNT(*) over everything: counting stops at the cap,
    and does not happen at all with ``count=False`` (full-text search, where even a
    capped count walks every session of the team: 130 ms with 100,000)."""
    number = max(1, number)
    offset = (number - 1) * PAGE_SIZE
    rows = list(sessions[offset : offset + PAGE_SIZE + 1])
    has_next = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    if not has_next and (rows or number == 1):
        total, capped = offset + len(rows), False
    elif not count:
        total, capped = None, False
    else:
        # In the (team, -started_at) index's order, whatever the page's: the first rows
        # of the team's index, never a scan of the table that stops by chance.
        total = sessions.order_by("-started_at")[: COUNT_CAP + 1].count()
        capped = total > COUNT_CAP
        total = min(total, COUNT_CAP)
    headlines = session_headlines([s.pk for s in rows])
    return SessionPage(
        rows=rows,
        number=number,
        has_next=has_next,
        start=offset + 1 if rows else 0,
        end=offset + len(rows),
        total=total,
        total_capped=capped,
        headlines=headlines,
    )


def session_headlines(session_ids: Sequence[Any]) -> dict[Any, str]:
    """A line saying what each session was about: its summary's request (one query)."""
    if not session_ids:
        return {}
    rows = Summary.objects.filter(session_id__in=session_ids).values_list(
        "session_id", "request", "final_message"
    )
    return {sid: (request or final)[:240] for sid, request, final in rows if request or final}


# --- the overview --------------------------------------------------------------------------

# The buckets the overview counts the window's sessions in: (label, low, high), high
# excluded for durations (seconds) and included for compactions; None: no upper bound.
DURATION_BUCKETS: list[tuple[str, float, float | None]] = [
    ("< 1 min", 0, 60),
    ("1-5 min", 60, 300),
    ("5-15 min", 300, 900),
    ("15-60 min", 900, 3600),
    ("1-4 h", 3600, 4 * 3600),
    ("4-24 h", 4 * 3600, 86400),
    ("> 1 day", 86400, None),
]
COMPACTION_BUCKETS: list[tuple[str, int, int | None]] = [
    ("0", 0, 0),
    ("1", 1, 1),
    ("2", 2, 2),
    ("3", 3, 3),
    ("4", 4, 4),
    ("5+", 5, None),
]
HOURS = 48  # the events-per-hour chart's reach
TOP = 8  # agents and projects in the overview's top lists, crashed sessions listed


def overview_window(
    team: Team, since: datetime, *, developer: str = "", project: str = ""
) -> QuerySet[Session]:
    """The team's foreground sessions started since a moment, of one developer or one
    project when asked (background runs, heartbeats..., are not the team's work)."""
    return Session.objects.filter(
        foreground_q(), _narrowed(developer, project), team=team, started_at__gte=since
    )


def _narrowed(developer: str, project: str) -> Q:
    narrow = Q()
    if developer:
        narrow &= Q(developer=developer)
    if project:
        narrow &= Q(project=project)
    return narrow


def window_totals(window: QuerySet[Session]) -> dict[str, Any]:
    """One aggregate over the window: totals, and a count per duration and compaction
    bucket (``d0``... and ``c0``...)."""
    duration = ExpressionWrapper(F("ended_at") - F("started_at"), output_field=DurationField())
    aggregates: dict[str, Any] = {
        "sessions": Count("id"),
        "crashed": Count("id", filter=Q(status=SessionStatus.CRASHED)),
        "events": Sum("event_count"),
        "compactions": Sum("compaction_count"),
    }
    for i, (_, low, high) in enumerate(DURATION_BUCKETS):
        cond = Q(ended_at__isnull=False, duration__gte=timedelta(seconds=low))
        if high is not None:
            cond &= Q(duration__lt=timedelta(seconds=high))
        aggregates[f"d{i}"] = Count("id", filter=cond)
    for i, (_, low, high) in enumerate(COMPACTION_BUCKETS):
        cond = Q(compaction_count__gte=low)
        if high is not None:
            cond &= Q(compaction_count__lte=high)
        aggregates[f"c{i}"] = Count("id", filter=cond)
    return window.annotate(duration=duration).aggregate(**aggregates)


def open_sessions_by_status(
    team: Team, *, developer: str = "", project: str = ""
) -> dict[str, int]:
    """How many of the team's foreground sessions are open right now, per status."""
    return dict(
        Session.objects.filter(
            foreground_q(), _narrowed(developer, project), team=team, status__in=OPEN_STATUSES
        )
        .values_list("status")
        .annotate(n=Count("id"))
        .order_by()
    )


def sessions_per_day(window: QuerySet[Session]) -> list[tuple[date, str, int]]:
    """(day, status, sessions) of the window, by the day they started."""
    return list(
        window.annotate(day=TruncDate("started_at"))
        .values_list("day", "status")
        .annotate(n=Count("id"))
        .order_by()
    )


def events_per_hour(team: Team, hour_start: datetime) -> dict[datetime, int]:
    """The team's events received per hour since a whole hour."""
    return dict(
        LifecycleEvent.objects.filter(team=team, received_at__gte=hour_start)
        .annotate(hour=TruncHour("received_at"))
        .values_list("hour")
        .annotate(n=Count("id"))
        .order_by()
    )


def top_agents(window: QuerySet[Session], limit: int = TOP) -> list[tuple[Any, ...]]:
    """(agent id, name, external id, developer, sessions) of the window's busiest agents."""
    return list(
        window.values_list("agent_id", "agent__name", "agent__external_id", "agent__developer")
        .annotate(n=Count("id"))
        .order_by("-n", "agent__name")[:limit]
    )


def top_projects(window: QuerySet[Session], limit: int = TOP) -> list[tuple[str, int]]:
    """(project, sessions) of the window's busiest projects."""
    return list(
        window.exclude(project="")
        .values_list("project")
        .annotate(n=Count("id"))
        .order_by("-n", "project")[:limit]
    )


def crashed_sessions(window: QuerySet[Session], limit: int = TOP) -> list[Session]:
    """The window's crashed sessions, newest first, with their agents."""
    return list(
        window.filter(status=SessionStatus.CRASHED)
        .select_related("agent")
        .order_by("-started_at", "-id")[:limit]
    )


TOKEN_SUMS = {
    "input": Sum("input_tokens"),
    "output": Sum("output_tokens"),
    "cache_read": Sum("cache_read_tokens"),
    "cache_write": Sum("cache_write_tokens"),
    "sessions": Count("id"),
}


def token_usage_rows(window: QuerySet[Session]) -> list[dict[str, Any]]:
    """The window's tokens by kind (``input``... as TOKEN_SUMS names them) and sessions,
    one aggregate row per day, project, developer, agent and model."""
    rows = (
        window.annotate(day=TruncDate("started_at"))
        .values(
            "day", "project", "developer", "agent_id", "agent__name", "agent__developer", "model"
        )
        .annotate(**TOKEN_SUMS)
        .order_by()
    )
    # The plugin's row type leaves out the sums (annotated from a dict): plain dicts here.
    return cast(list[dict[str, Any]], list(rows))


def summary_tokens_per_day(team: Team, first_day: date) -> dict[date, int]:
    """The tokens SessionHub's own summaries of the team spent each day since a day."""
    return dict(LlmUsage.objects.filter(team=team, day__gte=first_day).values_list("day", "tokens"))


@dataclass
class OverviewRows:
    """What the overview page reads of a team, for ``dashboard.presenters.overview``."""

    days: int
    first_day: date
    since: datetime  # the window: sessions started since (the first day's midnight)
    hour_start: datetime  # the events-per-hour chart's first hour
    developer: str
    project: str
    totals: dict[str, Any]
    open_now: dict[str, int]
    per_day: list[tuple[date, str, int]]
    per_hour: dict[datetime, int]
    top_agents: list[tuple[Any, ...]]
    top_projects: list[tuple[str, int]]
    crashed: list[Session]
    token_rows: list[dict[str, Any]]
    summary_tokens: dict[date, int] | None  # the team's whole spend: None when narrowed


def overview_rows(
    team: Team,
    *,
    days: int = 14,
    now: datetime | None = None,
    developer: str = "",
    project: str = "",
) -> OverviewRows:
    """The overview's rows over the last ``days`` days: a handful of aggregate queries, of
    one developer's or one project's sessions when asked."""
    now = now or timezone.now()
    first_day = timezone.localdate(now) - timedelta(days=days - 1)
    since = datetime.combine(first_day, time.min, tzinfo=timezone.get_current_timezone())
    hour_start = (now - timedelta(hours=HOURS - 1)).replace(minute=0, second=0, microsecond=0)
    window = overview_window(team, since, developer=developer, project=project)
    return OverviewRows(
        days=days,
        first_day=first_day,
        since=since,
        hour_start=hour_start,
        developer=developer,
        project=project,
        totals=window_totals(window),
        open_now=open_sessions_by_status(team, developer=developer, project=project),
        per_day=sessions_per_day(window),
        per_hour=events_per_hour(team, hour_start),
        top_agents=top_agents(window),
        top_projects=top_projects(window),
        crashed=crashed_sessions(window),
        token_rows=token_usage_rows(window),
        summary_tokens=(None if developer or project else summary_tokens_per_day(team, first_day)),
    )


# --- one session ----------------------------------------------------------------------------


def session_visible(teams: Sequence[Team], session_id: object) -> Session | None:
    """A session of one of these teams, or None (another team's session is not there)."""
    pk = _as_uuid(session_id)
    if pk is None or not teams:
        return None
    return (
        Session.objects.filter(pk=pk, team__in=[t.pk for t in teams])
        .select_related("agent", "team", "previous_session", "continued_by")
        .first()
    )


def agent_visible(teams: Sequence[Team], agent_id: object) -> Agent | None:
    """An agent of one of these teams, or None."""
    pk = _as_uuid(agent_id)
    if pk is None or not teams:
        return None
    return (
        Agent.objects.filter(pk=pk, team__in=[t.pk for t in teams]).select_related("team").first()
    )


def pin_visible(teams: Sequence[Team], pin_id: int) -> Pin | None:
    """A pin of one of these teams, or None."""
    if not teams:
        return None
    return (
        Pin.objects.filter(pk=pin_id, team__in=[t.pk for t in teams])
        .select_related("agent", "agent__team")
        .first()
    )


def events_after(session: Session, after_id: int, limit: int = 200) -> list[LifecycleEvent]:
    """Events stored after a given one (by id), for the live timeline."""
    return list(
        LifecycleEvent.objects.filter(session=session, id__gt=after_id).order_by("id")[:limit]
    )


@dataclass
class CandidateView:
    """A scored candidate of a continuity record, with its session when still there."""

    data: dict[str, Any]
    session: Session | None

    @property
    def used(self) -> bool:
        return bool(self.data.get("used"))


@dataclass
class RecordView:
    """A continuity record with its candidates resolved to sessions."""

    record: ContinuityRecord
    candidates: list[CandidateView]
    sources: list[Session]


def continuity_records(session: Session) -> list[RecordView]:
    """The preambles served to a session, newest first, with scored candidates (3 queries)."""
    records = list(
        ContinuityRecord.objects.filter(session=session)
        .select_related("requested_by_user")
        .prefetch_related("sources")
        .order_by("-created_at", "-id")[:RECORD_LIMIT]
    )
    wanted = {
        pk
        for record in records
        for candidate in record.candidates or []
        if isinstance(candidate, dict) and (pk := _as_uuid(candidate.get("session_id"))) is not None
    }
    known = (
        {s.pk: s for s in Session.objects.filter(team_id=session.team_id, pk__in=wanted)}
        if wanted
        else {}
    )
    views = []
    for record in records:
        candidates = [
            CandidateView(c, known.get(_as_uuid(c.get("session_id")) or _NO_UUID))
            for c in record.candidates or []
            if isinstance(c, dict)
        ]
        candidates.sort(key=lambda c: (not c.used, -(c.data.get("score") or 0)))
        sources = [s for s in record.sources.all() if s.team_id == session.team_id]
        views.append(RecordView(record=record, candidates=candidates, sources=sources))
    return views


@dataclass
class McpCallView:
    """An MCP call the session made, with the sessions its answer named."""

    call: McpCall
    returned: list[Session]


@dataclass
class McpCalls:
    """The MCP calls a session made, and the ones whose answers named it."""

    made: list[McpCallView]
    handed_out: list[McpCall]


def mcp_calls(session: Session) -> McpCalls:
    """The session's MCP record, newest first, ``RECORD_LIMIT`` of each (two queries: the
    calls of both kinds, then the sessions named by the ones it made)."""
    team_id = session.team_id
    made = (
        McpCall.objects.filter(session=session, team_id=team_id)
        .annotate(made=Value(True))
        .order_by()
    )
    named = (
        McpCall.objects.filter(returned=session, team_id=team_id)
        .annotate(made=Value(False))
        .order_by()
    )
    # The calls it made first: a session named by very many calls still shows its own.
    rows: list[McpCall] = list(
        made.union(named, all=True).order_by("-made", "-created_at", "-id")[: 2 * RECORD_LIMIT]
    )
    mine = [c for c in rows if getattr(c, "made", False)][:RECORD_LIMIT]
    returned: dict[int, list[Session]] = {c.pk: [] for c in mine}
    if mine:
        through = McpCall.returned.through
        for link in through.objects.filter(
            mcpcall_id__in=returned, session__team_id=team_id
        ).select_related("session"):
            returned[link.mcpcall_id].append(link.session)
    return McpCalls(
        made=[McpCallView(c, returned[c.pk]) for c in mine],
        handed_out=[c for c in rows if not getattr(c, "made", False)][:RECORD_LIMIT],
    )


def continued_from(team: Team, session: Session, limit: int = CHAIN_LIMIT) -> list[Session]:
    """The team's sessions that a manual continue handed over to this one, newest first."""
    return list(
        Session.objects.filter(continued_by=session, team=team).order_by("-started_at")[:limit]
    )


def session_chain(team: Team, session: Session) -> list[Session]:
    """The session's chain (one query, at most ``CHAIN_LIMIT`` links), the team's only."""
    return [
        s
        for s in lifecycle_selectors.session_chain(session, limit=CHAIN_LIMIT)
        if s.team_id == team.pk
    ]


@dataclass
class SessionRows:
    """What the session page reads, for ``dashboard.presenters.session_detail``."""

    session: Session
    events: list[LifecycleEvent]  # the first TIMELINE_LIMIT
    truncated: bool  # whether there were more
    chain: list[Session]
    memory: SessionMemory
    continued_from: list[Session]
    records: list[RecordView]
    mcp: McpCalls


def session_rows(team: Team, session: Session) -> SessionRows:
    """The session page's rows: timeline, memory, pins, chain and continuity, a bounded
    number of queries whatever the session's size. ``team`` is the session's."""
    events = list(lifecycle_selectors.events_for_session(session)[: TIMELINE_LIMIT + 1])
    return SessionRows(
        session=session,
        events=events[:TIMELINE_LIMIT],
        truncated=len(events) > TIMELINE_LIMIT,
        chain=session_chain(team, session),
        memory=session_memory(session, observation_limit=OBSERVATION_LIMIT, pins=True),
        continued_from=continued_from(team, session),
        records=continuity_records(session),
        mcp=mcp_calls(session),
    )


# --- agents --------------------------------------------------------------------------------


def agents_of(
    team: Team, *, project: str = "", developer: str = "", limit: int = 500
) -> list[Agent]:
    """The team's agents, most recently seen first; with a project or a developer, those
    that worked on it or that they ran (by their sessions)."""
    agents = Agent.objects.filter(team=team)
    if project:
        agents = agents.filter(
            pk__in=Session.objects.filter(team=team, project=project).values("agent_id")
        )
    if developer:
        agents = agents.filter(
            pk__in=Session.objects.filter(team=team, developer=developer).values("agent_id")
        )
    return list(agents.order_by(F("last_seen_at").desc(nulls_last=True), "name")[:limit])


@dataclass
class AgentDetail:
    """An agent's pins (active and recently unpinned) and its recent sessions."""

    agent: Agent
    pins: list[Pin]
    unpinned: list[Pin]
    sessions: list[Session]


def agent_detail(agent: Agent) -> AgentDetail:
    """The agent page (three queries)."""
    return AgentDetail(
        agent=agent,
        pins=list(active_pins(agent).select_related("origin_session", "inherited_into")),
        unpinned=list(
            Pin.objects.filter(agent=agent, unpinned_at__isnull=False).order_by("-unpinned_at")[:20]
        ),
        sessions=list(Session.objects.filter(agent=agent).order_by("-started_at", "-id")[:20]),
    )


# --- live updates --------------------------------------------------------------------------


def session_state(session: Session) -> dict[str, Any]:
    """What the live poller refreshes for one session."""
    return {
        "id": str(session.pk),
        "status": session.status,
        "status_label": session.get_status_display(),
        "open": session.is_open,
        "event_count": session.event_count,
        "prompt_count": session.prompt_count,
        "tool_use_count": session.tool_use_count,
        "turn_count": session.turn_count,
        "compaction_count": session.compaction_count,
        "last_event_at": session.last_event_at.isoformat() if session.last_event_at else None,
        "ended_at": session.ended_at.isoformat() if session.ended_at else None,
        "end_reason": session.get_end_reason_display() if session.end_reason else "",
        "duration_seconds": session.duration_seconds,
    }


def live_sessions(teams: Sequence[Team], ids: Iterable[str]) -> list[Session]:
    """The sessions of these ids that belong to the user's teams (others are left out)."""
    wanted = [pk for value in list(ids)[:LIVE_IDS_MAX] if (pk := _as_uuid(value))]
    if not wanted or not teams:
        return []
    return list(Session.objects.filter(pk__in=wanted, team__in=[t.pk for t in teams]))


def sessions_started_since(team: Team, since: datetime, cap: int = 100) -> int:
    """How many sessions started after a moment (capped), for the list's 'new' notice."""
    return Session.objects.filter(team=team, started_at__gt=since)[:cap].count()
