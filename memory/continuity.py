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
import re
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
from sessionhub.text.redaction import RULES_VERSION, redact_text

from . import features as feature_lib
from . import relevance as relevance_lib
from .models import ContinuityRecord, Pin, SessionFeatures, Summary

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
        # (active projects, pending tasks, done tasks) as JSON, read when first asked for;
        # without it every list was given decoded.
        self._texts = texts or ("[]", "[]", "[]")

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
    relevance: float = 0.0
    matched: tuple[str, ...] = ()
    pending_tasks_open: int = 0
    pending_tasks_finished_later: int = 0

    def as_dict(self) -> dict[str, Any]:
        k = knobs()
        return {
            "session_id": str(self.session.pk),
            "external_id": self.session.external_id,
            "ended_at": self.session.ended_at.isoformat() if self.session.ended_at else None,
            "hours": round(self.hours, 2),
            "recency": round(self.recency, 4),
            "topic_overlap": round(self.topic_overlap, 4),
            "pending": round(self.pending, 4),
            "relevance": round(self.relevance, 4),
            "matched_terms": list(self.matched),
            "pending_tasks": self.pending_tasks_open,
            "pending_finished_later": self.pending_tasks_finished_later,
            # The score's parts, each weighted: they add up to the score.
            "parts": {
                "recency": round(k["WEIGHT_RECENCY"] * self.recency, 4),
                "topics": round(k["WEIGHT_TOPICS"] * self.topic_overlap, 4),
                "pending": round(k["WEIGHT_PENDING"] * self.pending, 4),
                "relevance": round(k["WEIGHT_RELEVANCE"] * self.relevance, 4),
            },
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
    *,
    relevance: float = 0.0,
    matched: tuple[str, ...] = (),
    finished_later: frozenset[str] = frozenset(),
) -> Candidate:
    """Score one completed session against the current keywords (and, with a prompt, its
    relevance); tasks a later session finished do not count as pending."""
    k = k or knobs()
    ended = session.ended_at or session.last_event_at or now
    hours = max(0.0, (now - ended).total_seconds() / 3600)
    recency_part = max(0.0, 1.0 - hours / k["RECENCY_HOURS"])
    if features:
        topic_part = feature_lib.jaccard(keywords, {t.lower() for t in features.hot_topics})
        open_count = features.pending_count
        finished = 0
        if finished_later and open_count:
            finished = sum(1 for t in features.pending_tasks if t.get("id") in finished_later)
            open_count -= finished
        pending_part = min(1.0, k["PENDING_PER_TASK"] * open_count)
    else:  # no topics, no pending tasks
        topic_part = pending_part = 0.0
        open_count = finished = 0
    score = (
        k["WEIGHT_RECENCY"] * recency_part
        + k["WEIGHT_TOPICS"] * topic_part
        + k["WEIGHT_PENDING"] * pending_part
        + k["WEIGHT_RELEVANCE"] * relevance
    )
    return Candidate(
        session,
        hours,
        recency_part,
        topic_part,
        pending_part,
        score,
        features,
        relevance,
        matched,
        open_count,
        finished,
    )


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
    since = now - timedelta(days=k["LOOKBACK_DAYS"])
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
    critical_window = timedelta(days=k["CRITICAL_PIN_DAYS"])

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


class Evidence:
    """The newer sessions' sentences reporting results, newest session first, parsed once
    per request and indexed by task id and by stem, so that asking whether any of the
    first ``upto`` of them finished a task costs a few lookups, not a scan."""

    def __init__(self) -> None:
        self.count = 0
        self.by_id: dict[str, int] = {}  # task id -> first sentence naming it
        self.by_stem: dict[str, list[int]] = {}  # stem -> sentences holding it, in order

    def add(self, facts: list[feature_lib.Completion]) -> None:
        for ids, stems in facts:
            for task_id in ids:
                self.by_id.setdefault(task_id, self.count)
            for stem in stems:
                self.by_stem.setdefault(stem, []).append(self.count)
            self.count += 1

    def covers(self, text: str, upto: int) -> bool:
        """``feature_lib.superseded(text, first upto sentences)``, from the indexes."""
        ids = feature_lib.task_ids(text)
        if any(self.by_id.get(i, upto) < upto for i in ids):
            return True
        terms = feature_lib.content_stems(feature_lib.without_task_ids(text))
        if not terms:
            return False
        needed = max(1, -(-2 * len(terms) // 3))
        hits: dict[int, int] = {}
        for term in terms:
            for index in self.by_stem.get(term, ()):
                if index >= upto:
                    break
                hits[index] = hits.get(index, 0) + 1
                if hits[index] >= needed:
                    return True
        return False


@dataclass(slots=True)
class Later:
    """What the sessions that ended after one candidate say was finished: the task ids
    they closed, and the first ``upto`` sentences of the shared evidence."""

    done_ids: frozenset[str] = frozenset()
    evidence: Evidence | None = None
    upto: int = 0

    def finished(self, text: str, task_id: str = "") -> bool:
        if task_id and task_id in self.done_ids:
            return True
        if feature_lib.task_ids(text) & self.done_ids:
            return True
        return self.evidence is not None and self.evidence.covers(text, self.upto)


def later_evidence(
    rows: list[tuple[Prior, Features | None]], texts: dict[uuid.UUID, relevance_lib.SessionText]
) -> dict[uuid.UUID, Later]:
    """For each candidate (newest first), what the newer ones finished: the task ids they
    closed and the sentences of their summaries that report a result."""
    evidence: dict[uuid.UUID, Later] = {}
    done: frozenset[str] = frozenset()
    shared = Evidence()
    for prior, features in rows:
        evidence[prior.pk] = Later(done, shared, shared.count)
        if features is not None and features.done_tasks:
            done = done | frozenset(features.done_tasks)
        text = texts.get(prior.pk)
        if text is not None and text.completed:
            shared.add(
                feature_lib.completion_facts(feature_lib.completion_sentences([text.completed]))
            )
    return evidence


def _finished_task_ids(features: Features | None, later: Later | None) -> frozenset[str]:
    """The ids of a candidate's pending tasks that a newer session finished."""
    if features is None or later is None or not features.pending_count:
        return frozenset()
    if not later.done_ids and not later.upto:
        return frozenset()
    return frozenset(
        task.get("id", "")
        for task in features.pending_tasks
        if later.finished(task.get("text", ""), task.get("id", ""))
    )


def pending_for_preamble(
    chosen: list[Candidate], scored: list[Candidate], later: dict[uuid.UUID, Later] | None = None
) -> list[tuple[dict[str, Any], Candidate]]:
    """Pending tasks of the chosen sessions, minus any a later session said were done."""
    seen: set[str] = set()
    tasks = []
    for candidate in chosen:
        evidence = (later or {}).get(candidate.session.pk)
        if evidence is None:  # a manual continue: the newer of the scored sessions
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
            evidence = Later(frozenset(done))
        for task in candidate.features.pending_tasks if candidate.features else []:
            key = task.get("id", "")
            if key in seen or evidence.finished(task.get("text", ""), key):
                continue
            seen.add(key)
            tasks.append((task, candidate))
    return tasks


# Topics stored before markers were kept out of keywords: never shown as what work was about.
_MARKER_TOPIC = re.compile(r"^(?:redacted|[a-z0-9_]*_(?:key|token|assignment|secret|password))$")


class _Budget:
    """Lines of the preamble within a size budget (about four characters a token)."""

    def __init__(self, limit: int) -> None:
        self.lines: list[str] = []
        self.left = limit

    def add(self, line: str, *, minimum: int = 24) -> bool:
        cost = len(line) + 1
        if cost > self.left:
            if self.left < minimum + 2:
                return False
            line = line[: self.left - 3].rsplit(" ", 1)[0] + " …"
            cost = len(line) + 1
        self.lines.append(line)
        self.left -= cost
        return True


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text or "") if s.strip()]


_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def render_preamble(
    chosen: list[Candidate],
    scored: list[Candidate],
    pins: list[Pin],
    texts: dict[uuid.UUID, relevance_lib.SessionText] | None = None,
    later: dict[uuid.UUID, Later] | None = None,
) -> str:
    """The text handed to the new session; empty on a cold start.

    Everything quoted passes the same test: nothing a newer session reported finished is
    handed back as still to do (the best session's next steps, every pending task).
    """
    if not chosen:
        return ""
    k = knobs()
    out = _Budget(k["PREAMBLE_MAX_CHARS"])
    out.add(f"[SESSION CONTINUITY — inherited from {len(chosen)} prior session(s)]")
    best = chosen[0]
    text = (texts or {}).get(best.session.pk)
    summary = (
        {"request": text.request, "completed": text.completed, "next_steps": text.next_steps}
        if text is not None
        else _summary_of(best.session.pk)
    )
    evidence = (later or {}).get(best.session.pk) or Later()
    if summary and (summary["completed"] or summary["request"]):
        newest = max(scored, key=lambda c: c.session.ended_at or _EPOCH, default=best)
        if newest.session.pk == best.session.pk:
            title = f"LAST SESSION ({_ago(best.hours)}):"
        else:
            title = f"EARLIER SESSION ({_ago(best.hours)}, chosen over newer ones):"
        out.lines.append("")
        out.add(title)
        if summary["request"]:
            out.add(f"- asked: {summary['request'][:220]}")
        if summary["completed"]:
            out.add(f"- completed: {summary['completed'][:260]}")
        steps = [s for s in _sentences(summary["next_steps"]) if not evidence.finished(s)]
        if steps:
            out.add(f"- next: {' '.join(steps)[:200]}")
    tasks = pending_for_preamble(chosen, scored, later)
    if tasks:
        out.lines.append("")
        out.add("PENDING TASKS:")
        for task, candidate in tasks[: k["PREAMBLE_MAX_TASKS"]]:
            task_id = task.get("id", "")
            label = task_id if task_id.startswith("task-") else "todo"
            line = f"- [{label}] {task.get('text', '')[:120]} ({_ago(candidate.hours)})"
            if not out.add(line):
                break
    projects: list[str] = []
    for candidate in chosen:
        for project in candidate.features.active_projects if candidate.features else []:
            if project not in projects:
                projects.append(project)
    if projects:
        out.lines.append("")
        out.add("ACTIVE PROJECTS: " + ", ".join(projects[:3]))
    topics: list[str] = []
    for candidate in chosen:
        for topic in candidate.features.hot_topics if candidate.features else []:
            if topic not in topics and not _MARKER_TOPIC.match(topic):
                topics.append(topic)
    if topics:
        out.lines.append("")
        out.add("HOT TOPICS: " + ", ".join(topics[: k["PREAMBLE_MAX_TOPICS"]]))
    if pins:
        labels = ", ".join(pin.label for pin in pins)
        out.lines.append("")
        out.add(f"WORKING MEMORY RESTORED: {len(pins)} pins inherited ({labels})")
    while out.lines and out.lines[-1] == "":
        out.lines.pop()
    return "\n".join(out.lines)


# --- serving -----------------------------------------------------------------------------


def current_keywords(session: Session, keywords: list[str] | None, prompt: str) -> set[str]:
    """What the new session is about: given keywords, else its first prompt, else its topics.

    Redacted before anything else: keywords are stored in the record and echoed in the
    answer, and a secret lowercased is still a secret.
    """
    return {word for word in _keywords_as_given(session, keywords, prompt) if _topic_like(word)}


# A keyword is kept in the record and echoed in the answer, so beyond redaction only words
# shaped like topics are kept: a long word with a digit, or one whose case flips again and
# again (``eyJzdWIiOi``), is a token or a piece of one, never what a session is about.
_TOKEN = re.compile(r"[A-Za-z0-9_]+")
_CASE_FLIP = re.compile(r"[a-z][A-Z]")
_DIGIT = re.compile(r"\d")


def _topic_like(word: str) -> bool:
    return not (len(word) >= 12 and _DIGIT.search(word)) and len(_CASE_FLIP.findall(word)) < 3


def _keywords_as_given(session: Session, keywords: list[str] | None, prompt: str) -> set[str]:
    """The keywords before the shape check (lower case is applied after it)."""
    if keywords:
        words = [k for k in keywords if isinstance(k, str) and k.strip()]
        # Redacted one by one and together: a client that splits a prompt into words also
        # splits "password:" from the password, which then looks like any other word.
        together = redact_text(" ".join(words))
        found = set()
        for keyword in words:
            clean = redact_text(keyword)
            if clean == keyword and keyword not in together:
                continue  # redacted in its context: the word was (part of) a secret
            clean = feature_lib.without_markers(clean).strip()
            if clean and _topic_like(clean):
                found.add(clean.lower())
        return found
    if prompt:
        text = redact_text(prompt)
        # The shape check needs the words' own case, which keyword_set lowers.
        tokens = {m.group(0).lower() for m in _TOKEN.finditer(text) if not _topic_like(m.group(0))}
        return {
            word
            for word in feature_lib.keyword_set(text)
            if not tokens.intersection(_TOKEN.findall(word))
        }
    features = _features(session)
    return {t for t in features.hot_topics if not _MARKER_TOPIC.match(t)} if features else set()


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
    stage: str = "",
) -> ContinuityRecord:
    used = {c.session.pk for c in chosen}
    record = ContinuityRecord.objects.create(
        team_id=session.team_id,
        session=session,
        trigger=trigger,
        stage=stage,
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


@dataclass(frozen=True, slots=True)
class Decision:
    """Which candidates a preamble draws from, and why."""

    ranked: list[Candidate]
    chosen: list[Candidate]
    by_relevance: bool


def choose(scored: list[Candidate], *, prompt_known: bool, k: dict[str, Any]) -> Decision:
    """Rank by score (newer first on a tie), drop what is under the threshold, keep the best.

    With a prompt that some candidate is relevant to (``RELEVANCE_MIN``), only relevant
    candidates may be sources: the session about *this* work, not the freshest one.
    Without one, the reference formula decides alone.
    """
    ranked = sorted(scored, key=lambda c: (-c.score, -(c.session.ended_at or _EPOCH).timestamp()))
    eligible = ranked
    by_relevance = prompt_known and any(c.relevance >= k["RELEVANCE_MIN"] for c in ranked)
    if by_relevance:
        eligible = [c for c in ranked if c.relevance >= k["RELEVANCE_MIN"]]
    chosen = [c for c in eligible if c.score >= k["THRESHOLD"]][: k["MAX_SOURCES"]]
    return Decision(ranked, chosen, by_relevance)


def _best_source_of(record: ContinuityRecord | None) -> str | None:
    if record is None:
        return None
    used = [c for c in record.candidates if c.get("used")]
    return max(used, key=lambda c: c.get("score", 0))["session_id"] if used else None


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
    """The automatic continuity of a session; asking again returns the first answer.

    Two moments: the start (no prompt yet: recency and pending work decide) and the first
    prompt (relevance can decide). Each is answered once; the first prompt's answer is
    empty when it would repeat the start's source.
    """
    Session.objects.select_for_update().filter(pk=session.pk).values_list("pk").first()
    prompt = redact_text(prompt) if prompt and prompt.strip() else ""
    stage = ContinuityRecord.Stage.PROMPT if prompt else ContinuityRecord.Stage.START
    automatic = ContinuityRecord.objects.filter(
        session=session, trigger=ContinuityRecord.Trigger.AUTOMATIC
    )
    existing = automatic.filter(stage=stage).order_by("created_at").first()
    if existing is not None:
        return existing
    now = now or timezone.now()
    k = knobs()
    wanted = current_keywords(session, keywords, prompt)
    rows = candidates_for(session.agent_id, exclude_pk=session.pk, now=now)
    terms = relevance_lib.prompt_terms(prompt) if prompt else []
    texts = relevance_lib.session_texts(
        [prior.pk for prior, _ in rows],
        terms,
        {prior.pk: features.hot_topics for prior, features in rows if features},
    )
    weights = relevance_lib.relevance_scores(terms, {pk: t.matched for pk, t in texts.items()})
    later = later_evidence(rows, texts)
    scored = [
        score_session(
            prior,
            features,
            wanted,
            now,
            k,
            relevance=weights.get(prior.pk, 0.0),
            matched=tuple(t for t in terms if t in texts[prior.pk].matched) if terms else (),
            finished_later=_finished_task_ids(features, later.get(prior.pk)),
        )
        for prior, features in rows
    ]
    decision = choose(scored, prompt_known=bool(terms), k=k)
    chosen = decision.chosen
    repeat = (
        stage == ContinuityRecord.Stage.PROMPT
        and chosen
        and _best_source_of(automatic.filter(stage=ContinuityRecord.Stage.START).first())
        == str(chosen[0].session.pk)
    )
    if repeat:  # the start's preamble already told this session about that one
        pins: list[Pin] = []
        preamble = ""
    else:
        pins = pins_inherit(target=session, source=chosen[0].session, now=now) if chosen else []
        preamble = render_preamble(chosen, scored, pins, texts, later)
    return _record(
        session=session,
        trigger=ContinuityRecord.Trigger.AUTOMATIC,
        stage=stage,
        scored=decision.ranked,
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
    """The API's answer for a continuity record: its sources best first, with their parts."""
    used = sorted(
        (c for c in record.candidates if c.get("used")),
        key=lambda c: c.get("score", 0),
        reverse=True,
    )
    return {
        "record_id": record.pk,
        "session_id": str(record.session_id),
        "trigger": record.trigger,
        "stage": record.stage,
        "preamble": record.preamble,
        "sources": used,
        "candidates_scored": len(record.candidates),
        "inherited_pins": record.inherited_pins,
        "keywords": record.keywords,
        "created_at": record.created_at.isoformat(),
    }
