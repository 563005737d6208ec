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

import re
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from lifecycle.models import OPEN_STATUSES, Agent, Session
from sessionhub.exceptions import Conflict, ValidationFailed
from sessionhub.text.redaction import RULES_VERSION, redact_text

from . import curated as curated_lib
from . import features as feature_lib
from . import relevance as relevance_lib
from .inheritance import pins_inherit, pins_with_originals
from .models import ContinuityRecord, Pin
from .preamble import (
    _MARKER_TOPIC,
    Later,
    _finished_task_ids,
    later_evidence,
    render_preamble,
)
from .scoring import (
    _EPOCH,
    Candidate,
    Features,
    Prior,
    _features,
    candidate_rows,
    candidates_from_rows,
    knobs,
    score_session,
)
from .statements import automatic_record, record_insert, row_lock


class SessionClosed(Conflict):
    code = "session_closed"


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


# The record explains the best ranked candidates part by part (every source among them, the
# runners-up a reader compares them with) and keeps only the session and the score of the
# rest: with 200 candidates the whole breakdown was 88 KB a record, written on every request.
RECORD_EXPLAINED = 20


def record_entries(ranked: list[Candidate], used: Iterable[uuid.UUID]) -> list[dict[str, Any]]:
    """The record's candidates, best first: the first ``RECORD_EXPLAINED`` and every source
    (``used``, in the order the preamble quotes them) with the parts of their score, the
    others with their score alone."""
    k = knobs()
    order = {pk: rank for rank, pk in enumerate(used)}
    return [
        c.as_record_entry(c.session.pk in order, k, order.get(c.session.pk))
        if rank < RECORD_EXPLAINED or c.session.pk in order
        else c.as_record_brief()
        for rank, c in enumerate(ranked)
    ]


def _source_order(entry: dict[str, Any]) -> tuple[int, float]:
    """Sources in the order the preamble quotes them (records made before that order was
    kept: by score)."""
    rank = entry.get("source_rank")
    return (rank if isinstance(rank, int) else 1_000, -float(entry.get("score") or 0))


def _record(
    *,
    session: Session,
    trigger: str,
    ranked: list[Candidate],
    chosen: list[Candidate],
    pins: list[Pin],
    keywords: set[str],
    preamble: str,
    requested_by: str,
    user: Any,
    stage: str = "",
    reason: str = "",
    curated: list[tuple[Pin, str]] | None = None,
    delivered: bool = True,
) -> ContinuityRecord:
    used = [c.session.pk for c in chosen]
    created = timezone.now()
    record = ContinuityRecord(
        team_id=session.team_id,
        session=session,
        trigger=trigger,
        stage=stage,
        candidates=record_entries(ranked, used),
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
        reason=reason,
        curated_pins=curated_lib.as_record(curated or []),
        # An automatic preamble is handed over in the answer that carries it; a manual
        # continue waits for the session's next prompt (``manual_continue_deliver``).
        delivered_at=created if delivered else None,
        requested_by=requested_by[:200],
        requested_by_user=user if getattr(user, "pk", None) else None,
        redaction_version=RULES_VERSION,
        created_at=created,
    )
    # The record, its sources, and each source marked continued: one statement.
    record_insert(record, [c.session.pk for c in chosen])
    return record


@dataclass(frozen=True, slots=True)
class Decision:
    """Which candidates a preamble draws from, and why; ``serve`` is False when the
    session was already told about them (its start's preamble)."""

    ranked: list[Candidate]
    chosen: list[Candidate]
    by_relevance: bool
    serve: bool = True
    reason: str = ""


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
    reason = (
        "the first prompt's relevance"
        if by_relevance
        else "recency, pending work and shared topics (the reference formula)"
    )
    return Decision(ranked, chosen, by_relevance, reason=reason)


def _name(candidate: Candidate) -> str:
    return candidate.session.external_id or str(candidate.session.pk)


def strong_evidence(best: Candidate, kept: Candidate, k: dict[str, Any]) -> str:
    """Why the first prompt's best candidate may replace the start's choice ('' when it
    may not): relevant enough, clearly more than the start's choice, on more than one
    term."""
    if best.relevance < k["RELEVANCE_STRONG"]:
        return ""
    if best.relevance < kept.relevance + k["RELEVANCE_MARGIN"]:
        return ""
    if len(best.matched) < k["STRONG_MIN_TERMS"]:
        return ""
    terms = ", ".join(f"'{t}'" for t in best.matched[:6])
    return (
        f"the first prompt matched {terms} of {_name(best)} (relevance {best.relevance:.2f} "
        f"against {kept.relevance:.2f} for {_name(kept)}, the start's choice)"
    )


def _weak(best: Candidate, kept: Candidate, k: dict[str, Any], shared: int) -> str:
    if shared:
        return f"the first prompt also opens {shared} earlier session(s), so it says little"
    if len(best.matched) < k["STRONG_MIN_TERMS"]:
        return f"the first prompt matched only {len(best.matched)} term(s) of {_name(best)}"
    return (
        f"{_name(best)} is not clearly more relevant (relevance {best.relevance:.2f} against "
        f"{kept.relevance:.2f})"
    )


def decide(
    scored: list[Candidate],
    *,
    prompt_known: bool,
    k: dict[str, Any],
    predecessor: uuid.UUID | None = None,
    start_sources: list[str] | None = None,
    shared_prompt: int = 0,
) -> Decision:
    """The sources of a preamble, pure: what ``choose`` ranks, then two rules.

    - A session that continues another (``predecessor``: a resume, a fork, a /clear)
      draws from it first, whatever its score.
    - At the first prompt of a session that was answered at its start
      (``start_sources``, best first), the prompt's best candidate replaces the start's
      choice only on strong evidence (``strong_evidence``); otherwise the start's choice
      stands and nothing new is served. A prompt that opens other sessions too
      (``shared_prompt`` of them, "load claude.md") weighs almost nothing: its relevance
      was divided by that number plus one before it got here.
    """
    base = _latest_of_conversations(choose(scored, prompt_known=prompt_known, k=k), k)
    by_pk = {str(c.session.pk): c for c in base.ranked}
    pred = by_pk.get(str(predecessor)) if predecessor else None
    if pred is not None:
        rest = [c for c in base.chosen if c is not pred][: k["MAX_SOURCES"] - 1]
        reason = f"this session continues {_name(pred)}"
        told = bool(start_sources) and (start_sources or [""])[0] == str(pred.session.pk)
        return Decision(base.ranked, [pred, *rest], base.by_relevance, not told, reason)
    if start_sources is None:
        return base
    kept = next((by_pk[pk] for pk in start_sources if pk in by_pk), None)
    best = base.chosen[0] if base.chosen else None
    if kept is None:
        return base
    start_chosen = [by_pk[pk] for pk in start_sources if pk in by_pk]
    if best is None:
        reason = f"kept the start's choice ({_name(kept)}): the first prompt picks nothing"
        return Decision(base.ranked, start_chosen, False, False, reason)
    if best is kept:
        reason = f"the first prompt agrees with the start's choice ({_name(kept)})"
        return Decision(base.ranked, base.chosen, base.by_relevance, False, reason)
    why = strong_evidence(best, kept, k) if not shared_prompt else ""
    if why:
        return Decision(base.ranked, base.chosen, base.by_relevance, True, why)
    reason = f"kept the start's choice ({_name(kept)}): " + _weak(best, kept, k, shared_prompt)
    return Decision(base.ranked, start_chosen, False, False, reason)


def _latest_of_conversations(decision: Decision, k: dict[str, Any]) -> Decision:
    """Each chosen session replaced by the newest candidate that continues it (resumed or
    forked from it, then from that one...): the continuation holds the same conversation
    and what came after, so it is the one to quote."""
    successors: dict[uuid.UUID, Candidate] = {}
    for candidate in decision.ranked:  # a session continued twice: the newest continuation
        previous = candidate.session.continues
        if previous is None:
            continue
        other = successors.get(previous)
        if other is None or (candidate.session.ended_at or _EPOCH) > (
            other.session.ended_at or _EPOCH
        ):
            successors[previous] = candidate
    if not successors:
        return decision
    chosen: list[Candidate] = []
    moved: list[str] = []
    for candidate in decision.chosen:
        latest, seen = candidate, {candidate.session.pk}
        while (
            latest.session.pk in successors and successors[latest.session.pk].session.pk not in seen
        ):
            latest = successors[latest.session.pk]
            seen.add(latest.session.pk)
        if latest is not candidate:
            moved.append(f"{_name(candidate)} continued in {_name(latest)}")
        if latest not in chosen:
            chosen.append(latest)
    if not moved:
        return decision
    reason = f"{decision.reason}; " + ", ".join(moved)
    return Decision(
        decision.ranked, chosen[: k["MAX_SOURCES"]], decision.by_relevance, True, reason
    )


def _sources_of(record: ContinuityRecord | None) -> list[str] | None:
    """A record's sources, best first (None without a record)."""
    if record is None:
        return None
    used = sorted((c for c in record.candidates if c.get("used")), key=_source_order)
    return [c["session_id"] for c in used]


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
    empty when it keeps the start's choice (``decide``). The record says why.
    """
    row_lock(Session, session.pk)
    prompt = redact_text(prompt) if prompt and prompt.strip() else ""
    stage = ContinuityRecord.Stage.PROMPT if prompt else ContinuityRecord.Stage.START
    existing = automatic_record(session.pk, stage)
    if existing is not None:
        return existing
    now = now or timezone.now()
    k = knobs()
    wanted = current_keywords(session, keywords, prompt)
    scoring = _score_priors(session, wanted, prompt, now, k)
    scored, texts, later = scoring.scored, scoring.texts, scoring.later
    start = (
        automatic_record(session.pk, ContinuityRecord.Stage.START)
        if stage == ContinuityRecord.Stage.PROMPT
        else None
    )
    decision = decide(
        scored,
        prompt_known=bool(scoring.terms),
        k=k,
        predecessor=session.previous_session_id,
        start_sources=_sources_of(start),
        shared_prompt=scoring.shared_prompt,
    )
    chosen = decision.chosen
    pins: list[Pin] = []
    if decision.serve and chosen:
        # One read for both: the agent's active pins (the team's among them) and the
        # pins the best source held.
        # The agent row serializes pin writes (as memory.pins.pin_create): taken first.
        row_lock(Agent, session.agent_id)
        read = pins_with_originals(session.agent_id, chosen[0].session.pk)
        people = curated_lib.curated_among(read, session.agent_id)
        pins = pins_inherit(target=session, source=chosen[0].session, now=now, read=read)
    else:
        people = curated_lib.curated_pins_of(session.agent_id)
    curated = curated_lib.pins_for_preamble(people, keywords=wanted, prompt=prompt)
    if not decision.serve:  # the start's preamble already told this session
        # ... all but the pins it did not quote (relevant to the prompt, or set since).
        curated = curated_lib.newly_quoted(curated, start.curated_pins if start else None)
        preamble = render_preamble([], scored, [], curated=[p for p, _ in curated])
    else:
        preamble = render_preamble(
            chosen, scored, pins, texts, later, curated=[p for p, _ in curated]
        )
    return _record(
        session=session,
        trigger=ContinuityRecord.Trigger.AUTOMATIC,
        stage=stage,
        ranked=decision.ranked,
        chosen=chosen,
        pins=pins,
        keywords=wanted,
        preamble=preamble,
        requested_by=requested_by,
        user=user,
        reason=decision.reason if chosen else "no earlier session scored above the threshold",
        curated=curated,
    )


@dataclass(frozen=True, slots=True)
class _Scoring:
    scored: list[Candidate]
    texts: dict[uuid.UUID, relevance_lib.SessionText]
    later: dict[uuid.UUID, Later]
    terms: list[str]
    shared_prompt: int = 0  # earlier sessions that open with this very prompt


@dataclass(frozen=True, slots=True)
class _Window:
    """An agent's candidates as read, and what follows from them alone (not from the
    asking session, its keywords, its prompt or the time): each candidate's features and
    summary, what the newer candidates finished, and which of its pending tasks that
    closes."""

    rows: list[tuple[Prior, Features | None]]
    summaries: dict[uuid.UUID, dict[str, str]]
    later: dict[uuid.UUID, Later]
    finished: dict[uuid.UUID, frozenset[str]]


# Windows by the rows they were built from. An agent's candidate rows change when one of
# its sessions ends or leaves the lookback, or when a candidate's features or summary are
# rebuilt; the rows then differ and a new window is built from them. Until then every
# session the agent starts asks about the same rows (at its start and at its first
# prompt), and building the window was a third of the answer's time. The rows are read
# on every request all the same: a window is never taken for rows it was not built from.
_WINDOWS: dict[tuple[tuple[Any, ...], ...], _Window] = {}
_WINDOWS_MAX = 8
_WINDOWS_LOCK = threading.Lock()


def _window(agent_id: uuid.UUID, *, exclude_pk: uuid.UUID, now: datetime) -> _Window:
    """The candidates of the agent's lookback window, built once per distinct rows."""
    key = tuple(candidate_rows(agent_id, exclude_pk=exclude_pk, now=now))
    window = _WINDOWS.get(key)
    if window is not None:
        return window
    rows, summaries = candidates_from_rows(key)
    later = later_evidence(rows, summaries)
    finished = {
        prior.pk: _finished_task_ids(features, later.get(prior.pk)) for prior, features in rows
    }
    window = _Window(rows, summaries, later, finished)
    with _WINDOWS_LOCK:
        while len(_WINDOWS) >= _WINDOWS_MAX:
            _WINDOWS.pop(next(iter(_WINDOWS)))  # the oldest first
        _WINDOWS[key] = window
    return window


def _score_priors(
    session: Session, wanted: set[str], prompt: str, now: datetime, k: dict[str, Any]
) -> _Scoring:
    """Every prior session of the agent that may be a source, scored for this one."""
    window = _window(session.agent_id, exclude_pk=session.pk, now=now)
    rows = window.rows
    terms = relevance_lib.prompt_terms(prompt) if prompt else []
    texts = relevance_lib.session_texts(
        [prior.pk for prior, _ in rows],
        terms,
        {prior.pk: features.hot_topics for prior, features in rows if features},
        window.summaries,
    )
    weights = relevance_lib.relevance_scores(terms, {pk: t.matched for pk, t in texts.items()})
    # A prompt that opens other sessions too ("load claude.md") says little about which
    # work this one continues: its relevance is shared out among them.
    shared = relevance_lib.sessions_opened_by(prompt, texts) if prompt else 0
    if shared:
        weights = {pk: w / (shared + 1) for pk, w in weights.items()}
    finished = window.finished
    scored = [
        score_session(
            prior,
            features,
            wanted,
            now,
            k,
            relevance=weights.get(prior.pk, 0.0),
            matched=tuple(t for t in terms if t in texts[prior.pk].matched) if terms else (),
            finished_later=finished[prior.pk],
        )
        for prior, features in rows
    ]
    return _Scoring(scored, texts, window.later, terms, shared)


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

    if target.team_id != source.team_id:
        raise ValidationFailed("Sessions of different teams cannot continue each other")
    if target.pk == source.pk:
        raise ValidationFailed("A session cannot continue itself", code="same_session")
    Session.objects.select_for_update().filter(pk=target.pk).first()
    target.refresh_from_db(fields=["status"])
    if target.status not in OPEN_STATUSES:
        raise SessionClosed(
            f"Session {target.external_id or target.pk} has {target.status}: a continue is "
            "handed to a session at its next prompt, and this one will have no more. Start "
            "a new session of the agent and continue that one.",
            extra={"status": target.status},
        )
    existing = ContinuityRecord.objects.filter(
        session=target, trigger=ContinuityRecord.Trigger.MANUAL, sources=source
    ).first()
    if existing is not None:
        return existing
    now = now or timezone.now()
    wanted = current_keywords(target, None, "")
    candidate = score_session(Prior.of(source), Features.of(_features(source)), wanted, now)
    pins = pins_inherit(target=target, source=source, now=now)
    curated = curated_lib.pins_for_preamble(
        curated_lib.curated_pins_of(target.agent_id), keywords=wanted
    )
    preamble = render_preamble([candidate], [candidate], pins, curated=[p for p, _ in curated])
    return _record(
        session=target,
        trigger=ContinuityRecord.Trigger.MANUAL,
        ranked=[candidate],
        chosen=[candidate],
        pins=pins,
        keywords=wanted,
        preamble=preamble,
        requested_by=requested_by or (f"user:{user}" if user else ""),
        user=user,
        reason=f"continued by hand from {source.external_id or source.pk}",
        curated=curated,
        delivered=False,
    )


def record_as_dict(record: ContinuityRecord) -> dict[str, Any]:
    """The API's answer for a continuity record: its sources best first, with their parts."""
    used = sorted((c for c in record.candidates if c.get("used")), key=_source_order)
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
        "reason": record.reason,
        "created_at": record.created_at.isoformat(),
    }


# --- a manual continue of a running session, handed over at its next prompt --------------


def manual_continue_deliver(session_ids: Iterable[str]) -> list[dict[str, Any]]:
    """The manual continues waiting for these sessions (made while they ran), each claimed
    as delivered by a conditional update (two prompts racing hand it over once); one
    entry per session, its preambles joined, oldest first."""
    waiting = list(
        ContinuityRecord.objects.filter(
            session_id__in=list(session_ids),
            trigger=ContinuityRecord.Trigger.MANUAL,
            delivered_at__isnull=True,
        ).order_by("created_at", "id")
    )
    if not waiting:
        return []
    now = timezone.now()
    by_session: dict[uuid.UUID, list[ContinuityRecord]] = {}
    for record in waiting:
        claimed = ContinuityRecord.objects.filter(pk=record.pk, delivered_at__isnull=True).update(
            delivered_at=now
        )
        if claimed == 1 and record.preamble.strip():
            by_session.setdefault(record.session_id, []).append(record)
    return [
        {
            "session_id": str(session_id),
            "record_ids": [r.pk for r in records],
            "trigger": ContinuityRecord.Trigger.MANUAL,
            "preamble": "\n\n".join(r.preamble for r in records),
        }
        for session_id, records in by_session.items()
    ]
