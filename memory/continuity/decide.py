"""Continuity, second stage: what an answer says, decided from what was read.

Pure: no query, no model import (the pins read are only handed through). The score is
``0.4·recency + 0.35·topic overlap + 0.25·pending`` plus relevance to the first prompt
when there is one (each term weighted by how rare it is among the candidates:
``log(1 + n / df)``); scores under the threshold are dropped and the best three kept
(``decide`` adds the rules for a continued session and for the first prompt after the
start's answer). Up to five pins come from the best source (critical pins within their
window first, never past the active cap, no duplicate labels), and the pins people set
that the preamble quotes are chosen here too.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sessionhub.text.redaction import redact_text

from .. import features as feature_lib
from ..outcome import FINISHED
from .data import UNIX_EPOCH, Features, Knobs, Prior, knobs

if TYPE_CHECKING:  # types only: this stage neither queries nor reads
    from ..models import Pin
    from ..relevance import SessionText

CRITICAL_PRIORITY = "critical"  # Pin.Priority.CRITICAL

# --- what newer sessions finished ----------------------------------------------------------


class Evidence:
    """The newer sessions' sentences reporting results, newest session first, parsed once
    per request and indexed by task id and by stem, so that asking whether any of the
    first ``upto`` of them finished a task costs a few lookups, not a scan."""

    def __init__(self) -> None:
        self.count = 0
        self.by_id: dict[str, int] = {}  # task id -> first sentence naming it
        self.by_stem: dict[str, list[int]] = {}  # stem -> sentences holding it, in order
        self.of_work: set[int] = set()  # the sentences that name a kind of work

    def add(self, facts: Iterable[feature_lib.Completion]) -> None:
        for ids, stems in facts:
            for task_id in ids:
                self.by_id.setdefault(task_id, self.count)
            for stem in stems:
                self.by_stem.setdefault(stem, []).append(self.count)
            if feature_lib.names_kind_of_work(stems):
                self.of_work.add(self.count)
            self.count += 1

    def covers(self, text: str, upto: int) -> bool:
        """``feature_lib.superseded(text, first upto sentences)``, from the indexes."""
        ids = feature_lib.task_ids(text)
        if any(self.by_id.get(i, upto) < upto for i in ids):
            return True
        terms, about = feature_lib.step_terms(text)
        return self._held(terms, upto) or self._held(about, upto, self.of_work)

    def _held(self, terms: frozenset[str], upto: int, among: set[int] | None = None) -> bool:
        """Whether one of the first ``upto`` sentences (of ``among``, when given) holds two
        thirds of ``terms``."""
        if not terms:
            return False
        needed = feature_lib.two_thirds(terms)
        hits: dict[int, int] = {}
        for term in terms:
            for index in self.by_stem.get(term, ()):
                if index >= upto:
                    break
                if among is not None and index not in among:
                    continue
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
    rows: Sequence[tuple[Prior, Features | None]], summaries: dict[uuid.UUID, dict[str, str]]
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
        summary = summaries.get(prior.pk, {})
        completed = summary.get("completed")
        if completed:
            shared.add(feature_lib.completion_facts_of(completed))
        if summary.get("outcome") == FINISHED and summary.get("request"):
            # A session that finished did what it was asked.
            shared.add(feature_lib.completion_facts([summary["request"]]))
    return evidence


def finished_task_ids(features: Features | None, later: Later | None) -> frozenset[str]:
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


@dataclass(frozen=True, slots=True)
class Prepared:
    """What follows from an agent's candidates alone (not from the asking session, its
    keywords, its prompt or the time): what the newer candidates finished, and which of
    each one's pending tasks that closes."""

    later: dict[uuid.UUID, Later]
    finished: dict[uuid.UUID, frozenset[str]]


def prepare(
    rows: Sequence[tuple[Prior, Features | None]], summaries: dict[uuid.UUID, dict[str, str]]
) -> Prepared:
    later = later_evidence(rows, summaries)
    finished = {
        prior.pk: finished_task_ids(features, later.get(prior.pk)) for prior, features in rows
    }
    return Prepared(later, finished)


# --- scoring -------------------------------------------------------------------------------


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

    def as_dict(self, k: Knobs | None = None) -> dict[str, Any]:
        k = k or knobs()
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
                "recency": round(k.weight_recency * self.recency, 4),
                "topics": round(k.weight_topics * self.topic_overlap, 4),
                "pending": round(k.weight_pending * self.pending, 4),
                "relevance": round(k.weight_relevance * self.relevance, 4),
            },
            "score": round(self.score, 4),
        }


def recency(hours: float, k: Knobs | None = None) -> float:
    """1 for a session that just ended, falling to 0 at ``recency_hours``."""
    return max(0.0, 1.0 - hours / float((k or knobs()).recency_hours))


def decayed_confidence(hours: float, confidence: float = 1.0, k: Knobs | None = None) -> float:
    """``confidence · max(floor, 1 - hours/168 · 0.4)``: used to filter, never stored."""
    k = k or knobs()
    factor = max(k.decay_floor, 1.0 - hours / k.recency_hours * k.decay_per_week)
    return confidence * float(factor)


def score_session(
    session: Prior,
    features: Features | None,
    keywords: set[str],
    now: datetime,
    k: Knobs | None = None,
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
    recency_part = recency(hours, k)
    if features:
        topic_part = feature_lib.jaccard(keywords, features.topic_set)
        open_count = features.pending_count
        finished = 0
        if finished_later and open_count:
            finished = sum(1 for t in features.pending_tasks if t.get("id") in finished_later)
            open_count -= finished
        pending_part = min(1.0, k.pending_per_task * open_count)
    else:  # no topics, no pending tasks
        topic_part = pending_part = 0.0
        open_count = finished = 0
    score = (
        k.weight_recency * recency_part
        + k.weight_topics * topic_part
        + k.weight_pending * pending_part
        + k.weight_relevance * relevance
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


# --- relevance to the first prompt --------------------------------------------------------

MAX_TERMS = 24


def prompt_terms(text: str) -> list[str]:
    """The prompt's distinct keywords (already redacted text), in order, at most 24."""
    return list(feature_lib.keywords([text]))[:MAX_TERMS]


def relevance_scores(
    terms: Sequence[str], matched: dict[uuid.UUID, set[str]]
) -> dict[uuid.UUID, float]:
    """Each candidate's share of the prompt's terms, weighted by how rare each term is."""
    if not terms or not matched:
        return {pk: 0.0 for pk in matched}
    n = len(matched)
    df = {term: sum(1 for hits in matched.values() if term in hits) for term in terms}
    weight = {term: math.log(1 + n / max(1, df[term])) for term in terms}
    total = sum(weight.values())
    return {pk: sum(weight[t] for t in hits) / total for pk, hits in matched.items()}


def _normal(text: str) -> str:
    return " ".join(feature_lib.prose(text).split()).lower()


def sessions_opened_by(prompt: str, texts: dict[uuid.UUID, SessionText]) -> int:
    """How many candidates have this prompt among their opening prompts (the summary's
    request is the opening prompts joined by " / ")."""
    wanted = _normal(prompt)[:300]
    if not wanted:
        return 0
    return sum(
        1
        for text in texts.values()
        if any(part.strip().lower().rstrip(" …") == wanted for part in text.request.split(" / "))
    )


# --- what the new session is about ---------------------------------------------------------

# Topics stored before markers were kept out of keywords: never shown as what work was about.
MARKER_TOPIC = re.compile(r"^(?:redacted|[a-z0-9_]*_(?:key|token|assignment|secret|password))$")

# A keyword is kept in the record and echoed in the answer, so beyond redaction only words
# shaped like topics are kept: a long word with a digit, or one whose case flips again and
# again (``eyJzdWIiOi``), is a token or a piece of one, never what a session is about.
_TOKEN = re.compile(r"[A-Za-z0-9_]+")
_CASE_FLIP = re.compile(r"[a-z][A-Z]")
_DIGIT = re.compile(r"\d")


def _topic_like(word: str) -> bool:
    return not (len(word) >= 12 and _DIGIT.search(word)) and len(_CASE_FLIP.findall(word)) < 3


def current_keywords(
    keywords: list[str] | None, prompt: str, hot_topics: Sequence[str] = ()
) -> set[str]:
    """What the new session is about: given keywords, else its first prompt (redacted),
    else its ``hot_topics``.

    Redacted before anything else: keywords are stored in the record and echoed in the
    answer, and a secret lowercased is still a secret.
    """
    return {word for word in _keywords_as_given(keywords, prompt, hot_topics) if _topic_like(word)}


def _keywords_as_given(
    keywords: list[str] | None, prompt: str, hot_topics: Sequence[str]
) -> set[str]:
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
    return {t for t in hot_topics if not MARKER_TOPIC.match(t)}


@dataclass(frozen=True, slots=True)
class Scoring:
    """Every candidate scored for the asking session, with what the preamble quotes of
    them: their words (``texts``) and what newer sessions finished (``later``)."""

    scored: list[Candidate]
    texts: dict[uuid.UUID, SessionText]
    later: dict[uuid.UUID, Later]
    terms: list[str]
    shared_prompt: int = 0  # earlier sessions that open with this very prompt


def score_priors(
    rows: Sequence[tuple[Prior, Features | None]],
    prepared: Prepared,
    texts: dict[uuid.UUID, SessionText],
    *,
    wanted: set[str],
    terms: list[str],
    prompt: str,
    now: datetime,
    k: Knobs,
) -> Scoring:
    """Every prior session of the agent that may be a source, scored for this one."""
    weights = relevance_scores(terms, {pk: t.matched for pk, t in texts.items()})
    # A prompt that opens other sessions too ("load claude.md") says little about which
    # work this one continues: its relevance is shared out among them.
    shared = sessions_opened_by(prompt, texts) if prompt else 0
    if shared:
        weights = {pk: w / (shared + 1) for pk, w in weights.items()}
    finished = prepared.finished
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
    return Scoring(scored, texts, prepared.later, terms, shared)


# --- the sources ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Decision:
    """Which candidates a preamble draws from, and why; ``serve`` is False when the
    session was already told about them (its start's preamble)."""

    ranked: list[Candidate]
    chosen: list[Candidate]
    by_relevance: bool
    serve: bool = True
    reason: str = ""


def choose(scored: list[Candidate], *, prompt_known: bool, k: Knobs) -> Decision:
    """Rank by score (newer first on a tie), drop what is under the threshold, keep the best.

    With a prompt that some candidate is relevant to (``relevance_min``), only relevant
    candidates may be sources: the session about *this* work, not the freshest one.
    Without one, the reference formula decides alone.
    """
    ranked = sorted(
        scored, key=lambda c: (-c.score, -(c.session.ended_at or UNIX_EPOCH).timestamp())
    )
    eligible = ranked
    by_relevance = prompt_known and any(c.relevance >= k.relevance_min for c in ranked)
    if by_relevance:
        eligible = [c for c in ranked if c.relevance >= k.relevance_min]
    chosen = [c for c in eligible if c.score >= k.threshold][: k.max_sources]
    reason = (
        "the first prompt's relevance"
        if by_relevance
        else "recency, pending work and shared topics (the reference formula)"
    )
    return Decision(ranked, chosen, by_relevance, reason=reason)


def _name(candidate: Candidate) -> str:
    return candidate.session.external_id or str(candidate.session.pk)


def strong_evidence(best: Candidate, kept: Candidate, k: Knobs) -> str:
    """Why the first prompt's best candidate may replace the start's choice ('' when it
    may not): relevant enough, clearly more than the start's choice, on more than one
    term."""
    if best.relevance < k.relevance_strong:
        return ""
    if best.relevance < kept.relevance + k.relevance_margin:
        return ""
    if len(best.matched) < k.strong_min_terms:
        return ""
    terms = ", ".join(f"'{t}'" for t in best.matched[:6])
    return (
        f"the first prompt matched {terms} of {_name(best)} (relevance {best.relevance:.2f} "
        f"against {kept.relevance:.2f} for {_name(kept)}, the start's choice)"
    )


def _weak(best: Candidate, kept: Candidate, k: Knobs, shared: int) -> str:
    if shared:
        return f"the first prompt also opens {shared} earlier session(s), so it says little"
    if len(best.matched) < k.strong_min_terms:
        return f"the first prompt matched only {len(best.matched)} term(s) of {_name(best)}"
    return (
        f"{_name(best)} is not clearly more relevant (relevance {best.relevance:.2f} against "
        f"{kept.relevance:.2f})"
    )


def decide(
    scored: list[Candidate],
    *,
    prompt_known: bool,
    k: Knobs,
    predecessor: uuid.UUID | None = None,
    start_sources: list[str] | None = None,
    shared_prompt: int = 0,
) -> Decision:
    """The sources of a preamble: what ``choose`` ranks, then two rules.

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
        rest = [c for c in base.chosen if c is not pred][: k.max_sources - 1]
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


def _latest_of_conversations(decision: Decision, k: Knobs) -> Decision:
    """Each chosen session replaced by the newest candidate that continues it (resumed or
    forked from it, then from that one...): the continuation holds the same conversation
    and what came after, so it is the one to quote."""
    successors: dict[uuid.UUID, Candidate] = {}
    for candidate in decision.ranked:  # a session continued twice: the newest continuation
        previous = candidate.session.continues
        if previous is None:
            continue
        other = successors.get(previous)
        if other is None or (candidate.session.ended_at or UNIX_EPOCH) > (
            other.session.ended_at or UNIX_EPOCH
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
    return Decision(decision.ranked, chosen[: k.max_sources], decision.by_relevance, True, reason)


# --- pins ----------------------------------------------------------------------------------


def pins_to_inherit(
    read: list[Pin],
    *,
    agent_id: uuid.UUID,
    source_pk: uuid.UUID,
    now: datetime,
    cap: int,
    k: Knobs,
) -> list[Pin]:
    """Which of the source's pins the target's agent inherits (``read``: the agent's
    active pins and the ones the source held, as ``read.pins_with_originals`` gives them):
    critical pins within their window first, past the inheritance limit but never past
    the active ``cap``, then the normal ones still confident enough; no label twice."""
    active = [p.label for p in read if p.agent_id == agent_id and p.unpinned_at is None]
    held = [
        p
        for p in read
        if p.inherited_into_id == source_pk
        or (p.origin_session_id == source_pk and p.inherited_into_id is None)
    ]
    room = cap - len(active)
    taken = set(active)
    critical_window = timedelta(days=k.critical_pin_days)
    critical, normal = [], []
    for pin in held:
        if pin.label in taken:
            continue
        hours = max(0.0, (now - pin.pinned_at).total_seconds() / 3600)
        if pin.priority == CRITICAL_PRIORITY and now - pin.pinned_at <= critical_window:
            critical.append(pin)
        elif decayed_confidence(hours, k=k) >= k.min_pin_confidence:
            normal.append(pin)
        taken.add(pin.label)
    chosen = critical[:room]
    chosen += normal[: max(0, min(room - len(chosen), k.max_inherited_pins))]
    return chosen


# The pins people set (curated memory): a critical pin is quoted in every preamble of its
# agent until it is unpinned; a normal pin when it is relevant to the session (it shares a
# content word with what the session is about: its first prompt, the keywords its gateway
# sent, else its topics). Pins a session made or inherited are working memory of that
# session and travel by inheritance, not here.
CRITICAL, RELEVANT = "critical", "relevant"


def curated_among(pins: Iterable[Pin], agent_id: uuid.UUID) -> list[Pin]:
    """The agent's active pins set by people, picked out of pins already read (the agent's
    active ones among them), critical first, then oldest first (as
    ``read.curated_pins_of`` orders them)."""
    found = [p for p in pins if p.agent_id == agent_id and p.unpinned_at is None and p.is_curated]
    found.sort(key=lambda p: (p.pinned_at, p.pk))
    return sorted(found, key=lambda p: p.priority != CRITICAL_PRIORITY)


def relevant(pin: Pin, about: frozenset[str]) -> bool:
    """Whether a normal pin shares a content word with what the session is about."""
    return bool(about) and bool(feature_lib.content_stems(f"{pin.label} {pin.content}") & about)


def pins_for_preamble(
    pins: list[Pin], *, keywords: Iterable[str], prompt: str = ""
) -> list[tuple[Pin, str]]:
    """The pins a preamble quotes and why: every critical one, the relevant normal ones."""
    about = feature_lib.content_stems(" ".join([*keywords, prompt]))
    chosen = []
    for pin in pins:
        if pin.priority == CRITICAL_PRIORITY:
            chosen.append((pin, CRITICAL))
        elif relevant(pin, about):
            chosen.append((pin, RELEVANT))
    return chosen


def newly_quoted(
    chosen: list[tuple[Pin, str]], before: list[dict[str, Any]] | None
) -> list[tuple[Pin, str]]:
    """The pins of ``chosen`` an earlier preamble of the session did not quote."""
    told = {entry.get("uid") for entry in before or []}
    return [(pin, why) for pin, why in chosen if str(pin.uid) not in told]
