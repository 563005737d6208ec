"""Continuity, third stage: the preamble, the text handed to the new session.

Pure: made from the decision (``decide``) and the words read with the candidates, within
a size budget of about four characters a token. Every fact is one line and said once;
nothing a newer session reported finished is handed back as still to do.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from .. import features as feature_lib
from ..outcome import FAILED, STOPPED
from .data import UNIX_EPOCH, Knobs, knobs
from .decide import CRITICAL_PRIORITY, MARKER_TOPIC, Candidate, Later

if TYPE_CHECKING:  # types only: this stage neither queries nor reads
    from ..models import Pin
    from ..relevance import SessionText

# What the preamble keeps of one pin's content; the label and the attribution come on top.
CONTENT_CHARS = 180


def _ago(hours: float) -> str:
    if hours < 1:
        return "<1h ago"
    if hours < 48:
        return f"{int(hours)}h ago"
    return f"{int(hours // 24)}d ago"


def attribution(pin: Pin) -> str:
    """ "pinned by alice on 2026-11-27" (or "pinned on ..." when nobody is named)."""
    when = timezone.localtime(pin.pinned_at).strftime("%Y-%m-%d")
    return f"pinned by {pin.pinned_by} on {when}" if pin.pinned_by else f"pinned on {when}"


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


def clip_words(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters, never cut inside a word."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:-") + "…"


def clip_to_end(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters keeping its end (where a long report says what
    was done), cut on a word."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[-(limit - 1) :]
    if " " in cut:
        cut = cut.split(" ", 1)[1]
    return "…" + cut


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
            line = clip_words(line, self.left - 1)
            cost = len(line) + 1
        self.lines.append(line)
        self.left -= cost
        return True


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text or "") if s.strip()]


_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。\uff01\uff1f])|\n+")
# A marker a task's text opens with: the preamble's heading already says it is a task.
LEAD_MARKER = re.compile(
    r"^\W*(?:TODO|FIXME|\[TASK\]|next(?: steps?)?|remaining|still to do|left to do)\s*:\s*",
    re.IGNORECASE,
)


def task_line_text(task: dict[str, Any]) -> str:
    """How a pending task reads in the preamble: its words without a leading marker."""
    text = str(task.get("text") or "")
    task_id = str(task.get("id") or "")
    return text if task_id.startswith("task-") else LEAD_MARKER.sub("", text).strip()


def _same_work(a: str, b: str) -> bool:
    a_stems = feature_lib.content_stems(feature_lib.without_task_ids(a))
    b_stems = feature_lib.content_stems(feature_lib.without_task_ids(b))
    if not a_stems or not b_stems:
        return " ".join(a.lower().split()) == " ".join(b.lower().split())
    common = len(a_stems & b_stems)
    return common >= -(-2 * min(len(a_stems), len(b_stems)) // 3)


def _shared_requests(texts: dict[uuid.UUID, SessionText] | None) -> set[str]:
    """Opening prompts several of the agent's sessions share ("load claude.md"): they say
    nothing about which work a session did."""
    counts: dict[str, int] = {}
    for text in (texts or {}).values():
        for part in {p.strip().lower() for p in text.request.split(" / ") if p.strip()}:
            counts[part] = counts.get(part, 0) + 1
    return {part for part, count in counts.items() if count >= SHARED_PROMPT_SESSIONS}


# An opening prompt found in this many of the agent's recent sessions is boilerplate.
SHARED_PROMPT_SESSIONS = 2


def render_preamble(
    chosen: list[Candidate],
    scored: list[Candidate],
    pins: list[Pin],
    texts: dict[uuid.UUID, SessionText] | None = None,
    later: dict[uuid.UUID, Later] | None = None,
    curated: list[Pin] | None = None,
    *,
    k: Knobs | None = None,
) -> str:
    """The text handed to the new session; empty on a cold start with nothing pinned.

    Everything quoted passes the same test: nothing a newer session reported finished is
    handed back as still to do (the best session's next steps, every pending task). Each
    fact is one line and said once; a session that stopped or failed says so, and its
    last words are never filed as completed. The pins people set (``curated``, chosen by
    ``decide.pins_for_preamble``) come first, each with who pinned it and when, within at most
    ``CURATED_SHARE`` of the budget.
    """
    if not chosen and not curated:
        return ""
    k = k or knobs()
    out = _Budget(k.preamble_max_chars)
    header = len(out.lines)
    out.add("[SESSION CONTINUITY — inherited from {n} prior session(s)]")
    if curated:
        _curated_section(out, curated, int(k.preamble_max_chars * CURATED_SHARE))
    if not chosen:
        out.lines[header] = "[SESSION CONTINUITY — pinned by your team]"
        return "\n".join(out.lines)
    quoted: list[uuid.UUID] = []
    # The tasks first: a step the pending tasks list is not said again as "next".
    tasks: list[tuple[dict[str, Any], Candidate, str]] = []
    for task, candidate in pending_for_preamble(chosen, scored, later):
        text = task_line_text(task)
        if text and not any(_same_work(text, other) for _, _, other in tasks):
            tasks.append((task, candidate, text))
    tasks = tasks[: k.preamble_max_tasks]
    if _best_session(out, chosen[0], scored, texts, later, [t for _, _, t in tasks]):
        quoted.append(chosen[0].session.pk)
    shown: list[str] = []
    for task, candidate, text in tasks:
        if not shown:
            out.lines.append("")
            out.add("PENDING TASKS:")
        task_id = str(task.get("id") or "")
        label = f"[{task_id}] " if task_id.startswith("task-") else ""
        line = f"- {label}{clip_words(text, 120)} ({_ago(candidate.hours)})"
        if not out.add(line):
            break
        shown.append(text)
        if candidate.session.pk not in quoted:
            quoted.append(candidate.session.pk)
    others = [c for c in chosen[1:] if c.session.pk not in quoted]
    heading = False
    for candidate in others:
        line = _other_session_line(candidate, texts)
        if not line:
            continue
        if not heading:
            out.lines.append("")
            out.add("ALSO RELEVANT:")
            heading = True
        if not out.add(line):
            break
        quoted.append(candidate.session.pk)
    if not quoted:
        if not curated:
            return ""
        out.lines[header] = "[SESSION CONTINUITY — pinned by your team]"
        return "\n".join(line for line in out.lines[: _curated_end(out)])
    projects = _projects(
        c.features.active_projects if c.features else [] for c in chosen if c.session.pk in quoted
    )
    if projects:
        out.lines.append("")
        out.add("ACTIVE PROJECTS: " + ", ".join(projects[:3]))
    topics = _union(
        c.features.hot_topics if c.features else [] for c in chosen if c.session.pk in quoted
    )
    boilerplate = {w for part in _shared_requests(texts) for w in feature_lib.keyword_set(part)}
    topics = [
        t
        for t in topics
        if not MARKER_TOPIC.match(t)
        and not feature_lib.identifier_like(t.lower())
        and t.lower() not in boilerplate
    ]
    if topics:
        out.lines.append("")
        out.add("HOT TOPICS: " + ", ".join(topics[: k.preamble_max_topics]))
    if pins:
        labels = ", ".join(pin.label for pin in pins)
        out.lines.append("")
        out.add(f"WORKING MEMORY RESTORED: {len(pins)} pins inherited ({labels})")
    while out.lines and out.lines[-1] == "":
        out.lines.pop()
    out.lines[header] = out.lines[header].replace("{n}", str(len(quoted)))
    return "\n".join(out.lines)


# The most of the budget the pins people set may take: the sessions keep the rest.
CURATED_SHARE = 0.5
CURATED_LINE_CHARS = 240
_CURATED_TITLE = "PINNED BY YOUR TEAM (follow these):"


def pin_line(pin: Pin) -> str:
    """One line for a pin a person set: what it says, who pinned it and when."""
    mark = "[critical] " if pin.priority == CRITICAL_PRIORITY else ""
    content = clip_words(pin.content, CONTENT_CHARS) if pin.content.strip() else ""
    text = f"{pin.label}: {content}" if content else pin.label
    attributed = f" ({attribution(pin)})"
    return f"- {mark}{clip_words(text, CURATED_LINE_CHARS - len(attributed) - 2)}{attributed}"


def _curated_section(out: _Budget, pins: list[Pin], limit: int) -> None:
    """The pins people set, critical first, within ``limit`` characters; the ones that
    do not fit are named by label on a last line."""
    out.lines.append("")
    out.add(_CURATED_TITLE)
    left = limit - len(_CURATED_TITLE) - 2
    for index, pin in enumerate(pins):
        line = pin_line(pin)
        reserve = 40 if index + 1 < len(pins) else 0  # room to name the ones left out
        if len(line) + 1 > left - reserve:
            names = ", ".join(p.label for p in pins[index:])
            out.add(clip_words(f"- also pinned: {names}", max(24, left - 1)))
            return
        out.add(line)
        left -= len(line) + 1


def _curated_end(out: _Budget) -> int:
    """Where the pins' section ends among the lines (sessions' headings come after)."""
    end = len(out.lines)
    for index, line in enumerate(out.lines):
        if line == _CURATED_TITLE:
            end = index + 1
            while end < len(out.lines) and out.lines[end].startswith("- "):
                end += 1
            break
    return end


def _union(lists: Iterable[list[str]]) -> list[str]:
    """Every item of the lists once, in first-seen order."""
    return list(dict.fromkeys(item for items in lists for item in items))


def _projects(lists: Iterable[list[str]]) -> list[str]:
    """Each project once: a working directory is left out when a remote names the project
    (features stored before one name per project was kept listed both)."""
    found = _union(lists)
    remotes = [p for p in found if not p.startswith(("/", "~")) and "/" in p]
    return remotes if remotes else found


_OUTCOME_LINES = {STOPPED: "stopped while", FAILED: "failed"}
_OUTCOME_WORDS = {STOPPED: "stopped before it finished", FAILED: "failed"}


def _other_session_line(candidate: Candidate, texts: dict[uuid.UUID, SessionText] | None) -> str:
    """One line for a further source: what it was asked, when, and how it ended when it
    did not finish."""
    text = (texts or {}).get(candidate.session.pk)
    if text is None or not text.request:
        return ""
    shared = _shared_requests(texts)
    asked = [p for p in text.request.split(" / ") if p.strip().lower() not in shared]
    if not asked:
        return ""
    how = _OUTCOME_WORDS.get(text.outcome or "")
    when = f"{_ago(candidate.hours)}, {how}" if how else _ago(candidate.hours)
    return f"- {clip_words(' / '.join(asked), 140)} ({when})"


def _best_session(
    out: _Budget,
    best: Candidate,
    scored: list[Candidate],
    texts: dict[uuid.UUID, SessionText] | None,
    later: dict[uuid.UUID, Later] | None,
    listed: list[str],
) -> bool:
    """What the best prior session was asked, completed, how it ended and what it left to
    do next; False when there is nothing to say of it."""
    text = (texts or {}).get(best.session.pk)
    if text is None or not (text.completed or text.request):
        return False
    evidence = (later or {}).get(best.session.pk) or Later()
    newest = max(scored, key=lambda c: c.session.ended_at or UNIX_EPOCH, default=best)
    if newest.session.pk == best.session.pk:
        title = f"LAST SESSION ({_ago(best.hours)}):"
    else:
        title = f"EARLIER SESSION ({_ago(best.hours)}, chosen over newer ones):"
    out.lines.append("")
    out.add(title)
    shared = _shared_requests(texts)
    asked = [p for p in text.request.split(" / ") if p.strip().lower() not in shared]
    if asked:
        out.add(f"- asked: {clip_words(' / '.join(asked), 200)}")
    outcome = text.outcome or ""
    detail = text.outcome_detail or ""
    completed = text.completed
    if outcome in _OUTCOME_LINES and detail:
        # The last words announced work that never ran: never quoted as completed.
        completed = " ".join(s for s in _sentences(completed) if s.strip() != detail.strip())
    if completed:
        out.add(f"- completed: {clip_to_end(completed, 240)}")
    if outcome in _OUTCOME_LINES:
        out.add(f"- {_OUTCOME_LINES[outcome]}: {clip_words(detail or 'an error', 200)}")
    steps: list[str] = []
    for step in _sentences(text.next_steps):
        clean = LEAD_MARKER.sub("", step).strip()
        if not clean or evidence.finished(step) or any(_same_work(clean, s) for s in steps):
            continue
        if any(_same_work(clean, task) for task in listed):
            continue  # said once, under PENDING TASKS
        steps.append(clean)
    if steps:
        out.add(f"- next: {clip_words('; '.join(steps), 200)}")
    return True
