"""The continuity preamble: the evidence a prior session offers (its summary, what later
sessions finished), rendered within a token budget."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import features as feature_lib
from . import relevance as relevance_lib
from .models import Pin
from .scoring import _EPOCH, Candidate, Features, Prior, _summary_of, knobs

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

    def add(self, facts: Iterable[feature_lib.Completion]) -> None:
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
    rows: list[tuple[Prior, Features | None]], summaries: dict[uuid.UUID, dict[str, str]]
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
        completed = summaries.get(prior.pk, {}).get("completed")
        if completed:
            shared.add(feature_lib.completion_facts_of(completed))
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
    _best_session(out, chosen[0], scored, texts, later)
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
    projects = _union(c.features.active_projects if c.features else [] for c in chosen)
    if projects:
        out.lines.append("")
        out.add("ACTIVE PROJECTS: " + ", ".join(projects[:3]))
    topics = _union(c.features.hot_topics if c.features else [] for c in chosen)
    topics = [topic for topic in topics if not _MARKER_TOPIC.match(topic)]
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


def _union(lists: Iterable[list[str]]) -> list[str]:
    """Every item of the lists once, in first-seen order."""
    return list(dict.fromkeys(item for items in lists for item in items))


def _best_session(
    out: _Budget,
    best: Candidate,
    scored: list[Candidate],
    texts: dict[uuid.UUID, relevance_lib.SessionText] | None,
    later: dict[uuid.UUID, Later] | None,
) -> None:
    """What the best prior session was asked, completed and left to do next."""
    text = (texts or {}).get(best.session.pk)
    summary = (
        {"request": text.request, "completed": text.completed, "next_steps": text.next_steps}
        if text is not None
        else _summary_of(best.session.pk)
    )
    if not summary or not (summary["completed"] or summary["request"]):
        return
    evidence = (later or {}).get(best.session.pk) or Later()
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
