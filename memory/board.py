"""The team's board of open work: every pending task of its recent sessions, by project,
with the session it comes from, its age, and whether a later session finished it.

"Finished" is the test the preamble applies (``memory.continuity.decide.Later``): a
later session of the same project closed the task's id in its task list, or a sentence
of its summary that reports a result covers the task's words, or it finished its last
turn on a request that does. A task still listed by a newer session of the project is
shown once, from the newest session that lists it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from lifecycle.models import OPEN_STATUSES, Session
from sessionhub.models import Team

from . import features as feature_lib
from .continuity.decide import Evidence, Later
from .continuity.render import LEAD_MARKER, task_line_text
from .outcome import FINISHED

BOARD_DAYS = 14
BOARD_MAX_SESSIONS = 2000


@dataclass(slots=True)
class BoardSession:
    """A session as the board reads it."""

    pk: uuid.UUID
    external_id: str
    agent: str
    project: str
    status: str
    request: str
    at: datetime  # when it ended (or was last heard of)
    pending: list[dict[str, Any]]
    done_ids: frozenset[str]
    evidence: Evidence

    @property
    def running(self) -> bool:
        return self.status in OPEN_STATUSES


@dataclass(slots=True)
class BoardTask:
    """One pending task on the board."""

    text: str
    task_id: str
    source: BoardSession
    age: timedelta
    finished_by: BoardSession | None = None
    also_in: int = 0  # earlier sessions of the project that listed it too

    @property
    def state(self) -> str:
        if self.finished_by is not None:
            return "finished"
        return "in progress" if self.source.running else "open"


@dataclass(slots=True)
class ProjectWork:
    """A project's tasks, open ones first, newest first."""

    project: str
    tasks: list[BoardTask] = field(default_factory=list)

    @property
    def open_count(self) -> int:
        return sum(1 for t in self.tasks if t.finished_by is None)


def _project_of(row: Mapping[str, Any]) -> str:
    projects = row.get("features__active_projects") or []
    remote = next((p for p in projects if isinstance(p, str) and "/" in p and p[0] not in "/~"), "")
    return remote or row["project"] or row["agent__project"] or row["agent__name"] or "—"


def _evidence(row: Mapping[str, Any]) -> Evidence:
    """What the session reports finished, as the preamble reads a newer session."""
    evidence = Evidence()
    completed = row.get("summary__completed") or ""
    if completed:
        evidence.add(feature_lib.completion_facts_of(completed))
    if row.get("summary__outcome") == FINISHED and row.get("summary__request"):
        evidence.add(feature_lib.completion_facts([row["summary__request"]]))
    return evidence


def _shown(text: str, task_id: str) -> str:
    """A task's words as the board lists them: no leading marker, and no task id the
    board shows beside them."""
    text = LEAD_MARKER.sub("", text).strip()
    if task_id and text.lower().startswith(task_id.lower()):
        text = text[len(task_id) :].lstrip(" :-—").strip()
    return text or task_id


def _key(task: dict[str, Any], text: str) -> str:
    task_id = str(task.get("id") or "")
    return task_id if task_id.startswith("task-") else " ".join(text.lower().split())


def _finisher(task: dict[str, Any], text: str, newer: list[BoardSession]) -> BoardSession | None:
    """The first session after the task's own that finished it, if any."""
    task_id = str(task.get("id") or "")
    for session in newer:  # oldest first
        later = Later(session.done_ids, session.evidence, session.evidence.count)
        if later.finished(text, task_id):
            return session
    return None


def open_work(
    team: Team, *, days: int = BOARD_DAYS, now: datetime | None = None
) -> list[ProjectWork]:
    """The board: one query for the team's sessions of the last ``days`` days with their
    features and summaries, then the tasks, by project (the busiest first)."""
    now = now or timezone.now()
    since = now - timedelta(days=days)
    rows = (
        Session.objects.filter(team=team, started_at__gte=since)
        .order_by("-started_at", "-id")
        .values(
            "pk",
            "external_id",
            "status",
            "project",
            "started_at",
            "ended_at",
            "last_event_at",
            "agent__name",
            "agent__project",
            "features__pending_tasks",
            "features__done_tasks",
            "features__active_projects",
            "summary__request",
            "summary__completed",
            "summary__outcome",
        )[:BOARD_MAX_SESSIONS]
    )
    by_project: dict[str, list[BoardSession]] = {}
    for row in rows:
        session = BoardSession(
            pk=row["pk"],
            external_id=row["external_id"],
            agent=row["agent__name"] or "",
            project=_project_of(row),
            status=row["status"],
            request=(row["summary__request"] or "").split(" / ")[0],
            at=row["ended_at"] or row["last_event_at"] or row["started_at"] or now,
            pending=[t for t in row["features__pending_tasks"] or [] if isinstance(t, dict)],
            done_ids=frozenset(row["features__done_tasks"] or []),
            evidence=_evidence(row),
        )
        by_project.setdefault(session.project, []).append(session)
    board = []
    for project, sessions in by_project.items():
        sessions.sort(key=lambda s: (s.at, str(s.pk)))  # oldest first
        work = ProjectWork(project)
        shown: dict[str, BoardTask] = {}
        for index in range(len(sessions) - 1, -1, -1):  # newest first: a carried task once
            session = sessions[index]
            for task in session.pending:
                text = task_line_text(task)
                if not text:
                    continue
                key = _key(task, text)
                if key in shown:
                    shown[key].also_in += 1
                    continue
                item = BoardTask(
                    text=_shown(text, str(task.get("id") or "")),
                    task_id=str(task.get("id") or ""),
                    source=session,
                    age=max(timedelta(0), now - session.at),
                    finished_by=_finisher(task, text, sessions[index + 1 :]),
                )
                shown[key] = item
                work.tasks.append(item)
        if work.tasks:
            work.tasks.sort(key=lambda t: (t.finished_by is not None, t.age))
            board.append(work)
    board.sort(key=lambda w: (-w.open_count, w.project))
    return board
