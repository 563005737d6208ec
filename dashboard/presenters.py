"""What the dashboard's pages show, shaped from the rows dashboard.selectors read: the
overview's counts and charts, the timeline's lines and icons, the session strip. Nothing
here queries the database; the views hand every row in."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from lifecycle import selectors as lifecycle_selectors
from lifecycle.models import EventKind, LifecycleEvent, Session, SessionStatus
from memory.models import Observation, Pin, SessionFeatures, StreamTail, Summary

from . import charts, costs
from .charts import Chart
from .selectors import (
    COMPACTION_BUCKETS,
    DURATION_BUCKETS,
    GAP_SECONDS,
    HOURS,
    McpCalls,
    OverviewRows,
    RecordView,
    SessionRows,
)

# --- the overview --------------------------------------------------------------------------

STATUS_CSS: dict[str, str] = {
    SessionStatus.ACTIVE: "s-active",
    SessionStatus.SUSPENDED: "s-suspended",
    SessionStatus.ENDED: "s-ended",
    SessionStatus.CRASHED: "s-crashed",
}


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


def _day_series(per_day: list[tuple[date, str, int]], days: list[date]) -> list[charts.Series]:
    per: dict[str, dict[date, int]] = defaultdict(dict)
    for day, status, n in per_day:
        per[status][day] = n
    return [
        charts.Series(label, [per[value].get(d, 0) for d in days], STATUS_CSS[value])
        for value, label in SessionStatus.choices
    ]


def _counts(totals: dict[str, Any], open_now: dict[str, int]) -> dict[str, int]:
    """The overview's figures: the window's totals and the sessions open right now."""
    return {
        "sessions": totals["sessions"] or 0,
        "active": open_now.get(SessionStatus.ACTIVE, 0),
        "suspended": open_now.get(SessionStatus.SUSPENDED, 0),
        "crashed": totals["crashed"] or 0,
        "events": totals["events"] or 0,
        "compactions": totals["compactions"] or 0,
    }


def _per_day_chart(per_day: list[tuple[date, str, int]], first_day: date, days: int) -> Chart:
    day_list = [first_day + timedelta(days=i) for i in range(days)]
    return charts.column_chart(
        title=f"Sessions started per day, by status (last {days} days)",
        labels=[d.strftime("%b %d") for d in day_list],
        series=_day_series(per_day, day_list),
    )


def _per_hour_chart(hourly: dict[datetime, int], hour_start: datetime) -> Chart:
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


def _top_charts(
    agents: list[tuple[Any, ...]], projects: list[tuple[str, int]], days: int
) -> list[Chart]:
    """The agents and the projects with the most sessions in the window."""
    shared = _shared_names(name for _, name, *_ in agents)
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


def overview(rows: OverviewRows) -> Overview:
    """The overview page's numbers and charts, from the rows its selector read."""
    return Overview(
        days=rows.days,
        since=rows.since,
        counts=_counts(rows.totals, rows.open_now),
        charts=[
            _per_day_chart(rows.per_day, rows.first_day, rows.days),
            _per_hour_chart(rows.per_hour, rows.hour_start),
            *_bucket_charts(rows.totals, rows.days),
        ],
        top=_top_charts(rows.top_agents, rows.top_projects, rows.days),
        crashed=rows.crashed,
        tokens=token_usage(rows.token_rows, rows.summary_tokens, rows.first_day, rows.days),
        developer=rows.developer,
        project=rows.project,
    )


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
    rows: Iterable[dict[str, Any]],
    summary_per_day: dict[date, int] | None,
    first_day: date,
    days: int,
) -> TokenUsage:
    """The window's tokens per day (by kind) and their cost, SessionHub's own summaries'
    spend beside it (``summary_per_day``; None: not shown), and the top projects,
    developers and agents by tokens, folded from the window's aggregate rows (by day,
    project, developer, agent and model)."""
    day_list = [first_day + timedelta(days=i) for i in range(days)]
    per_day: dict[str, dict[date, int]] = {kind: defaultdict(int) for kind in costs.TOKEN_KINDS}
    cost_per_day: dict[date, float] = defaultdict(float)
    totals = dict.fromkeys(costs.TOKEN_KINDS, 0)
    cost_total, unpriced = 0.0, 0
    groups: dict[str, dict[Any, UsageRow]] = {"project": {}, "developer": {}, "agent": {}}
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
    with_summaries = summary_per_day is not None
    summary_per_day = summary_per_day or {}
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


def session_detail(rows: SessionRows) -> SessionDetail:
    """The session page: timeline, memory, pins, chain and continuity, from its rows."""
    session, events, memory = rows.session, rows.events, rows.memory
    spans = lifecycle_selectors.suspend_spans(events)
    return SessionDetail(
        session=session,
        items=timeline(events),
        truncated=rows.truncated,
        spans=spans,
        strip=_strip(session, events, spans),
        tail=memory.tail,
        summary=memory.summary,
        features=memory.features,
        observations=memory.observations,
        pins=memory.pins or [],
        chain=rows.chain,
        following=[s for s in rows.chain if s.previous_session_id == session.pk],
        continued_from=rows.continued_from,
        records=rows.records,
        mcp=rows.mcp,
        last_event_id=max((e.id for e in events), default=0),
    )
