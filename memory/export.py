"""Sessions as portable JSON documents: export, and an idempotent import.

A document holds sessions with everything that hangs off them (events, pins, tails,
observations, summary, features, continuity records). Rows are named by stable keys
(session UUIDs, event ids, pin and record UIDs), never by database ids, so export →
import into an empty database → export gives the same document.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Model
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from lifecycle.models import (
    EVENT_FIELDS,
    SESSION_CONTEXT_FIELDS,
    SESSION_IDENTITY_FIELDS,
    SESSION_LINK_FIELDS,
    Agent,
    LifecycleEvent,
    Session,
)
from lifecycle.selectors import session_chain
from lifecycle.services import session_import, session_links_set
from lifecycle.state import FOLD_FIELDS
from sessionhub.models import Team
from sessionhub.text.redaction import RULES_VERSION, keyed_form, redact_value

from .models import ContinuityRecord, Observation, Pin, SessionFeatures, StreamTail, Summary
from .selectors import session_pins_q

FORMAT = "sessionhub.sessions/1"

SESSION_FIELDS = [
    *SESSION_IDENTITY_FIELDS,
    *SESSION_CONTEXT_FIELDS,
    *FOLD_FIELDS,
    *SESSION_LINK_FIELDS,
]
EXPORTED_EVENT_FIELDS = [*EVENT_FIELDS, "redaction_version"]
PIN_FIELDS = ["label", "content", "priority", "pinned_at", "unpinned_at", "redaction_version"]
TAIL_FIELDS = ["text", "final_message", "token_count", "captured_at", "redaction_version"]
OBSERVATION_FIELDS = [
    "tool_name",
    "input_digest",
    "output_digest",
    "failed",
    "occurred_at",
    "redaction_version",
]
SUMMARY_FIELDS = [
    *Summary.SECTIONS,
    "final_message",
    "outcome",
    "outcome_detail",
    "method",
    "fallback_reason",
    "llm_tokens",
    "events_seen",
    "redaction_version",
]
FEATURE_FIELDS = ["hot_topics", "active_projects", "pending_tasks", "done_tasks"]
RECORD_FIELDS = [
    "trigger",
    "candidates",
    "inherited_pins",
    "keywords",
    "preamble",
    "reason",
    "requested_by",
]


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _fields(obj: Any, names: Iterable[str]) -> dict[str, Any]:
    return {name: _plain(getattr(obj, name)) for name in names}


def _uuid(value: Any) -> str | None:
    return str(value) if value else None


def session_document(session: Session) -> dict[str, Any]:
    """One session and everything derived from it."""
    events = LifecycleEvent.objects.filter(session=session).order_by("occurred_at", "event_id")
    pins = (
        Pin.objects.filter(session_pins_q(session))
        .select_related("inherited_from")
        .order_by("pinned_at", "uid")
    )
    tails = (
        StreamTail.objects.filter(session=session)
        .select_related("event")
        .order_by("captured_at", "event__event_id")
    )
    observations = (
        Observation.objects.filter(session=session)
        .select_related("event")
        .order_by("occurred_at", "event__event_id")
    )
    summary = Summary.objects.filter(session=session).first()
    features = SessionFeatures.objects.filter(session=session).first()
    records = (
        ContinuityRecord.objects.filter(session=session)
        .prefetch_related("sources")
        .select_related("requested_by_user")
        .order_by("created_at", "uid")
    )
    agent = session.agent
    return {
        "id": str(session.pk),
        "agent": {
            "source": agent.source,
            "external_id": agent.external_id,
            "name": agent.name,
            "project": agent.project,
        },
        **_fields(session, SESSION_FIELDS),
        "previous_session": _uuid(session.previous_session_id),
        "continued_by": _uuid(session.continued_by_id),
        "events": [_fields(e, EXPORTED_EVENT_FIELDS) for e in events],
        "pins": [_pin_document(p) for p in pins],
        "tails": [{"event_id": t.event.event_id, **_fields(t, TAIL_FIELDS)} for t in tails],
        "observations": [
            {"event_id": o.event.event_id, **_fields(o, OBSERVATION_FIELDS)} for o in observations
        ],
        "summary": _fields(summary, SUMMARY_FIELDS) if summary else None,
        "features": _fields(features, FEATURE_FIELDS) if features else None,
        "continuity_records": [_record_document(r) for r in records],
    }


def _pin_document(pin: Pin) -> dict[str, Any]:
    return {
        "uid": str(pin.uid),
        **_fields(pin, PIN_FIELDS),
        "origin_session": _uuid(pin.origin_session_id),
        "inherited_into": _uuid(pin.inherited_into_id),
        "inherited_from": _uuid(pin.inherited_from.uid if pin.inherited_from else None),
    }


def _record_document(record: ContinuityRecord) -> dict[str, Any]:
    user = record.requested_by_user
    return {
        "uid": str(record.uid),
        **_fields(record, RECORD_FIELDS),
        "created_at": record.created_at.isoformat(),
        "sources": sorted(str(s.pk) for s in record.sources.all()),
        "requested_by_user": user.get_username() if user else None,
    }


def document(
    sessions: Iterable[Session], *, team: Team, progress: Callable[[], object] | None = None
) -> dict[str, Any]:
    """A document of several sessions (oldest first)."""
    items = []
    for session in sorted(sessions, key=lambda s: (s.started_at or s.created_at, str(s.pk))):
        items.append(session_document(session))
        if progress:
            progress()
    return {
        "format": FORMAT,
        "team": team.slug,
        "exported_at": timezone.now().isoformat(),
        "sessions": items,
    }


def session_export(session: Session, *, chain: bool = False) -> dict[str, Any]:
    """A session, or its whole chain, as one document."""
    sessions = session_chain(session) if chain else [session]
    return document(sessions, team=session.team)


# --- import ------------------------------------------------------------------------------


class ImportError_(ValueError):
    """A document this version cannot import."""


def _when(value: Any) -> datetime | None:
    return parse_datetime(value) if value else None


_TIME_FIELDS = {
    "started_at",
    "ended_at",
    "suspended_at",
    "first_event_at",
    "last_event_at",
    "occurred_at",
    "received_at",
    "pinned_at",
    "unpinned_at",
    "captured_at",
}


def _values(item: dict[str, Any], names: Iterable[str]) -> dict[str, Any]:
    return {
        n: (_when(item.get(n)) if n in _TIME_FIELDS else item.get(n)) for n in names if n in item
    }


@transaction.atomic
def document_import(
    doc: dict[str, Any], *, team: Team, progress: Callable[[], object] | None = None
) -> int:
    """Import a document into a team; sessions already present are left alone. Returns
    how many sessions were created."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ImportError_(f"Not a {FORMAT} document")
    created: list[dict[str, Any]] = []
    for raw in doc.get("sessions", []):
        item = redacted_session_item(raw)
        if not Session.objects.filter(pk=item["id"]).exists():
            _session_import(item, team)
            created.append(item)
        if progress:
            progress()
    # Links between sessions, once every session of the document exists.
    for item in created:
        session_links_set(
            team=team,
            session_pk=item["id"],
            previous_session=item.get("previous_session"),
            continued_by=item.get("continued_by"),
        )
    pins_by_uid = {str(p.uid): p for p in Pin.objects.filter(team=team)}
    for item in created:
        for pin in item.get("pins", []):
            if pin.get("inherited_from") in pins_by_uid:
                Pin.objects.filter(uid=pin["uid"]).update(
                    inherited_from=pins_by_uid[pin["inherited_from"]]
                )
        for record in item.get("continuity_records", []):
            row = ContinuityRecord.objects.filter(uid=record["uid"]).first()
            if row is not None:
                row.sources.set(Session.objects.filter(pk__in=record.get("sources", []), team=team))
    return len(created)


# Identifiers are stored in their keyed form (``keyed_form``), as ingest stores them: a
# secret in one becomes a marker plus a keyed hash, so two of them stay two keys.
_KEYED = {
    "external_id": 300,
    "session_key": 300,
    "previous_external_id": 200,
    "successor_external_id": 200,
    "event_id": 200,
    "hook": 100,
}
# Rows that record the rules version they were redacted with.
_VERSIONED = ("events", "pins", "tails", "observations")


def _keyed(row: dict[str, Any]) -> dict[str, Any]:
    return {
        name: keyed_form(value, limit=_KEYED[name])
        if name in _KEYED and isinstance(value, str) and value
        else value
        for name, value in row.items()
    }


def redacted_session_item(item: Any) -> dict[str, Any]:
    """A session of a document as the API would have stored it: identifiers keyed and
    every other string (payloads, facts, texts, summaries, JSON keys) redacted with the
    same rules as ingest. A document is input like any other: it may come from an older
    version, another instance or a hand, and nothing in it reaches the database
    unredacted."""
    if not isinstance(item, dict):
        raise ImportError_("a session must be an object")
    keyed = _keyed(item)
    if isinstance(item.get("agent"), dict):
        keyed["agent"] = _keyed(item["agent"])
    for name in ("events", "tails", "observations"):
        rows = item.get(name)
        if isinstance(rows, list):
            keyed[name] = [_keyed(r) if isinstance(r, dict) else r for r in rows]
    result = redact_value(keyed)
    assert isinstance(result, dict)
    for name in _VERSIONED:
        for row in result.get(name) or []:
            if isinstance(row, dict):
                row["redaction_version"] = RULES_VERSION
    for name in ("summary",):
        if isinstance(result.get(name), dict):
            result[name]["redaction_version"] = RULES_VERSION
    return result


def _session_import(item: dict[str, Any], team: Team) -> None:
    session, by_event_id = session_import(
        team=team,
        agent=item["agent"],
        session_pk=item["id"],
        session=_values(item, SESSION_FIELDS),
        events=[_values(e, EXPORTED_EVENT_FIELDS) for e in item.get("events", [])],
    )
    agent = session.agent
    _pins_import(item, team, agent)
    for model, key, fields in (
        (StreamTail, "tails", TAIL_FIELDS),
        (Observation, "observations", OBSERVATION_FIELDS),
    ):
        _event_rows_import(model, item.get(key, []), fields, team, session, by_event_id)
    if item.get("summary"):
        Summary.objects.create(
            team=team, session=session, **_values(item["summary"], SUMMARY_FIELDS)
        )
    if item.get("features"):
        SessionFeatures.objects.create(
            team=team, session=session, **_values(item["features"], FEATURE_FIELDS)
        )
    _records_import(item, team, session)


def _event_rows_import(
    model: type[Model],
    rows: list[dict[str, Any]],
    fields: list[str],
    team: Team,
    session: Session,
    by_event_id: dict[str, LifecycleEvent],
) -> None:
    """Rows made from one of the session's events (tails, observations): those whose
    event came too."""
    model._default_manager.bulk_create(
        [
            model(
                team=team,
                session=session,
                event=by_event_id[row["event_id"]],
                **_values(row, fields),
            )
            for row in rows
            if row["event_id"] in by_event_id
        ]
    )


def _pins_import(item: dict[str, Any], team: Team, agent: Agent) -> None:
    for pin in item.get("pins", []):
        # A pin shows up under its origin session and again under the session that
        # inherited it: create it once, keeping whichever link exists.
        if Pin.objects.filter(uid=pin["uid"]).exists():
            continue
        links = {
            f"{name}_id": pin[name]
            for name in ("origin_session", "inherited_into")
            if pin.get(name)
            and (pin[name] == item["id"] or Session.objects.filter(pk=pin[name]).exists())
        }
        Pin.objects.create(
            uid=pin["uid"], team=team, agent=agent, **links, **_values(pin, PIN_FIELDS)
        )


def _records_import(item: dict[str, Any], team: Team, session: Session) -> None:
    users = get_user_model()
    for record in item.get("continuity_records", []):
        username = record.get("requested_by_user")
        user = (
            users.objects.filter(**{users.USERNAME_FIELD: username}).first() if username else None
        )
        row = ContinuityRecord.objects.create(
            uid=record["uid"],
            team=team,
            session=session,
            requested_by_user=user,
            **_values(record, RECORD_FIELDS),
        )
        # auto_now_add ignores a given value; the document's time is the truth.
        ContinuityRecord.objects.filter(pk=row.pk).update(created_at=_when(record["created_at"]))
