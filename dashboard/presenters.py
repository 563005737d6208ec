"""What the dashboard's pages show, built from the selectors' rows: the overview's
counts and charts, the timeline's lines and icons, the session strip."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any, cast

from django.conf import settings
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, QuerySet, Sum
from django.db.models.functions import TruncDate, TruncHour
from django.urls import reverse
from django.utils import timezone

from lifecycle import selectors as lifecycle_selectors
from lifecycle.models import (
    OPEN_STATUSES,
    EventKind,
    LifecycleEvent,
    Session,
    SessionStatus,
    foreground_q,
)
from memory.models import (
    LlmUsage,
    Observation,
    Pin,
    SessionFeatures,
    StreamTail,
    Summary,
)
from memory.selectors import session_memory
from sessionhub.models import Team

from . import charts, costs
from .charts import Chart
from .selectors import (
    CHAIN_LIMIT,
    GAP_SECONDS,
    OBSERVATION_LIMIT,
    TIMELINE_LIMIT,
    McpCalls,
    RecordView,
    continuity_records,
    mcp_calls,
)

# --- the overview --------------------------------------------------------------------------

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
STATUS_CSS: dict[str, str] = {
    SessionStatus.ACTIVE: "s-active",
    SessionStatus.SUSPENDED: "s-suspended",
    SessionStatus.ENDED: "s-ended",
    SessionStatus.CRASHED: "s-crashed",
}
HOURS = 48


@dataclass
class UsageRow:
    """Tokens and their estimated cost for one project, developer or agent."""

    label: str
    sessions: int = 0
    tokens: int = 0
    cost: float = 0.0
    unpriced: int = 0  # tokens of models the price table does not know
    href: str = ""
    developer: str = ""  # an agent's, to tell two of one name apart


@dataclass
class TokenUsage:
    """The window's token usage and its estimated cost, beside SessionHub's own LLM spend."""

    tokens: dict[str, int]
    total_tokens: int
    cost: float
    unpriced_tokens: int
    summary_tokens: int
    summary_cost: float | None
    summary_model: str
    charts: list[Chart]
    by_project: list[UsageRow]
    by_developer: list[UsageRow]
    by_agent: list[UsageRow]


@dataclass
class Overview:
    """Counts and charts of a team's recent sessions."""

    days: int
    since: datetime
    counts: dict[str, int]
    charts: list[Chart]
    top: list[Chart]
    crashed: list[Session]
    tokens: TokenUsage | None = None
    developer: str = ""
    project: str = ""


def _day_series(
    team: Team, since: datetime, days: list[date], narrow: Q | None = None
) -> list[charts.Series]:
    rows = (
        Session.objects.filter(foreground_q(), narrow or Q(), team=team, started_at__gte=since)
        .annotate(day=TruncDate("started_at"))
        .values_list("day", "status")
        .annotate(n=Count("id"))
        .order_by()
    )
    per: dict[str, dict[date, int]] = defaultdict(dict)
    for day, status, n in rows:
        per[status][day] = n
    return [
        charts.Series(label, [per[value].get(d, 0) for d in days], STATUS_CSS[value])
        for value, label in SessionStatus.choices
    ]


def _window_totals(window: QuerySet[Session]) -> dict[str, Any]:
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


def _counts(team: Team, totals: dict[str, Any], narrow: Q | None = None) -> dict[str, int]:
    """The overview's figures: the window's totals and the sessions open right now."""
    open_now = dict(
        Session.objects.filter(foreground_q(), narrow or Q(), team=team, status__in=OPEN_STATUSES)
        .values_list("status")
        .annotate(n=Count("id"))
        .order_by()
    )
    return {
        "sessions": totals["sessions"] or 0,
        "active": open_now.get(SessionStatus.ACTIVE, 0),
        "suspended": open_now.get(SessionStatus.SUSPENDED, 0),
        "crashed": totals["crashed"] or 0,
        "events": totals["events"] or 0,
        "compactions": totals["compactions"] or 0,
    }


def _per_day_chart(
    team: Team, since: datetime, first_day: date, days: int, narrow: Q | None = None
) -> Chart:
    day_list = [first_day + timedelta(days=i) for i in range(days)]
    return charts.column_chart(
        title=f"Sessions started per day, by status (last {days} days)",
        labels=[d.strftime("%b %d") for d in day_list],
        series=_day_series(team, since, day_list, narrow),
    )


def _per_hour_chart(team: Team, now: datetime) -> Chart:
    hour_start = (now - timedelta(hours=HOURS - 1)).replace(minute=0, second=0, microsecond=0)
    hourly = dict(
        LifecycleEvent.objects.filter(team=team, received_at__gte=hour_start)
        .annotate(hour=TruncHour("received_at"))
        .values_list("hour")
        .annotate(n=Count("id"))
        .order_by()
    )
    hours = [hour_start + timedelta(hours=i) for i in range(HOURS)]
    return charts.column_chart(
        title=f"Events received per hour (last {HOURS} hours)",
        labels=[timezone.localtime(h).strftime("%H:00") for h in hours],
        series=[charts.Series("events", [hourly.get(h, 0) for h in hours], "c-events")],
    )


def _bucket_chart(
    title: str, buckets: Sequence[tuple[str, Any, Any]], values: list[int], css: str
) -> Chart:
    return charts.column_chart(
        title=title,
        labels=[label for label, _, _ in buckets],
        series=[charts.Series("sessions", values, css)],
    )


def _bucket_charts(totals: dict[str, Any], days: int) -> list[Chart]:
    """How long the window's ended sessions lasted, and how often sessions compacted."""
    return [
        _bucket_chart(
            f"Duration of sessions that ended (started in the last {days} days)",
            DURATION_BUCKETS,
            [totals[f"d{i}"] or 0 for i in range(len(DURATION_BUCKETS))],
            "c-duration",
        ),
        _bucket_chart(
            f"Compactions per session (last {days} days)",
            COMPACTION_BUCKETS,
            [totals[f"c{i}"] or 0 for i in range(len(COMPACTION_BUCKETS))],
            "c-compaction",
        ),
    ]


def _top_charts(window: QuerySet[Session], days: int) -> list[Chart]:
    """The agents and the projects with the most sessions in the window (eight of each)."""
    agents = list(
        window.values_list("agent_id", "agent__name", "agent__external_id", "agent__developer")
        .annotate(n=Count("id"))
        .order_by("-n", "agent__name")[:8]
    )
    shared = _shared_names(name for _, name, *_ in agents)
    projects = list(
        window.exclude(project="")
        .values_list("project")
        .annotate(n=Count("id"))
        .order_by("-n", "project")[:8]
    )
    return [
        charts.bar_list(
            title=f"Top agents (sessions, last {days} days)",
            labels=[
                f"{name} · {who}" if name in shared and who else name or ext
                for _, name, ext, who, _ in agents
            ],
            values=[n for *_, n in agents],
            hrefs=[reverse("dashboard:agent", args=[pk]) for pk, *_ in agents],
            css="c-agent",
        ),
        charts.bar_list(
            title=f"Top projects (sessions, last {days} days)",
            labels=[p for p, _ in projects],
            values=[n for _, n in projects],
            css="c-project",
        ),
    ]


def overview(
    team: Team,
    *,
    days: int = 14,
    now: datetime | None = None,
    developer: str = "",
    project: str = "",
) -> Overview:
    """The overview page's numbers: a handful of aggregate queries over the window, of
    one developer's or one project's sessions when asked."""
    now = now or timezone.now()
    first_day = timezone.localdate(now) - timedelta(days=days - 1)
    since = datetime.combine(first_day, time.min, tzinfo=timezone.get_current_timezone())
    narrow = Q()
    if developer:
        narrow &= Q(developer=developer)
    if project:
        narrow &= Q(project=project)
    # Background runs (heartbeats...) are not the team's work: kept out of the charts.
    window = Session.objects.filter(foreground_q(), narrow, team=team, started_at__gte=since)
    totals = _window_totals(window)
    counts = _counts(team, totals, narrow)
    per_day = _per_day_chart(team, since, first_day, days, narrow)
    per_hour = _per_hour_chart(team, now)
    buckets = _bucket_charts(totals, days)
    top = _top_charts(window, days)
    crashed = list(
        window.filter(status=SessionStatus.CRASHED)
        .select_related("agent")
        .order_by("-started_at", "-id")[:8]
    )
    return Overview(
        days=days,
        since=since,
        counts=counts,
        charts=[per_day, per_hour, *buckets],
        top=top,
        crashed=crashed,
        tokens=token_usage(
            team, window, first_day, days, with_summaries=not (developer or project)
        ),
        developer=developer,
        project=project,
    )


_USAGE_SUMS = {
    "input": Sum("input_tokens"),
    "output": Sum("output_tokens"),
    "cache_read": Sum("cache_read_tokens"),
    "cache_write": Sum("cache_write_tokens"),
    "sessions": Count("id"),
}
USAGE_LABELS = {
    "input": "input",
    "output": "output",
    "cache_read": "cache reads",
    "cache_write": "cache writes",
}
USAGE_TOP = 10


def _priced(model: str, row: dict[str, Any]) -> tuple[int, float | None]:
    """(tokens, USD or None) of one aggregate row of a model's sessions."""
    counts = {kind: int(row.get(kind) or 0) for kind in costs.TOKEN_KINDS}
    return sum(counts.values()), costs.cost(model, **counts)


def _shared_names(names: Iterable[str]) -> set[str]:
    """The names that more than one of these agents bear."""
    seen: dict[str, int] = defaultdict(int)
    for name in names:
        seen[name] += 1
    return {name for name, n in seen.items() if n > 1}


def _ranked(rows: dict[Any, UsageRow]) -> list[UsageRow]:
    ranked = sorted(rows.values(), key=lambda r: (-r.tokens, -r.sessions, r.label))
    return [r for r in ranked if r.tokens][:USAGE_TOP]


def token_usage(
    team: Team, window: QuerySet[Session], first_day: date, days: int, *, with_summaries: bool
) -> TokenUsage:
    """The window's tokens per day (by kind) and their cost, SessionHub's own summaries'
    spend beside it, and the top projects, developers and agents by tokens: one
    aggregate over the window (by day, project, developer, agent and model), folded here."""
    day_list = [first_day + timedelta(days=i) for i in range(days)]
    per_day: dict[str, dict[date, int]] = {kind: defaultdict(int) for kind in costs.TOKEN_KINDS}
    cost_per_day: dict[date, float] = defaultdict(float)
    totals = dict.fromkeys(costs.TOKEN_KINDS, 0)
    cost_total, unpriced = 0.0, 0
    groups: dict[str, dict[Any, UsageRow]] = {"project": {}, "developer": {}, "agent": {}}
    rows = cast(
        Iterable[dict[str, Any]],
        window.annotate(day=TruncDate("started_at"))
        .values(
            "day", "project", "developer", "agent_id", "agent__name", "agent__developer", "model"
        )
        .annotate(**_USAGE_SUMS)
        .order_by(),
    )
    for row in rows:
        for kind in costs.TOKEN_KINDS:
            per_day[kind][row["day"]] += int(row[kind] or 0)
            totals[kind] += int(row[kind] or 0)
        tokens, price = _priced(row["model"] or "", row)
        if price is None:
            unpriced += tokens
        else:
            cost_per_day[row["day"]] += price
            cost_total += price
        keyed = (
            ("project", row["project"], row["project"] or "—", ""),
            ("developer", row["developer"], row["developer"] or "—", ""),
            (
                "agent",
                row["agent_id"],
                row["agent__name"] or str(row["agent_id"]),
                reverse("dashboard:agent", args=[row["agent_id"]]),
            ),
        )
        for group, key, label, href in keyed:
            entry = groups[group].setdefault(
                key, UsageRow(label=label, href=href, developer=row["agent__developer"])
            )
            entry.sessions += row["sessions"]
            entry.tokens += tokens
            if price is None:
                entry.unpriced += tokens
            else:
                entry.cost += price

    model = settings.SESSIONHUB["LLM"]["MODEL"]
    summary_per_day: dict[date, int] = {}
    if with_summaries:
        summary_per_day = dict(
            LlmUsage.objects.filter(team=team, day__gte=first_day).values_list("day", "tokens")
        )
    summary_tokens = sum(summary_per_day.values())
    summary_prices = costs.prices_of(model) if model else None
    # The ledger keeps one count per day, not input and output apart: priced at the
    # model's input rate, a floor of what the summaries cost.
    summary_price = summary_prices[0] / 1_000_000 if summary_prices else None

    labels = [d.strftime("%b %d") for d in day_list]
    token_chart = charts.column_chart(
        title=f"Tokens per day, by kind (sessions started in the last {days} days)",
        labels=labels,
        series=[
            charts.Series(USAGE_LABELS[kind], [per_day[kind][d] for d in day_list], f"u-{kind}")
            for kind in costs.TOKEN_KINDS
        ],
    )
    cost_series = [
        charts.Series("agents", [round(cost_per_day[d], 2) for d in day_list], "u-cost"),
    ]
    if with_summaries and summary_price is not None:
        cost_series.append(
            charts.Series(
                "SessionHub summaries",
                [round(summary_per_day.get(d, 0) * summary_price, 2) for d in day_list],
                "u-summaries",
            )
        )
    cost_chart = charts.column_chart(
        title=f"Estimated cost per day, USD (last {days} days)",
        labels=labels,
        series=cost_series,
    )
    shared = _shared_names(r.label for r in groups["agent"].values())
    for agent in groups["agent"].values():
        if agent.label in shared and agent.developer:
            agent.label = f"{agent.label} · {agent.developer}"
    return TokenUsage(
        tokens=totals,
        total_tokens=sum(totals.values()),
        cost=cost_total,
        unpriced_tokens=unpriced,
        summary_tokens=summary_tokens,
        summary_cost=summary_tokens * summary_price if summary_price is not None else None,
        summary_model=model,
        charts=[token_chart, cost_chart],
        by_project=_ranked(groups["project"]),
        by_developer=_ranked(groups["developer"]),
        by_agent=_ranked(groups["agent"]),
    )


@dataclass
class AgentGroup:
    """The agents of one project, as the agents page lists them."""

    project: str
    agents: list[Any]


def agents_by_project(agents: Sequence[Any]) -> list[AgentGroup]:
    """The agents grouped by project (the busiest project first, as the agents come most
    recently seen first); each gets ``label``: its name, and who runs it where two agents
    of the list share the name."""
    names: dict[str, int] = defaultdict(int)
    for agent in agents:
        names[agent.name] += 1
    groups: dict[str, list[Any]] = {}
    for agent in agents:
        shared = names[agent.name] > 1 and agent.developer
        agent.label = f"{agent.name} · {agent.developer}" if shared else str(agent)
        groups.setdefault(agent.project, []).append(agent)
    return [AgentGroup(project, members) for project, members in groups.items()]


KIND_STYLE: dict[str, tuple[str, str]] = {
    # kind: (icon id in the sprite, css class)
    EventKind.SESSION_START: ("i-start", "k-start"),
    EventKind.SESSION_RESUME: ("i-resume", "k-resume"),
    EventKind.SESSION_SUSPEND: ("i-suspend", "k-suspend"),
    EventKind.SESSION_END: ("i-end", "k-end"),
    EventKind.COMPACTION_BEFORE: ("i-compact", "k-compaction"),
    EventKind.COMPACTION_AFTER: ("i-compact", "k-compaction"),
    EventKind.PROMPT: ("i-prompt", "k-prompt"),
    EventKind.TOOL_USE: ("i-tool", "k-tool"),
    EventKind.TURN_END: ("i-turn", "k-turn"),
    EventKind.NOTIFICATION: ("i-note", "k-note"),
    EventKind.COMMAND: ("i-command", "k-command"),
    EventKind.OTHER: ("i-other", "k-other"),
}
KIND_LABELS = dict(EventKind.choices)


@dataclass
class TimelineItem:
    """One event as the timeline shows it, with the silence before it."""

    event: LifecycleEvent
    icon: str
    css: str
    label: str
    text: str
    gap_seconds: float | None = None
    slept_seconds: float | None = None
    asleep: bool = False


def _event_text(event: LifecycleEvent) -> str:
    facts = event.facts or {}
    kind = event.kind
    if kind == EventKind.PROMPT:
        return str(facts.get("text") or "")
    if kind == EventKind.TOOL_USE:
        name = str(facts.get("tool_name") or "tool")
        return f"{name}{' (failed)' if facts.get('failed') else ''}"
    if kind == EventKind.TURN_END:
        return str(facts.get("final_message") or facts.get("error") or "")
    if kind == EventKind.SESSION_END:
        reason = str(facts.get("reason") or "")
        detail = str(facts.get("reason_detail") or "")
        return reason + (f" ({detail})" if detail and detail != reason else "")
    if kind == EventKind.SESSION_START:
        return str(facts.get("start_source") or facts.get("resumed_from") or "")
    if kind == EventKind.SESSION_SUSPEND:
        return str(facts.get("reason") or "")
    if kind == EventKind.COMPACTION_BEFORE:
        return str(facts.get("trigger") or "")
    return event.hook


def timeline(events: Iterable[LifecycleEvent]) -> list[TimelineItem]:
    """The timeline rows: kinds styled, long silences and sleeps measured."""
    items: list[TimelineItem] = []
    previous: datetime | None = None
    asleep_since: datetime | None = None
    for event in events:
        icon, css = KIND_STYLE.get(event.kind, KIND_STYLE[EventKind.OTHER])
        gap = (event.occurred_at - previous).total_seconds() if previous else None
        item = TimelineItem(
            event=event,
            icon=icon,
            css=css,
            label=KIND_LABELS.get(event.kind, event.kind),
            text=_event_text(event)[:500],
            gap_seconds=gap if gap is not None and gap >= GAP_SECONDS else None,
            asleep=asleep_since is not None,
        )
        if event.kind == EventKind.SESSION_SUSPEND and asleep_since is None:
            asleep_since = event.occurred_at
        elif (
            event.kind in (EventKind.SESSION_RESUME, EventKind.SESSION_START)
            and asleep_since is not None
        ):
            item.slept_seconds = (event.occurred_at - asleep_since).total_seconds()
            item.gap_seconds = None  # the sleep says it better
            item.asleep = False
            asleep_since = None
        items.append(item)
        previous = event.occurred_at
    return items


def _strip(session: Session, events: list[LifecycleEvent], spans: Sequence[Any]) -> Any:
    if not events or session.started_at is None:
        return None
    start = session.started_at
    end = session.ended_at or session.last_event_at or events[-1].occurred_at
    if end <= start:
        return None

    def at(moment: datetime) -> float:
        return (moment - start).total_seconds()

    marks = []
    for event in events:
        if event.kind in (EventKind.COMPACTION_BEFORE, EventKind.COMPACTION_AFTER):
            marks.append((at(event.occurred_at), "k-compaction", "compaction"))
        elif event.kind == EventKind.TURN_END:
            marks.append((at(event.occurred_at), "k-turn", "turn end"))
        elif event.kind == EventKind.PROMPT:
            marks.append((at(event.occurred_at), "k-prompt", "prompt"))
    sleeps = [(at(s.suspended_at), at(s.resumed_at or end)) for s in spans]
    return charts.session_strip(start=0, end=at(end), sleeps=sleeps, marks=marks)


@dataclass
class SessionDetail:
    """Everything the session page shows."""

    session: Session
    items: list[TimelineItem]
    truncated: bool
    spans: list[lifecycle_selectors.SuspendSpan]
    strip: Any
    tail: StreamTail | None
    summary: Summary | None
    features: SessionFeatures | None
    observations: list[Observation]
    pins: list[Pin]
    chain: list[Session]
    following: list[Session]
    continued_from: list[Session]
    records: list[RecordView]
    mcp: McpCalls
    last_event_id: int


def session_detail(session: Session) -> SessionDetail:
    """The session page: timeline, memory, pins, chain and continuity (a bounded number of
    queries whatever the session's size; the chain is one query, at most ``CHAIN_LIMIT`` links)."""
    events = list(lifecycle_selectors.events_for_session(session)[: TIMELINE_LIMIT + 1])
    truncated = len(events) > TIMELINE_LIMIT
    events = events[:TIMELINE_LIMIT]
    spans = lifecycle_selectors.suspend_spans(events)
    chain = [
        s
        for s in lifecycle_selectors.session_chain(session, limit=CHAIN_LIMIT)
        if s.team_id == session.team_id
    ]
    memory = session_memory(session, observation_limit=OBSERVATION_LIMIT, pins=True)
    return SessionDetail(
        session=session,
        items=timeline(events),
        truncated=truncated,
        spans=spans,
        strip=_strip(session, events, spans),
        tail=memory.tail,
        summary=memory.summary,
        features=memory.features,
        observations=memory.observations,
        pins=memory.pins or [],
        chain=chain,
        following=[s for s in chain if s.previous_session_id == session.pk],
        continued_from=list(
            Session.objects.filter(continued_by=session, team_id=session.team_id).order_by(
                "-started_at"
            )[:CHAIN_LIMIT]
        ),
        records=continuity_records(session),
        mcp=mcp_calls(session),
        last_event_id=max((e.id for e in events), default=0),
    )
