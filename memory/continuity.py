"""Continuity: score an agent's recent sessions, inherit pins, build the preamble, record it.

The algorithm follows the cross-session design: candidates are the agent's completed
sessions in the lookback window, scored ``0.4·recency + 0.35·topic overlap + 0.25·pending``;
scores under the threshold are dropped and the best three kept; up to five pins come
from the best one (critical pins within their window first, never past the active cap,
no duplicate labels). It reads only precomputed features, so the answer is fast, and it
records everything it served.

The candidates are read as plain rows (the few columns scoring needs, no model instances:
with hundreds of candidates per request, building ``Session`` objects of some forty
columns each was most of the time), and a summary only for the session the preamble
quotes.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.db.models import BigIntegerField, F, Func, IntegerField, Q, TextField, Value
from django.db.models.functions import Cast
from django.utils import timezone

from lifecycle.models import Agent, Session, SessionStatus, foreground_q

from . import features as feature_lib
from .models import ContinuityRecord, Pin, SessionFeatures, Summary
from .redaction import RULES_VERSION

CLOSED = (SessionStatus.ENDED, SessionStatus.CRASHED)


def knobs() -> dict[str, Any]:
    return settings.SESSIONHUB["CONTINUITY"]


# --- scoring -----------------------------------------------------------------------------


class Prior(NamedTuple):
    """A prior session as continuity reads it: the columns it needs, not the model."""

    pk: uuid.UUID
    external_id: str
    ended_at: datetime | None
    last_event_at: datetime | None = None

    @classmethod
    def of(cls, session: Session) -> Prior:
        return cls(session.pk, session.external_id, session.ended_at, session.last_event_at)


_UNREAD = object()


class Features:
    """What scoring and the preamble read of a session's features.

    Scoring reads every candidate's hot topics and number of pending tasks; the rest
    (projects, tasks, done tasks) only the preamble reads, for the chosen sessions and
    the ones newer than them. Those stay JSON text until first read.
    """

    __slots__ = (
        "_active_projects",
        "_done_tasks",
        "_pending_tasks",
        "_texts",
        "hot_topics",
        "pending_count",
    )

    def __init__(
        self,
        hot_topics: list[str],
        pending_count: int,
        *,
        active_projects: Any = _UNREAD,
        pending_tasks: Any = _UNREAD,
        done_tasks: Any = _UNREAD,
        texts: tuple[str, str, str] | None = None,
    ) -> None:
        self.hot_topics = hot_topics
        self.pending_count = pending_count
        self._active_projects = active_projects
        self._pending_tasks = pending_tasks
        self._done_tasks = done_tasks
        self._texts = texts  # (active projects, pending tasks, done tasks) as JSON

    @classmethod
    def of(cls, features: SessionFeatures | None) -> Features | None:
        if features is None:
            return None
        return cls(
            features.hot_topics,
            len(features.pending_tasks),
            active_projects=features.active_projects,
            pending_tasks=features.pending_tasks,
            done_tasks=features.done_tasks,
        )

    @property
    def active_projects(self) -> list[str]:
        if self._active_projects is _UNREAD:
            self._active_projects = json.loads(self._texts[0])
        return self._active_projects

    @property
    def pending_tasks(self) -> list[dict[str, Any]]:
        if self._pending_tasks is _UNREAD:
            self._pending_tasks = json.loads(self._texts[1])
        return self._pending_tasks

    @property
    def done_tasks(self) -> list[str]:
        if self._done_tasks is _UNREAD:
            self._done_tasks = json.loads(self._texts[2])
        return self._done_tasks


@dataclass(frozen=True, slots=True)
class Candidate:
    """One prior session and its score, with the parts of the score."""

    session: Prior
    hours: float
    recency: float
    topic_overlap: float
    pending: float
    score: float
    features: Features | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "session_id": str(self.session.pk),
            "external_id": self.session.external_id,
            "ended_at": self.session.ended_at.isoformat() if self.session.ended_at else None,
            "hours": round(self.hours, 2),
            "recency": round(self.recency, 4),
            "topic_overlap": round(self.topic_overlap, 4),
            "pending": round(self.pending, 4),
            "score": round(self.score, 4),
        }

    def as_record_entry(self, used: bool) -> dict[str, Any]:
        """``as_dict()`` with ``used``: what the record keeps of every candidate."""
        return {**self.as_dict(), "used": used}


def recency(hours: float) -> float:
    return max(0.0, 1.0 - hours / knobs()["RECENCY_HOURS"])


def decayed_confidence(hours: float, confidence: float = 1.0) -> float:
    """``confidence · max(floor, 1 - hours/168 · 0.4)``: used to filter, never stored."""
    k = knobs()
    factor = max(k["DECAY_FLOOR"], 1.0 - hours / k["RECENCY_HOURS"] * k["DECAY_PER_WEEK"])
    return confidence * factor


def score_session(
    session: Prior,
    features: Features | None,
    keywords: set[str],
    now: datetime,
    k: dict[str, Any] | None = None,
) -> Candidate:
    """Score one completed session against the current keywords."""
    k = k or knobs()
    ended = session.ended_at or session.last_event_at or now
    hours = max(0.0, (now - ended).total_seconds() / 3600)
    recency_part = max(0.0, 1.0 - hours / k["RECENCY_HOURS"])
    if features:
        # feature_lib.jaccard(keywords, lowered topics) without building the union:
        # len(a | b) == len(a) + len(b) - len(a & b), the same integers, the same quotient.
        topics = {t.lower() for t in features.hot_topics}
        if keywords and topics:
            common = len(keywords & topics)
            topic_part = common / (len(keywords) + len(topics) - common)
        else:
            topic_part = 0.0
        pending_part = min(1.0, k["PENDING_PER_TASK"] * features.pending_count)
    else:  # no topics, no pending tasks
        topic_part = pending_part = 0.0
    score = (
        k["WEIGHT_RECENCY"] * recency_part
        + k["WEIGHT_TOPICS"] * topic_part
        + k["WEIGHT_PENDING"] * pending_part
    )
    return Candidate(session, hours, recency_part, topic_part, pending_part, score, features)


class _ArrayLength(Func):
    """PostgreSQL: a jsonb column's array length; NULL when it holds something else."""

    template = (
        "CASE WHEN jsonb_typeof(%(expressions)s) = 'array' "
        "THEN jsonb_array_length(%(expressions)s) END"
    )
    output_field = IntegerField()


class _EpochMicroseconds(Func):
    """PostgreSQL: a timestamp as whole microseconds since 1970 (exact: the epoch is numeric).

    A timestamp Django reads goes through its own psycopg loader, in Python (some 10 µs a
    value); an integer is read in C, and ``_EPOCH + timedelta`` gives the same datetime.
    """

    template = "(EXTRACT(EPOCH FROM %(expressions)s) * 1000000)::bigint"
    output_field = BigIntegerField()


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _text(field: str) -> Cast:
    return Cast(field, output_field=TextField())


def candidates_for(
    agent_id: uuid.UUID, *, exclude_pk: uuid.UUID, now: datetime
) -> list[tuple[Prior, Features | None]]:
    """The agent's completed sessions of the lookback window with their features, newest
    first (one query; plain rows, no model instances, JSON decoded only where needed)."""
    k = knobs()
    since = now - timezone.timedelta(days=k["LOOKBACK_DAYS"])
    if connection.vendor == "postgresql":
        ended: Any = _EpochMicroseconds("ended_at")
        pending_count: Any = _ArrayLength(F("features__pending_tasks"))
    else:  # the datetime, and the count from the decoded tasks
        ended, pending_count = "ended_at", Value(None, output_field=IntegerField())
    rows = (
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
            "features__id",  # NULL: no features row
            _text("features__hot_topics"),
            pending_count,
            _text("features__active_projects"),
            _text("features__pending_tasks"),
            _text("features__done_tasks"),
        )[: k["MAX_CANDIDATES"]]
    )
    # ended_at is never NULL here (the filter), so the last_event_at fallback is not read.
    loads = json.loads
    candidates = []
    for pk, external_id, ended_at, features_id, topics, count, *texts in rows:
        if type(ended_at) is int:
            ended_at = _EPOCH + timedelta(microseconds=ended_at)
        features = None
        if features_id is not None:
            if count is None:  # not an array, or not PostgreSQL: len() of the decoded value
                count = len(loads(texts[1]))
            features = Features(loads(topics), count, texts=tuple(texts))
        candidates.append((Prior(pk, external_id, ended_at), features))
    return candidates


def _features(session: Session) -> SessionFeatures | None:
    try:
        return session.features
    except SessionFeatures.DoesNotExist:
        return None


# What the preamble quotes of the best session's summary.
_SUMMARY_COLUMNS = ("request", "completed", "next_steps")


def _summary_of(session_pk: uuid.UUID) -> dict[str, str] | None:
    """The parts of a session's summary the preamble quotes (one query), None without one."""
    return Summary.objects.filter(session_id=session_pk).values(*_SUMMARY_COLUMNS).first()


# --- pins --------------------------------------------------------------------------------


def _pins_q(session_pk: uuid.UUID) -> Q:
    return Q(origin_session_id=session_pk, inherited_into__isnull=True) | Q(
        inherited_into_id=session_pk
    )


def session_pins_q(session: Session) -> Q:
    """The pins a session held: pinned in it, or inherited into it."""
    return _pins_q(session.pk)


def pins_inherit(*, target: Session, source: Session | Prior, now: datetime) -> list[Pin]:
    """Copy the source's pins into the target's agent, within every cap; the new pins."""
    k = knobs()
    cap = settings.SESSIONHUB["MAX_ACTIVE_PINS"]
    # The agent row serializes pin writes (the same lock as memory.pins.pin_create).
    Agent.objects.select_for_update().filter(pk=target.agent_id).values_list("pk").first()
    # One read for both: the agent's active pins, and the pins the source held (with the
    # originals they were copied from: the copies point at those, and the record names them).
    agent_id, source_pk = target.agent_id, source.pk
    pins = list(
        Pin.objects.filter(Q(agent_id=agent_id, unpinned_at__isnull=True) | _pins_q(source_pk))
        .select_related("inherited_from")
        .order_by("-pinned_at", "-id")
    )
    active = [p.label for p in pins if p.agent_id == agent_id and p.unpinned_at is None]
    held = [
        p
        for p in pins
        if p.inherited_into_id == source_pk
        or (p.origin_session_id == source_pk and p.inherited_into_id is None)
    ]
    room = cap - len(active)
    taken = set(active)
    critical_window = timezone.timedelta(days=k["CRITICAL_PIN_DAYS"])

    critical, normal = [], []
    for pin in held:
        if pin.label in taken:
            continue
        hours = max(0.0, (now - pin.pinned_at).total_seconds() / 3600)
        if pin.priority == Pin.Priority.CRITICAL and now - pin.pinned_at <= critical_window:
            critical.append(pin)
        elif decayed_confidence(hours) >= k["MIN_PIN_CONFIDENCE"]:
            normal.append(pin)
        taken.add(pin.label)

    # Critical pins override the inheritance limit but never the active cap.
    chosen = critical[:room]
    chosen += normal[: max(0, min(room - len(chosen), k["MAX_INHERITED_PINS"]))]
    # One INSERT for all of them (none when nothing is chosen).
    return Pin.objects.bulk_create(
        [
            Pin(
                team_id=target.team_id,
                agent_id=target.agent_id,
                label=pin.label,
                content=pin.content,
                priority=pin.priority,
                # The knowledge is as old as the original pin: inheriting it again and
                # again must not make it look fresh to the decay filter.
                pinned_at=pin.pinned_at,
                origin_session=None,
                inherited_from=pin.inherited_from or pin,
                inherited_into=target,
                redaction_version=pin.redaction_version,
            )
            for pin in chosen
        ]
    )


def pins_release(session: Session, at: datetime | None = None) -> int:
    """A session's working memory ends with it: its pins stop being active (kept for provenance)."""
    return (
        Pin.objects.filter(session_pins_q(session))
        .filter(unpinned_at__isnull=True)
        .update(unpinned_at=at or timezone.now())
    )


# --- the preamble ------------------------------------------------------------------------


def _ago(hours: float) -> str:
    if hours < 1:
        return "<1h ago"
    if hours < 48:
        return f"{int(hours)}h ago"
    return f"{int(hours // 24)}d ago"


def pending_for_preamble(
    chosen: list[Candidate], scored: list[Candidate]
) -> list[tuple[dict[str, Any], Candidate]]:
    """Pending tasks of the chosen sessions, minus any a later session said were done."""
    seen: set[str] = set()
    tasks = []
    for candidate in chosen:
        ended = candidate.session.ended_at
        done: set[str] = set()
        for other in scored:
            if (
                other.features
                and ended
                and other.session.ended_at
                and other.session.ended_at > ended
            ):
                done.update(other.features.done_tasks or [])
        for task in candidate.features.pending_tasks if candidate.features else []:
            key = task.get("id", "")
            if key in done or key in seen:
                continue
            seen.add(key)
            tasks.append((task, candidate))
    return tasks


def render_preamble(chosen: list[Candidate], scored: list[Candidate], pins: list[Pin]) -> str:
    """The text handed to the new session; empty on a cold start."""
    if not chosen:
        return ""
    lines = [f"[SESSION CONTINUITY — inherited from {len(chosen)} prior session(s)]"]
    best = chosen[0]
    summary = _summary_of(best.session.pk)
    if summary and (summary["completed"] or summary["request"]):
        lines += ["", f"LAST SESSION ({_ago(best.hours)}):"]
        if summary["request"]:
            lines.append(f"- asked: {summary['request']}")
        if summary["completed"]:
            lines.append(f"- completed: {summary['completed']}")
        if summary["next_steps"]:
            lines.append(f"- next: {summary['next_steps']}")
    tasks = pending_for_preamble(chosen, scored)
    if tasks:
        lines += ["", "PENDING TASKS:"]
        for task, candidate in tasks[:10]:
            task_id = task.get("id", "")
            label = task_id if task_id.startswith("task-") else "todo"
            lines.append(f"- [{label}] {task.get('text', '')} ({_ago(candidate.hours)})")
    projects: list[str] = []
    for candidate in chosen:
        for project in candidate.features.active_projects if candidate.features else []:
            if project not in projects:
                projects.append(project)
    if projects:
        lines += ["", "ACTIVE PROJECTS: " + ", ".join(projects[:5])]
    topics: list[str] = []
    for candidate in chosen:
        for topic in candidate.features.hot_topics if candidate.features else []:
            if topic not in topics:
                topics.append(topic)
    if topics:
        lines += ["", "HOT TOPICS: " + ", ".join(topics[:20])]
    if pins:
        labels = ", ".join(pin.label for pin in pins)
        lines += ["", f"WORKING MEMORY RESTORED: {len(pins)} pins inherited ({labels})"]
    return "\n".join(lines)


# --- serving -----------------------------------------------------------------------------


def current_keywords(session: Session, keywords: list[str] | None, prompt: str) -> set[str]:
    """What the new session is about: given keywords, else its first prompt, else its topics."""
    if keywords:
        return {k.lower() for k in keywords if isinstance(k, str) and k}
    if prompt:
        return feature_lib.keyword_set(prompt)
    features = _features(session)
    return set(features.hot_topics) if features else set()


def _record(
    *,
    session: Session,
    trigger: str,
    scored: list[Candidate],
    chosen: list[Candidate],
    pins: list[Pin],
    keywords: set[str],
    preamble: str,
    requested_by: str,
    user: Any,
) -> ContinuityRecord:
    used = {c.session.pk for c in chosen}
    record = ContinuityRecord.objects.create(
        team_id=session.team_id,
        session=session,
        trigger=trigger,
        candidates=[c.as_record_entry(c.session.pk in used) for c in scored],
        inherited_pins=[
            {
                "uid": str(p.uid),
                "label": p.label,
                "priority": p.priority,
                "inherited_from": str(p.inherited_from.uid) if p.inherited_from else None,
                "origin_session": str(p.inherited_from.origin_session_id)
                if p.inherited_from and p.inherited_from.origin_session_id
                else None,
            }
            for p in pins
        ],
        keywords=sorted(keywords),
        preamble=preamble,
        requested_by=requested_by[:200],
        requested_by_user=user if getattr(user, "pk", None) else None,
        redaction_version=RULES_VERSION,
    )
    if chosen:
        # One INSERT for the sources (the record is new: nothing to compare with), one UPDATE.
        through = ContinuityRecord.sources.through
        through.objects.bulk_create(
            [through(continuityrecord_id=record.pk, session_id=c.session.pk) for c in chosen]
        )
        Session.objects.filter(pk__in=[c.session.pk for c in chosen]).update(continued_by=session)
    return record


@transaction.atomic
def continuity_build(
    *,
    session: Session,
    keywords: list[str] | None = None,
    prompt: str = "",
    requested_by: str = "",
    user: Any = None,
    now: datetime | None = None,
) -> ContinuityRecord:
    """The automatic continuity of a session; asking again returns the first answer."""
    Session.objects.select_for_update().filter(pk=session.pk).values_list("pk").first()
    existing = (
        ContinuityRecord.objects.filter(session=session, trigger=ContinuityRecord.Trigger.AUTOMATIC)
        .order_by("created_at")
        .first()
    )
    if existing is not None:
        return existing
    now = now or timezone.now()
    k = knobs()
    wanted = current_keywords(session, keywords, prompt)
    scored = [
        score_session(prior, features, wanted, now, k)
        for prior, features in candidates_for(session.agent_id, exclude_pk=session.pk, now=now)
    ]
    ranked = sorted(scored, key=lambda c: c.score, reverse=True)
    chosen = [c for c in ranked if c.score >= k["THRESHOLD"]][: k["MAX_SOURCES"]]
    pins = pins_inherit(target=session, source=chosen[0].session, now=now) if chosen else []
    preamble = render_preamble(chosen, scored, pins)
    return _record(
        session=session,
        trigger=ContinuityRecord.Trigger.AUTOMATIC,
        scored=scored,
        chosen=chosen,
        pins=pins,
        keywords=wanted,
        preamble=preamble,
        requested_by=requested_by,
        user=user,
    )


@transaction.atomic
def continuity_continue(
    *,
    target: Session,
    source: Session,
    user: Any = None,
    requested_by: str = "",
    now: datetime | None = None,
) -> ContinuityRecord:
    """A manual continue: the target inherits from a chosen session, whatever its score."""
    from sessionhub.exceptions import ValidationFailed

    if target.team_id != source.team_id:
        raise ValidationFailed("Sessions of different teams cannot continue each other")
    if target.pk == source.pk:
        raise ValidationFailed("A session cannot continue itself", code="same_session")
    Session.objects.select_for_update().filter(pk=target.pk).first()
    existing = ContinuityRecord.objects.filter(
        session=target, trigger=ContinuityRecord.Trigger.MANUAL, sources=source
    ).first()
    if existing is not None:
        return existing
    now = now or timezone.now()
    wanted = current_keywords(target, None, "")
    candidate = score_session(Prior.of(source), Features.of(_features(source)), wanted, now)
    pins = pins_inherit(target=target, source=source, now=now)
    preamble = render_preamble([candidate], [candidate], pins)
    return _record(
        session=target,
        trigger=ContinuityRecord.Trigger.MANUAL,
        scored=[candidate],
        chosen=[candidate],
        pins=pins,
        keywords=wanted,
        preamble=preamble,
        requested_by=requested_by or (f"user:{user}" if user else ""),
        user=user,
    )


def record_as_dict(record: ContinuityRecord) -> dict[str, Any]:
    """The API's answer for a continuity record."""
    used = [c for c in record.candidates if c.get("used")]
    return {
        "record_id": record.pk,
        "session_id": str(record.session_id),
        "trigger": record.trigger,
        "preamble": record.preamble,
        "sources": used,
        "candidates_scored": len(record.candidates),
        "inherited_pins": record.inherited_pins,
        "keywords": record.keywords,
        "created_at": record.created_at.isoformat(),
    }
