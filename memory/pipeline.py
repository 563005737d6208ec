"""Distilling a session: tails, observations, features and the summary.

Every step is idempotent: derived rows hang off the event they came from (one
observation per tool-use event, one tail per turn end) or off the session (one summary,
one features row) and are rebuilt from the stored, already redacted events. Running the
pipeline twice changes nothing more.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from operator import itemgetter
from typing import Any

import orjson
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Case, F, Q, TextField, When
from django.db.models.functions import Cast
from django.utils import timezone

from lifecycle import services as lifecycle_services
from lifecycle.adapters import tool_input_sql, tool_io
from lifecycle.models import (
    Agent,
    EventKind,
    LifecycleEvent,
    Session,
    SessionStatus,
)
from sessionhub.db.statements import Compiled
from sessionhub.text.redaction import RULES_VERSION, redact_text, redact_value
from sessionhub.text.tails import tail_words

from . import features as feature_lib
from .mcp.audit import mcp_calls_link
from .models import (
    ContinuityRecord,
    LlmUsage,
    Observation,
    Pin,
    SessionFeatures,
    StreamTail,
    Summary,
)
from .outcome import last_outcome
from .selectors import latest_tail
from .statements import rows_insert
from .summaries import (
    LlmUnavailable,
    SummaryInput,
    llm_config,
    summarize_extractive,
    summarize_llm,
)
from .usage import usage_judge

logger = logging.getLogger(__name__)

DIGEST_LIMIT = 300
FEATURE_EVENT_LIMIT = 5000


def digest(value: Any, limit: int = DIGEST_LIMIT) -> str:
    """A short one-line rendering of a tool input or output: never whole files."""
    if value is None:
        return ""
    if isinstance(value, dict):
        # The few keys that say what a tool did, before the bulk.
        preferred = [
            k
            for k in ("command", "file_path", "filePath", "path", "pattern", "url", "query")
            if k in value
        ]
        if preferred:
            text = " ".join(str(value[k]) for k in preferred)
        elif "stdout" in value:
            # A shell's output: what it printed, not its flags sorted before it.
            text = " ".join(str(value.get(k) or "") for k in ("stdout", "stderr"))
        else:
            text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    elif isinstance(value, list):
        text = json.dumps(value, ensure_ascii=False, default=str)
    else:
        text = str(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class NewEvent:
    """What a run reads of each event past the session's cursor: plain values, not a
    model instance: a busy session's run reads hundreds of tool uses, each with its
    payload, and a model instance of each would cost more than the run's own work."""

    id: int
    kind: str
    phase: str
    source: str
    facts: dict[str, Any]
    payload: Any
    occurred_at: datetime


def _decoded(text: str) -> Any:
    """A stored JSON column's text decoded by orjson, several times sooner than the
    standard library and with the same result for anything ingestion stores (the one
    value orjson reads otherwise, an integer past 64 bits, which it makes a float, is
    refused at ingestion); by the standard library where orjson refuses the text."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


# Stand-ins for a run's values, found again among the compiled parameters.
_SESSION_ID = uuid.UUID("00000000-0000-4000-8000-0000005e5510")
_CURSOR = -86_420_135

# A run's reads, compiled once per process (``Compiled``): a run costs its statements
# whatever it finds, and most runs of a session that is not busy find a few events, so
# compiling these two (some forty columns; five with casts) cost more than running them.
_SESSION = Compiled(lambda pk: Session.objects.filter(pk=pk).order_by("pk")[:1], _SESSION_ID)
_NEW_EVENTS = Compiled(
    lambda pk, cursor: (
        LifecycleEvent.objects.filter(session_id=pk, id__gt=cursor)
        .order_by()  # sorted by ``_new_events``, not by the database
        .values_list(
            "id",
            "kind",
            "phase",
            "source",
            Cast("facts", output_field=TextField()),
            Cast("payload", output_field=TextField()),
            "occurred_at",
        )
    ),
    _SESSION_ID,
    _CURSOR,
)


def _session(session_id: str) -> Session | None:
    try:
        pk = uuid.UUID(session_id)
    except ValueError:
        return None  # not an id any session has
    found = _SESSION.instances(pk)
    return found[0] if found else None


def _new_events(session: Session) -> list[NewEvent]:
    """The session's events past its memory cursor, in the order they were stored; their
    facts and payload read as text and decoded here (``_decoded``).

    Put in order here rather than by the database: a busy session's run reads thousands
    of rows, each with its payload, and PostgreSQL sorted those wide rows on disk once
    they passed ``work_mem`` (a run of 4,500 tool uses wrote 11 MB of temporary files);
    the rows come nearly in order already, and sorting them by id here costs next to
    nothing."""
    rows = sorted(_NEW_EVENTS.rows(session.pk, session.memory_cursor), key=itemgetter(0))
    return [
        NewEvent(pk, kind, phase, source, _decoded(facts), _decoded(payload), occurred_at)
        for pk, kind, phase, source, facts, payload, occurred_at in rows
    ]


def _observations_record(session: Session, events: list[NewEvent]) -> None:
    rows = []
    for event in events:
        if event.kind != EventKind.TOOL_USE or event.phase == "pre":
            continue
        tool_input, tool_output = tool_io(event.source, event.payload)
        rows.append(
            {
                "team_id": session.team_id,
                "session_id": session.pk,
                "event_id": event.id,
                "tool_name": str(event.facts.get("tool_name") or "tool")[:200],
                "input_digest": redact_text(digest(tool_input)),
                "output_digest": redact_text(digest(tool_output)),
                "failed": bool(event.facts.get("failed")),
                "occurred_at": event.occurred_at,
                "redaction_version": RULES_VERSION,
            }
        )
    rows_insert(Observation, session, rows)


def _mcp_calls_of(session: Session, events: list[NewEvent]) -> None:
    """Name this session as the caller of the MCP calls its tool uses made (Claude Code
    sends the tool use's id with the call; the call itself names no session)."""
    ids = [
        event.payload["tool_use_id"]
        for event in events
        if event.kind == EventKind.TOOL_USE
        and str(event.facts.get("tool_name") or "").startswith("mcp__")
        and isinstance(event.payload, dict)
        and isinstance(event.payload.get("tool_use_id"), str)
    ]
    if ids:
        mcp_calls_link(team_id=session.team_id, session=session, tool_use_ids=ids)


def _same_as_latest_tail(
    session: Session, pending: list[StreamTail], text: str, final: str
) -> bool:
    latest = pending[-1] if pending else latest_tail(session)
    return (
        latest is not None
        and latest.text == redact_text(text)
        and latest.final_message == redact_text(final)
    )


def _tails_record(session: Session, events: list[NewEvent]) -> None:
    max_tokens = settings.SESSIONHUB["TAIL_TOKENS"]
    rows: list[StreamTail] = []
    for event in events:
        if event.kind not in (EventKind.TURN_END, EventKind.SESSION_END):
            continue
        reasoning = str(event.facts.get("reasoning") or "")
        final = str(event.facts.get("final_message") or "")
        if not reasoning and not final:
            continue
        text = tail_words(reasoning, max_tokens)
        if event.kind == EventKind.SESSION_END and _same_as_latest_tail(session, rows, text, final):
            continue  # the end repeats the last turn's words: one tail is enough
        rows.append(
            StreamTail(
                team_id=session.team_id,
                session=session,
                event_id=event.id,
                text=redact_text(text),
                final_message=redact_text(final),
                token_count=len(text.split()),
                captured_at=event.occurred_at,
                redaction_version=RULES_VERSION,
            )
        )
    StreamTail.objects.bulk_create(rows, ignore_conflicts=True)


# The opening prompts say what the session was asked; they are read even when the session
# is longer than the window of events read for words.
OPENING_PROMPTS = 3


def _texts(session: Session) -> dict[str, Any]:
    """The session's words by kind, from its stored events: the latest
    ``FEATURE_EVENT_LIMIT`` of them (where the final message and the open tasks are), plus
    its opening prompts. ``tools`` holds the words of each tool call's input (its values,
    never its keys); ``task_list`` the changes to the session's own task list, in order;
    ``steps`` what ``outcome.last_outcome`` reads. A subagent's end is its own: its words
    are not the session's final message or reasoning."""
    events = LifecycleEvent.objects.filter(
        session=session,
        kind__in=[EventKind.PROMPT, EventKind.TOOL_USE, EventKind.TURN_END, EventKind.SESSION_END],
    ).exclude(phase="pre")
    # The JSON columns as text, decoded below (``_decoded``): a long session's window is
    # thousands of events, read again after each of its turns. Of a payload only a tool
    # call's input is read: its output is most of the payload's bytes and no feature
    # needs it (a 5,000-event window's read cost PostgreSQL 62-91 ms whole, 16-27 ms so).
    columns = (
        "id",
        "kind",
        Cast("facts", output_field=TextField()),
        Case(When(kind=EventKind.TOOL_USE, then=tool_input_sql()), default=None),
    )
    rows = list(events.order_by("-occurred_at", "-id").values_list(*columns)[:FEATURE_EVENT_LIMIT])
    rows.reverse()
    if len(rows) == FEATURE_EVENT_LIMIT:
        window = {row[0] for row in rows}
        opening = events.filter(kind=EventKind.PROMPT).order_by("occurred_at", "id")
        rows = [
            row for row in opening.values_list(*columns)[:OPENING_PROMPTS] if row[0] not in window
        ] + rows
    texts: dict[str, Any] = {
        "prompts": [],
        "tools": [],
        "finals": [],
        "reasoning": [],
        "task_list": [],
        "steps": [],
    }
    for _, kind, facts_text, tool_input in rows:
        facts = _decoded(facts_text) or {}
        if kind == EventKind.PROMPT:
            texts["prompts"].append(str(facts.get("text") or ""))
            texts["steps"].append(("prompt", facts))
        elif kind == EventKind.TOOL_USE:
            tool_input = None if tool_input is None else _decoded(tool_input)
            texts["tools"].append(feature_lib.tool_words(tool_input))
            if isinstance(facts.get("task_list"), dict) and not facts.get("failed"):
                texts["task_list"].append(facts["task_list"])
        else:
            if facts.get("subagent"):
                continue
            texts["steps"].append(("turn" if kind == EventKind.TURN_END else "end", facts))
            if facts.get("final_message"):
                texts["finals"].append(str(facts["final_message"]))
            if facts.get("reasoning"):
                texts["reasoning"].append(str(facts["reasoning"]))
    return texts


_HOME = re.compile(r"(?:/home|/Users|/root)(?:/[^/\s]+)?|~")


def _without_paths(text: str, session: Session) -> str:
    """Text for topic counting without the working directory and home folders: every
    tool input repeats them, and they say nothing about what the session is about."""
    if session.cwd:
        text = text.replace(session.cwd, " ")
    return _HOME.sub(" ", text)


def _features_refresh(session: Session, texts: dict[str, Any]) -> SessionFeatures:
    # The agent's active pins; and, once the session is over, the pins it held when it
    # ended: the end releases them, and a task held in a pin is still open (reference
    # 004 §5.8 scans pins for pending tasks at session end). A pin unpinned by hand before
    # the end was let go on purpose and does not count.
    held = Q(agent_id=session.agent_id, unpinned_at__isnull=True)
    if session.ended_at is not None:
        held |= Q(
            Q(origin_session_id=session.pk, inherited_into__isnull=True)
            | Q(inherited_into_id=session.pk),
            unpinned_at__gte=session.ended_at,
        )
    pins = list(
        Pin.objects.filter(held)
        .order_by("pinned_at", "id")
        .values_list("label", "content", "origin_session_id", "inherited_from_id")
    )
    pin_texts = [f"{label}. {content}" for label, content, _, _ in pins]
    # A pin the team set on the agent (no session made or inherited it) is a standing
    # rule of every session, quoted by every preamble on its own (continuity.decide): its
    # words say nothing of what this session was about, so they are no topic of it.
    session_pins = [
        f"{label}. {content}"
        for label, content, origin, inherited in pins
        if origin is not None or inherited is not None
    ]
    topics = feature_lib.hot_topics(
        _without_paths(t, session)
        for t in [feature_lib.prose(p) for p in texts["prompts"]] + session_pins + texts["tools"]
    )
    # The session's own task list first; then explicit markers in what the user wrote and
    # what the agent said at the end of its turns, never in its thinking or its tools.
    pending, done = feature_lib.task_states(
        [("pin", t) for t in pin_texts]
        + [("prompt", t) for t in texts["prompts"]]
        + [("final_message", t) for t in texts["finals"]],
        feature_lib.task_list_state(texts["task_list"]),
    )
    # One name per project: the remote when there is one, else the working directory.
    projects = [session.project or session.cwd] if session.project or session.cwd else []
    values = {
        "team_id": session.team_id,
        "hot_topics": topics,
        "active_projects": projects,
        "pending_tasks": [task.as_dict() for task in pending],
        "done_tasks": sorted(done),
    }
    current = SessionFeatures.objects.filter(session=session).first()
    if current is not None and all(getattr(current, k) == v for k, v in values.items()):
        return current  # unchanged: a second run writes nothing, not even updated_at
    row, _ = SessionFeatures.objects.update_or_create(
        session=session, defaults={**values, "redaction_version": RULES_VERSION}
    )
    return row


def _llm_budget_left(team_id: int, budget: int) -> int:
    used = (
        LlmUsage.objects.filter(team_id=team_id, day=timezone.now().date())
        .values_list("tokens", flat=True)
        .first()
    )
    return budget - (used or 0)


def _llm_spend(team_id: int, day: date, tokens: int) -> None:
    try:
        with transaction.atomic():
            LlmUsage.objects.get_or_create(team_id=team_id, day=day)
    except IntegrityError:
        pass
    LlmUsage.objects.filter(team_id=team_id, day=day).update(
        tokens=F("tokens") + tokens, calls=F("calls") + 1
    )


def summary_build(session: Session, texts: dict[str, Any] | None = None) -> Summary:
    """(Re)build the session's summary; the LLM when configured and within budget. Asked
    on its own (no ``texts``: a resummarize), its features are rebuilt first, from the
    same rules: the summary reads their pending tasks."""
    if texts is None:
        texts = _texts(session)
        _features_refresh(session, texts)
    observations = list(
        Observation.objects.filter(session=session).values_list("tool_name", "input_digest")
    )
    features = SessionFeatures.objects.filter(session=session).first()
    pending = [t["text"] for t in (features.pending_tasks if features else [])]
    final = texts["finals"][-1] if texts["finals"] else ""
    listed = feature_lib.task_list_state(texts.get("task_list", []))
    data = SummaryInput(
        prompts=texts["prompts"],
        observations=observations,
        reasoning=texts["reasoning"],
        final_message=final,
        pending=pending,
        finals=texts["finals"],
        done_tasks=[item.text for item in listed if not item.open],
    )
    ended = last_outcome(texts.get("steps", []))
    draft = None
    fallback = ""
    config = llm_config()
    if config is not None:
        budget = session.team.llm_daily_token_budget
        if _llm_budget_left(session.team_id, budget) <= 0:
            fallback = "daily LLM token budget spent; extractive summary"
        else:
            spent = 0
            try:
                draft = summarize_llm(data, config)
                spent = draft.llm_tokens
            except LlmUnavailable as exc:
                fallback = f"LLM unavailable ({exc}); extractive summary"
                logger.warning("summary LLM failed for session %s: %s", session.pk, exc)
                spent = exc.tokens  # an unusable answer is billed all the same
            if spent:
                _llm_spend(session.team_id, timezone.now().date(), spent)
    if draft is None:
        draft = summarize_extractive(data)
        draft.fallback_reason = fallback
    sections = {name: redact_text(value) for name, value in draft.sections().items()}
    summary, _ = Summary.objects.update_or_create(
        session=session,
        defaults={
            "team_id": session.team_id,
            **sections,
            "final_message": redact_text(final),
            "outcome": ended.state,
            "outcome_detail": redact_text(ended.detail)[:300],
            "method": draft.method,
            "fallback_reason": draft.fallback_reason[:300],
            "llm_tokens": draft.llm_tokens,
            "events_seen": session.event_count,
            "redaction_version": RULES_VERSION,
        },
    )
    return summary


def _wants_summary(session: Session, new_events: list[NewEvent]) -> bool:
    if session.status in (SessionStatus.ENDED, SessionStatus.CRASHED):
        summary = Summary.objects.filter(session=session).only("events_seen").first()
        return summary is None or summary.events_seen != session.event_count
    # A gateway may say a turn's end is where memory is distilled (Claude Code's Stop
    # closes a turn the user may never follow up).
    return any(e.kind == EventKind.TURN_END and e.facts.get("summarize") for e in new_events)


# Events after which a session's features (topics, projects, pending tasks) are rebuilt.
_FEATURE_KINDS = {
    EventKind.SESSION_START,
    EventKind.SESSION_RESUME,
    EventKind.PROMPT,
    EventKind.TURN_END,
    EventKind.SESSION_SUSPEND,
    EventKind.SESSION_END,
}


def _wants_features(session: Session, new_events: list[NewEvent]) -> bool:
    if not new_events or session.status in (SessionStatus.ENDED, SessionStatus.CRASHED):
        return True
    return any(e.kind in _FEATURE_KINDS for e in new_events)


@dataclass(frozen=True, slots=True)
class Round:
    """What one round of a session's memory work left behind: the session's status when
    events came in during it and wait for the next round (its outbox mark is still set),
    None when it is clean."""

    waiting: str | None


def session_round(session_id: str) -> Round | None:
    """Bring a session's memory up to date with its events. None if no such session."""
    session = _session(session_id)
    if session is None:
        return None
    dirty_mark = session.memory_dirty_at
    new_events = _new_events(session)
    _observations_record(session, new_events)
    _mcp_calls_of(session, new_events)
    _tails_record(session, new_events)
    # Features and the summary read the whole session back: they follow its turns and its
    # end, not every tool use (a busy agent's stream of tool calls would otherwise cost a
    # full re-read per event).
    summarize = _wants_summary(session, new_events)
    if summarize or _wants_features(session, new_events):
        texts = _texts(session)
        features = _features_refresh(session, texts)
        if summarize:
            summary = summary_build(session, texts)
            # Did the memory it was handed help? Judged against what it has done so far.
            usage_judge(session, texts, features, summary)
    cursor = max((e.id for e in new_events), default=session.memory_cursor)
    waiting = lifecycle_services.memory_caught_up(
        str(session.pk), dirty_mark=dirty_mark, cursor=cursor
    )
    return Round(waiting=waiting)


def session_process(session_id: str) -> bool:
    """Bring a session's memory up to date with its events. False if no such session."""
    return session_round(session_id) is not None


def rows_reredact(*, model: Any, fields: list[str], batch: int = 500, only: Q | None = None) -> int:
    """Redact stored rows written under older rules (those ``only`` selects, when given);
    returns how many changed."""
    changed = 0
    queryset = model.objects.filter(redaction_version__lt=RULES_VERSION).order_by("pk")
    if only is not None:
        queryset = queryset.filter(only)
    last_pk: Any = None
    while True:
        page = queryset if last_pk is None else queryset.filter(pk__gt=last_pk)
        rows = list(page[:batch])
        if not rows:
            break
        for row in rows:
            for name in fields:
                setattr(row, name, redact_value(getattr(row, name)))
            row.redaction_version = RULES_VERSION
        model.objects.bulk_update(rows, [*fields, "redaction_version"])
        changed += len(rows)
        last_pk = rows[-1].pk
    return changed


def _of_sessions(model: Any, session_ids: list[str]) -> Q:
    """The rows of ``model`` that belong to these sessions."""
    if model is Session:
        return Q(pk__in=session_ids)
    if model is Agent:
        return Q(pk__in=Session.objects.filter(pk__in=session_ids).values("agent_id"))
    if model is Pin:
        return Q(origin_session_id__in=session_ids)
    return Q(session_id__in=session_ids)


def reredact_everything(
    progress: Any = None, session_ids: Sequence[str] | None = None
) -> dict[str, int]:
    """Re-redact every kind of stored row (of these sessions only, when given: their
    events, memory, pins and agents); ``progress(name, count)`` is told as it goes."""
    plan: list[tuple[Any, list[str]]] = [
        (LifecycleEvent, ["payload", "facts"]),
        (Pin, ["label", "content"]),
        (StreamTail, ["text", "final_message"]),
        (Observation, ["input_digest", "output_digest"]),
        (Summary, [*Summary.SECTIONS, "final_message", "outcome_detail"]),
        (SessionFeatures, ["hot_topics", "active_projects", "pending_tasks"]),
        (ContinuityRecord, ["preamble", "keywords", "inherited_pins", "curated_pins", "usage"]),
        (Session, ["cwd", "project", "session_key", "channel"]),
        # An agent's external id is its identity: new events are matched against it with
        # the rules of their own day, so it is left as it was stored.
        (Agent, ["name", "project"]),
    ]
    changed: dict[str, int] = {}
    for model, fields in plan:
        only = None if session_ids is None else _of_sessions(model, list(session_ids))
        changed[model.__name__] = rows_reredact(model=model, fields=fields, only=only)
        if progress is not None:
            progress(model.__name__, changed[model.__name__])
    return changed
