"""Continuity: score an agent's recent sessions, inherit pins, build the preamble, record it.

The algorithm follows the cross-session design: candidates are the agent's completed
sessions in the lookback window, scored ``0.4·recency + 0.35·topic overlap + 0.25·pending``;
scores under the threshold are dropped and the best three kept; up to five pins come
from the best one (critical pins within their window first, never past the active cap,
no duplicate labels). It reads only precomputed features, so the answer is fast, and it
records everything it served.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from lifecycle.models import Agent, Session, SessionStatus

from . import features as feature_lib
from .models import ContinuityRecord, Pin, SessionFeatures, Summary
from .redaction import RULES_VERSION

CLOSED = (SessionStatus.ENDED, SessionStatus.CRASHED)


def knobs() -> dict[str, Any]:
    return settings.SESSIONHUB["CONTINUITY"]


# --- scoring -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """One prior session and its score, with the parts of the score."""

    session: Session
    hours: float
    recency: float
    topic_overlap: float
    pending: float
    score: float
    features: SessionFeatures | None

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


def recency(hours: float) -> float:
    return max(0.0, 1.0 - hours / knobs()["RECENCY_HOURS"])


def decayed_confidence(hours: float, confidence: float = 1.0) -> float:
    """``confidence · max(floor, 1 - hours/168 · 0.4)``: used to filter, never stored."""
    k = knobs()
    factor = max(k["DECAY_FLOOR"], 1.0 - hours / k["RECENCY_HOURS"] * k["DECAY_PER_WEEK"])
    return confidence * factor


def score_session(
    session: Session, features: SessionFeatures | None, keywords: set[str], now: datetime
) -> Candidate:
    """Score one completed session against the current keywords."""
    k = knobs()
    ended = session.ended_at or session.last_event_at or now
    hours = max(0.0, (now - ended).total_seconds() / 3600)
    topics = [t.lower() for t in (features.hot_topics if features else [])]
    pending_count = len(features.pending_tasks) if features else 0
    parts = {
        "recency": recency(hours),
        "topic_overlap": feature_lib.jaccard(keywords, topics),
        "pending": min(1.0, k["PENDING_PER_TASK"] * pending_count),
    }
    score = (
        k["WEIGHT_RECENCY"] * parts["recency"]
        + k["WEIGHT_TOPICS"] * parts["topic_overlap"]
        + k["WEIGHT_PENDING"] * parts["pending"]
    )
    return Candidate(session=session, hours=hours, score=score, features=features, **parts)


def candidates_for(agent: Agent, *, exclude: Session, now: datetime) -> list[Session]:
    """The agent's completed sessions of the lookback window, newest first (one query)."""
    k = knobs()
    since = now - timezone.timedelta(days=k["LOOKBACK_DAYS"])
    return list(
        Session.objects.filter(agent=agent, status__in=CLOSED, ended_at__gte=since)
        .exclude(pk=exclude.pk)
        .select_related("features", "summary")
        .order_by("-ended_at")[: k["MAX_CANDIDATES"]]
    )


def _features(session: Session) -> SessionFeatures | None:
    try:
        return session.features
    except SessionFeatures.DoesNotExist:
        return None


def _summary(session: Session) -> Summary | None:
    try:
        return session.summary
    except Summary.DoesNotExist:
        return None


# --- pins --------------------------------------------------------------------------------


def session_pins_q(session: Session) -> Q:
    """The pins a session held: pinned in it, or inherited into it."""
    return Q(origin_session=session, inherited_into__isnull=True) | Q(inherited_into=session)


def _pins_of(session: Session) -> list[Pin]:
    return list(Pin.objects.filter(session_pins_q(session)).order_by("-pinned_at", "-id"))


def pins_inherit(*, target: Session, source: Session, now: datetime) -> list[Pin]:
    """Copy the source's pins into the target's agent, within every cap; the new pins."""
    k = knobs()
    cap = settings.SESSIONHUB["MAX_ACTIVE_PINS"]
    # The agent row serializes pin writes (the same lock as memory.pins.pin_create).
    Agent.objects.select_for_update().filter(pk=target.agent_id).first()
    active = list(
        Pin.objects.filter(agent_id=target.agent_id, unpinned_at__isnull=True).values_list(
            "label", flat=True
        )
    )
    room = cap - len(active)
    taken = set(active)
    critical_window = timezone.timedelta(days=k["CRITICAL_PIN_DAYS"])

    critical, normal = [], []
    for pin in _pins_of(source):
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
    created = []
    for pin in chosen:
        created.append(
            Pin.objects.create(
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
        )
    return created


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
    summary = _summary(best.session)
    if summary and (summary.completed or summary.request):
        lines += ["", f"LAST SESSION ({_ago(best.hours)}):"]
        if summary.request:
            lines.append(f"- asked: {summary.request}")
        if summary.completed:
            lines.append(f"- completed: {summary.completed}")
        if summary.next_steps:
            lines.append(f"- next: {summary.next_steps}")
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
    record = ContinuityRecord.objects.create(
        team_id=session.team_id,
        session=session,
        trigger=trigger,
        candidates=[c.as_dict() | {"used": c in chosen} for c in scored],
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
        record.sources.set([c.session for c in chosen])
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
    Session.objects.select_for_update().filter(pk=session.pk).first()
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
        score_session(s, _features(s), wanted, now)
        for s in candidates_for(session.agent, exclude=session, now=now)
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
    candidate = score_session(source, _features(source), wanted, now)
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
