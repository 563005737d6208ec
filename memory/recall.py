"""What an agent may ask of its team's memory mid-session, shaped for its token budget.

Each read answers with a small dictionary that names sessions and pins by their ids, so
the agent can ask for more of one thing by its id (``memory/mcp/tools.py`` serves them as
MCP tools). Everything is read as stored, already redacted, and within one team: a
session, agent or pin of another team is "not found", never shown.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet

from lifecycle.adapters.base import as_key
from lifecycle.models import OPEN_STATUSES, Agent, EventKind, LifecycleEvent, Session, Source
from sessionhub.models import ApiToken

from . import statements
from .models import Pin, SessionFeatures, StreamTail, Summary
from .search import SearchResult, clip, project_q
from .selectors import active_pins
from .summaries import SECTIONS

SECTION_CHARS = 500
TAIL_CHARS = 400
TASKS_MAX = 10
TOPICS_MAX = 10
LINE_CHARS = 160
TIMELINE_MAX = 100


def when(value: datetime | None) -> str | None:
    """A time as the answers give it: UTC, to the second."""
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


def _uuid(value: object) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


# --- who asks ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Caller:
    """The session a tool call comes from: ``exact`` when the client named it, else the
    token's most recently active open session (a guess, said as such), or nobody."""

    session: Session | None
    exact: bool

    @property
    def agent(self) -> Agent | None:
        return self.session.agent if self.session is not None else None


def caller_named(*, token: ApiToken, source: str, session_id: str) -> Session | None:
    """The session a client names as the caller (``source`` and the gateway's session
    id), within the token's team."""
    if not session_id or source not in Source.values:
        return None
    return (
        Session.objects.filter(team_id=token.team_id, source=source, external_id=as_key(session_id))
        .select_related("agent")
        .first()
    )


def caller_guess(token: ApiToken) -> Session | None:
    """The open session of this token's gateway that was active last (on PostgreSQL in a
    prepared statement: ``memory.statements.caller_guess``)."""
    gateway = token.gateway_name
    if connection.vendor == "postgresql":
        return statements.caller_guess(token.team_id, gateway)
    return gateway_open_sessions(token.team_id, gateway).first()


def gateway_open_sessions(team_id: int, gateway: str) -> QuerySet[Session]:
    """The team's open sessions of agents behind this gateway, the one active last
    first: what :func:`caller_guess` takes the first of (the prepared statement on
    PostgreSQL gives the same row)."""
    return (
        Session.objects.filter(team_id=team_id, status__in=OPEN_STATUSES)
        .filter(
            Q(agent__external_id__startswith=f"{gateway}:")
            | Q(agent__external_id__startswith=f"{gateway}/")
        )
        .select_related("agent")
        .order_by("-last_event_at")
    )


def session_named(team_id: int, value: str) -> Session | None:
    """One of the team's sessions by its SessionHub id or by the gateway's own id."""
    pk = _uuid(value)
    found = Session.objects.filter(team_id=team_id).select_related(
        "agent", "previous_session", "continued_by"
    )
    if pk is not None:
        session = found.filter(pk=pk).first()
        if session is not None:
            return session
    return found.filter(external_id=as_key(value)).order_by("-started_at").first()


def agent_named(team_id: int, value: str) -> Agent | None:
    """One of the team's agents by its SessionHub id, its gateway id or its name."""
    agents = Agent.objects.filter(team_id=team_id)
    pk = _uuid(value)
    if pk is not None:
        found = agents.filter(pk=pk).first()
        if found is not None:
            return found
    return (
        agents.filter(Q(external_id=value) | Q(name__iexact=value))
        .order_by("-last_seen_at")
        .first()
    )


# --- answers -----------------------------------------------------------------------------


def _session_line(session: Session) -> dict[str, Any]:
    """A session as a list names it."""
    return {
        "session_id": str(session.pk),
        "agent": session.agent.name or session.agent.external_id,
        "project": session.project,
        "status": session.status,
        "started_at": when(session.started_at),
        "ended_at": when(session.ended_at),
    }


def search_answer(result: SearchResult) -> dict[str, Any]:
    """A search as the agent reads it: the terms, each hit with its line of evidence."""
    return {
        "terms": result.terms,
        "sessions_looked_at": result.looked_at,
        "hits": [
            {
                "session_id": str(hit.line.pk),
                "agent": hit.line.agent,
                "project": hit.line.project,
                "status": hit.line.status,
                "started_at": when(hit.line.started_at),
                "ended_at": when(hit.line.ended_at),
                "score": round(hit.score, 3),
                "matched": hit.matched,
                "found_in": hit.where,
                "snippet": hit.snippet,
                **({"pin_ids": [p.pk for p in hit.pins]} if hit.pins else {}),
            }
            for hit in result.hits
        ],
        **(
            {
                "pins": [
                    {"pin_id": p.pk, "label": p.label, "snippet": clip(p.content)}
                    for p in result.pins
                ]
            }
            if result.pins
            else {}
        ),
    }


def _outcome(session: Session) -> str:
    """How the session stands: its status and end, and whether its last turn failed."""
    last = (
        LifecycleEvent.objects.filter(session=session, kind=EventKind.TURN_END)
        .order_by("-occurred_at", "-id")
        .values_list("facts", flat=True)
        .first()
    )
    parts = [session.get_status_display().lower()]
    if session.end_reason:
        parts.append(f"({session.get_end_reason_display().lower()})")
    if isinstance(last, dict) and last.get("failed"):
        parts.append(f"; the last turn failed: {str(last.get('error') or 'error')[:80]}")
    elif isinstance(last, dict):
        parts.append("; the last turn finished")
    return " ".join(parts).replace(" ;", ";")


def session_answer(session: Session) -> dict[str, Any]:
    """One session's memory: summary, outcome, pending tasks, last words, pins, links."""
    team_id = session.team_id
    summary = Summary.objects.filter(session=session, team_id=team_id).first()
    features = SessionFeatures.objects.filter(session=session, team_id=team_id).first()
    tail = (
        StreamTail.objects.filter(session=session, team_id=team_id)
        .order_by("-captured_at", "-id")
        .first()
    )
    pins = list(active_pins(session.agent).filter(team_id=team_id)[:20])
    made = list(
        Pin.objects.filter(origin_session=session, team_id=team_id, unpinned_at__isnull=False)[:10]
    )
    answer: dict[str, Any] = {
        **_session_line(session),
        "external_id": session.external_id,
        "outcome": _outcome(session),
        "counts": {
            "prompts": session.prompt_count,
            "tool_uses": session.tool_use_count,
            "turns": session.turn_count,
            "compactions": session.compaction_count,
            "events": session.event_count,
        },
    }
    if summary is not None:
        answer["summary"] = {
            name: clip(getattr(summary, name), SECTION_CHARS)
            for name in SECTIONS
            if getattr(summary, name)
        }
    if features is not None:
        answer["pending_tasks"] = [
            clip(str(task.get("text") or task.get("id") or ""), LINE_CHARS)
            for task in (features.pending_tasks or [])[:TASKS_MAX]
            if isinstance(task, dict)
        ]
        answer["topics"] = list(features.hot_topics or [])[:TOPICS_MAX]
    final = (tail.final_message if tail else "") or (summary.final_message if summary else "")
    if final:
        answer["final_message"] = clip(final, TAIL_CHARS)
    if tail is not None and tail.text:
        answer["reasoning_tail"] = clip(tail.text, TAIL_CHARS)
    answer["agent_pins"] = [_pin(p) for p in pins]
    if made:
        answer["pins_made_here_since_unpinned"] = [_pin(p) for p in made]
    if session.previous_session_id:
        answer["previous_session_id"] = str(session.previous_session_id)
    if session.continued_by_id:
        answer["continued_by_session_id"] = str(session.continued_by_id)
    return answer


def _pin(pin: Pin) -> dict[str, Any]:
    return {
        "pin_id": pin.pk,
        "label": pin.label,
        "content": clip(pin.content, 300),
        "priority": pin.priority,
        "pinned_at": when(pin.pinned_at),
    }


def _event_line(event: LifecycleEvent) -> str:
    """One event in a line of at most ``LINE_CHARS`` characters."""
    facts = event.facts if isinstance(event.facts, dict) else {}
    detail = ""
    if event.kind == EventKind.PROMPT:
        detail = str(facts.get("text") or "")
    elif event.kind == EventKind.TOOL_USE:
        detail = f"{facts.get('tool_name') or 'tool'}" + (" failed" if facts.get("failed") else "")
    elif event.kind == EventKind.TURN_END:
        detail = "failed" if facts.get("failed") else str(facts.get("final_message") or "")
    elif event.kind == EventKind.SESSION_END:
        detail = str(facts.get("reason") or "")
    elif event.kind in (EventKind.COMPACTION_BEFORE, EventKind.COMPACTION_AFTER):
        detail = str(facts.get("trigger") or "")
    label = event.get_kind_display().lower()
    return clip(f"{label}: {detail}" if detail else label, LINE_CHARS)


def timeline_answer(session: Session, *, after: int = 0, limit: int = 30) -> dict[str, Any]:
    """A page of the session's events, oldest first, one line each; ``next_after`` asks
    for the next page."""
    events = list(
        LifecycleEvent.objects.filter(session=session, team_id=session.team_id, id__gt=after)
        .exclude(kind=EventKind.TOOL_USE, phase="pre")
        .order_by("id")[: limit + 1]
    )
    more = len(events) > limit
    events = events[:limit]
    answer: dict[str, Any] = {
        "session_id": str(session.pk),
        "events": [
            {"event": e.pk, "at": when(e.occurred_at), "what": _event_line(e)} for e in events
        ],
    }
    if more and events:
        answer["next_after"] = events[-1].pk
    return answer


def recent_answer(*, team_id: int, project: str, agent: Agent | None, limit: int) -> dict[str, Any]:
    """The newest sessions of a project (or an agent) with their request, and the tasks
    they left open that no newer session of theirs reports done."""
    sessions = Session.objects.filter(team_id=team_id).select_related("agent")
    if project:
        sessions = sessions.filter(project_q(project))
    elif agent is not None:
        sessions = sessions.filter(agent=agent)
    rows = list(sessions.order_by("-started_at", "-id")[:limit])
    pks = [s.pk for s in rows]
    requests = dict(Summary.objects.filter(session_id__in=pks).values_list("session_id", "request"))
    features = {f.session_id: f for f in SessionFeatures.objects.filter(session_id__in=pks)}
    done: set[str] = set()
    tasks: list[dict[str, Any]] = []
    seen: set[str] = set()
    for session in rows:  # newest first: a task a newer session finished is not open
        found = features.get(session.pk)
        if found is None:
            continue
        for task in found.pending_tasks or []:
            if not isinstance(task, dict):
                continue
            key = str(task.get("id") or task.get("text") or "")
            if not key or key in done or key in seen or len(tasks) >= TASKS_MAX:
                continue
            seen.add(key)
            tasks.append(
                {
                    "task": clip(str(task.get("text") or key), LINE_CHARS),
                    "session_id": str(session.pk),
                }
            )
        done |= {str(t) for t in found.done_tasks or []}
    return {
        "project": project or (rows[0].project if rows else ""),
        "sessions": [
            {**_session_line(s), "request": clip(requests.get(s.pk) or "", LINE_CHARS)}
            for s in rows
        ],
        "open_tasks": tasks,
    }


def pins_answer(agent: Agent) -> dict[str, Any]:
    """An agent's active pins."""
    return {
        "agent_id": str(agent.pk),
        "agent": agent.name or agent.external_id,
        "pins": [_pin(p) for p in active_pins(agent).filter(team_id=agent.team_id)],
    }
