"""The MCP tools: their names, what each tells the model, the arguments each takes, and
the memory read (``memory/recall.py``, ``memory/search.py``) behind each.

A tool answers with a small JSON object that names sessions and pins by id; an argument
the tool cannot use is answered as a tool error (``isError``) that says which and why, so
the model can correct itself. Every answer is held to the caller's team.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from typing import Any

from lifecycle.models import Session
from sessionhub.models import ApiToken
from sessionhub.text.redaction import redact_text

from .. import recall
from ..search import SearchFilters, memory_search


class ToolError(Exception):
    """An argument or a request the tool cannot answer: told to the model as is."""


@dataclass
class Context:
    """Who calls: the token (and its team), and the session the client named as the
    caller; ``caller`` falls back to a guess, looked up only when a tool asks for it."""

    token: ApiToken
    now: datetime
    named: Session | None = None
    _guess: list[Session | None] = field(default_factory=list)

    @property
    def team_id(self) -> int:
        return self.token.team_id

    @property
    def caller(self) -> recall.Caller:
        if self.named is not None:
            return recall.Caller(self.named, exact=True)
        if not self._guess:
            self._guess.append(recall.caller_guess(self.token))
        return recall.Caller(self._guess[0], exact=False)


@dataclass
class Answer:
    """A tool's answer and what it handed out (for the record)."""

    data: dict[str, Any]
    sessions: list[uuid.UUID] = field(default_factory=list)
    pins: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    properties: dict[str, Any]
    required: tuple[str, ...]
    run: Callable[[Context, dict[str, Any]], Answer]
    scopes: tuple[str, ...] = ("read",)

    def definition(self) -> dict[str, Any]:
        """The tool as ``tools/list`` lists it."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": {
                "type": "object",
                "properties": self.properties,
                "required": list(self.required),
                "additionalProperties": False,
            },
            "annotations": {
                "title": self.title,
                "readOnlyHint": True,
                "openWorldHint": False,
            },
        }


# --- arguments ------------------------------------------------------------------------------


def _string(args: dict[str, Any], name: str, *, limit: int = 300, required: bool = False) -> str:
    value = args.get(name)
    if value is None or value == "":
        if required:
            raise ToolError(f"{name} is required")
        return ""
    if not isinstance(value, str):
        raise ToolError(f"{name} must be a string")
    value = value.strip()
    if len(value) > limit:
        raise ToolError(f"{name} is longer than {limit} characters")
    if "\x00" in value:
        raise ToolError(f"{name} holds a NUL character")
    return value


def _integer(args: dict[str, Any], name: str, *, default: int, low: int, high: int) -> int:
    value = args.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise ToolError(f"{name} must be a whole number from {low} to {high}")
    if not low <= int(value) <= high:
        raise ToolError(f"{name} must be from {low} to {high}")
    return int(value)


_RELATIVE = re.compile(r"^(\d{1,4})\s*([hdw])$", re.IGNORECASE)
_UNITS = {"h": 3600, "d": 86400, "w": 7 * 86400}


def _moment(args: dict[str, Any], name: str, now: datetime, *, end_of_day: bool) -> datetime | None:
    """An ISO date or time (UTC when it names no offset), or a span back from now
    (``24h``, ``7d``, ``2w``)."""
    text = _string(args, name, limit=40)
    if not text:
        return None
    relative = _RELATIVE.match(text)
    if relative:
        return now - timedelta(seconds=int(relative.group(1)) * _UNITS[relative.group(2).lower()])
    try:
        if len(text) == 10:
            day = datetime.fromisoformat(text).date()
            return datetime.combine(day, time.max if end_of_day else time.min, tzinfo=UTC)
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ToolError(
            f"{name} must be an ISO date or time (2026-05-01, 2026-05-01T09:30Z) or a span "
            "back from now (24h, 7d, 2w)"
        ) from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _session(ctx: Context, args: dict[str, Any]) -> Session:
    value = _string(args, "session_id", limit=200, required=True)
    session = recall.session_named(ctx.team_id, value)
    if session is None:
        raise ToolError(f"no session {value!r} in this team")
    return session


def _caller_note(ctx: Context) -> dict[str, Any]:
    session = ctx.caller.session
    if session is None:
        return {}
    how = "named by the client" if ctx.caller.exact else "this token's latest active session"
    return {"asking_session": {"session_id": str(session.pk), "how_known": how}}


# --- the tools ------------------------------------------------------------------------------

_PROJECT = {
    "type": "string",
    "description": "A project as SessionHub names it (a git remote such as "
    "git.example.com/acme/billing-api, or a working directory), or its last part "
    "(billing-api).",
}


def _search(ctx: Context, args: dict[str, Any]) -> Answer:
    query = redact_text(_string(args, "query", limit=500, required=True))
    agent = None
    agent_name = _string(args, "agent", limit=300)
    if agent_name:
        agent = recall.agent_named(ctx.team_id, agent_name)
        if agent is None:
            raise ToolError(f"no agent {agent_name!r} in this team")
    filters = SearchFilters(
        project=_string(args, "project", limit=500),
        agent=agent,
        since=_moment(args, "since", ctx.now, end_of_day=False),
        until=_moment(args, "until", ctx.now, end_of_day=True),
        exclude=ctx.caller.session.pk if ctx.caller.session is not None else None,
    )
    limit = _integer(args, "limit", default=5, low=1, high=20)
    result = memory_search(
        team_id=ctx.team_id, query=query, filters=filters, limit=limit, now=ctx.now
    )
    data = recall.search_answer(result)
    data.update(_caller_note(ctx))
    if not result.terms:
        data["note"] = "the query has no searchable words; name what to look for"
    elif not result.hits:
        data["note"] = "nothing found; try fewer or other words, or a wider time range"
    pins = [p for hit in result.hits for p in hit.pins] + result.pins
    return Answer(data, [h.line.pk for h in result.hits], [p.pk for p in pins])


def _get_session(ctx: Context, args: dict[str, Any]) -> Answer:
    session = _session(ctx, args)
    data = recall.session_answer(session)
    pins = [p["pin_id"] for p in data.get("agent_pins", [])]
    pins += [p["pin_id"] for p in data.get("pins_made_here_since_unpinned", [])]
    return Answer(data, [session.pk], pins)


def _get_timeline(ctx: Context, args: dict[str, Any]) -> Answer:
    session = _session(ctx, args)
    after = _integer(args, "after", default=0, low=0, high=2**62)
    limit = _integer(args, "limit", default=30, low=1, high=recall.TIMELINE_MAX)
    return Answer(recall.timeline_answer(session, after=after, limit=limit), [session.pk])


def _recent(ctx: Context, args: dict[str, Any]) -> Answer:
    named = _string(args, "project", limit=500)
    limit = _integer(args, "limit", default=5, low=1, high=20)
    project, agent = named, None
    if not named:
        caller = ctx.caller.session
        if caller is None:
            raise ToolError(
                "SessionHub cannot tell which project asks: name the project (search_memory "
                "hits show project names)"
            )
        project, agent = caller.project, caller.agent
    data = recall.recent_answer(team_id=ctx.team_id, project=project, agent=agent, limit=limit)
    if not named:
        data.update(_caller_note(ctx))
    ids = [uuid.UUID(s["session_id"]) for s in data["sessions"]]
    return Answer(data, ids)


def _pins(ctx: Context, args: dict[str, Any]) -> Answer:
    name = _string(args, "agent", limit=300)
    if name:
        agent = recall.agent_named(ctx.team_id, name)
        if agent is None:
            raise ToolError(f"no agent {name!r} in this team")
    else:
        agent = ctx.caller.agent
        if agent is None:
            raise ToolError("SessionHub cannot tell which agent asks: name the agent")
    data = recall.pins_answer(agent)
    if not name:
        data.update(_caller_note(ctx))
    return Answer(data, [], [p["pin_id"] for p in data["pins"]])


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            name="search_memory",
            title="Search the team's memory",
            description=(
                "Search what your team's earlier agent sessions asked, decided, did and "
                "left open (summaries, prompts, final messages, the tools they used, pins), "
                "across projects, agents and gateways. Use it when the user refers to "
                "earlier work ('what did we decide about...', 'last week', 'who changed X "
                "and why') or before investigating something the team may already have "
                "worked out. Answers with the best few sessions, best first: session_id, "
                "when, agent, project, the words matched and one line of evidence. Call "
                "get_session with a session_id to read one."
            ),
            properties={
                "query": {
                    "type": "string",
                    "description": "What to look for, in a few words (the rarer the "
                    "better: names of files, services, errors, decisions).",
                },
                "project": _PROJECT,
                "agent": {
                    "type": "string",
                    "description": "Only this agent's sessions (its name or id).",
                },
                "since": {
                    "type": "string",
                    "description": "Only sessions active since then: an ISO date or time, "
                    "or a span back from now (24h, 7d, 2w).",
                },
                "until": {
                    "type": "string",
                    "description": "Only sessions started by then (ISO date or time).",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 20,
                    "default": 5,
                    "description": "How many sessions (default 5).",
                },
            },
            required=("query",),
            run=_search,
        ),
        Tool(
            name="get_session",
            title="One session's memory",
            description=(
                "The memory of one session, by the session_id a search or a list gave you "
                "(or the gateway's own session id): its summary (request, investigated, "
                "learned, completed, next steps), how it ended, its pending tasks, its last "
                "words and the agent's pins. Use it after search_memory or recent_sessions "
                "names a session worth reading; get_timeline shows what happened in order."
            ),
            properties={
                "session_id": {
                    "type": "string",
                    "description": "The session's id (from search_memory or recent_sessions).",
                }
            },
            required=("session_id",),
            run=_get_session,
        ),
        Tool(
            name="get_timeline",
            title="One session's timeline",
            description=(
                "What happened in one session, in order: prompts, tool uses, turn ends, "
                "compactions, one line each, a page at a time (pass next_after back as "
                "after for the next page). Use it when the order of events matters or the "
                "summary leaves a step out."
            ),
            properties={
                "session_id": {"type": "string", "description": "The session's id."},
                "after": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Start after this event (next_after of the previous page).",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": recall.TIMELINE_MAX,
                    "default": 30,
                    "description": "Events per page (default 30).",
                },
            },
            required=("session_id",),
            run=_get_timeline,
        ),
        Tool(
            name="recent_sessions",
            title="A project's recent sessions and open tasks",
            description=(
                "The newest sessions of a project, each with what was asked, and the tasks "
                "they left open that no newer session reports done. Use it when starting "
                "work on a project or to answer 'what was left open?'. Without project, "
                "the project of the session asking (when SessionHub can tell it)."
            ),
            properties={
                "project": _PROJECT,
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 20,
                    "default": 5,
                    "description": "How many sessions (default 5).",
                },
            },
            required=(),
            run=_recent,
        ),
        Tool(
            name="list_pins",
            title="An agent's pins",
            description=(
                "An agent's active pins: the facts and decisions it was asked to keep in "
                "mind across sessions, with their ids. Without agent, the agent of the "
                "session asking (when SessionHub can tell it)."
            ),
            properties={
                "agent": {
                    "type": "string",
                    "description": "The agent's name or id (search hits name agents).",
                }
            },
            required=(),
            run=_pins,
        ),
    )
}


def tools_for(token: ApiToken) -> list[Tool]:
    """The tools a token may call."""
    return [t for t in TOOLS.values() if all(token.has_scope(s) for s in t.scopes)]
