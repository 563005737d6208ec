"""Retention: closed sessions past the configured age, and events that never found their
session, are archived to gzipped JSON, then deleted. Nothing is deleted that was not
archived (and read back) first."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone

from lifecycle import services as lifecycle_services
from lifecycle.models import Agent, LifecycleEvent, Session, SessionStatus
from sessionhub.models import Team

from .export import document

# Expired sessions read per query (see ``expired_sessions``).
EXPIRED_PAGE = 500
# Expired orphan events per archive file (see ``_prune_orphans``).
ORPHAN_PAGE = 5_000
ORPHAN_FORMAT = "sessionhub.orphan-events/1"


@dataclass
class RetentionResult:
    """What a retention run did."""

    archived: int = 0
    deleted: int = 0
    files: list[str] = field(default_factory=list)


def _expired(*, days: int, now: datetime | None) -> QuerySet[Session]:
    cutoff = (now or timezone.now()) - timedelta(days=days)
    return Session.objects.filter(
        status__in=[SessionStatus.ENDED, SessionStatus.CRASHED], ended_at__lt=cutoff
    )


def expired_count(*, days: int, now: datetime | None = None) -> int:
    """How many closed sessions ended more than ``days`` ago."""
    return _expired(days=days, now=now).count()


def expired_sessions(
    *, days: int, now: datetime | None = None, page: int | None = None
) -> Iterator[Session]:
    """Closed sessions that ended more than ``days`` ago, agent by agent, oldest first.

    Read a page at a time along the ``(agent, ended_at)`` index, so that neither the
    database nor this process ever holds every expired session of a months-old install at
    once, and no page scans the session table. Each page starts after the last session of
    the one before, so sessions deleted meanwhile (or, on a dry run, not deleted) are
    neither skipped nor seen twice.
    """
    page = page or EXPIRED_PAGE
    expired = _expired(days=days, now=now)
    for agent_id in list(Agent.objects.order_by("pk").values_list("pk", flat=True)):
        agent_rows = expired.filter(agent_id=agent_id).order_by("ended_at", "pk")
        rows = agent_rows
        while True:
            # Keys first: an agent with nothing expired costs a probe of two columns, not
            # one that builds sessions with their team and agent.
            keys = list(rows.values_list("pk", "ended_at")[:page])
            if keys:
                # Still expired when built: a session resumed since its key was read is
                # left for a later run.
                whole = expired.filter(pk__in=[pk for pk, _ in keys])
                yield from whole.select_related("team", "agent").order_by("ended_at", "pk")
            if len(keys) < page:
                break
            pk, ended_at = keys[-1]
            rows = agent_rows.filter(Q(ended_at__gt=ended_at) | Q(ended_at=ended_at, pk__gt=pk))


def _write_archive(path: Path, doc: dict[str, Any], *, items: str = "sessions") -> None:
    """Write atomically and durably, then read it back: the delete depends on it. The read
    must give back the ids of ``doc[items]``, in order."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(path.suffix + ".tmp")
    # One string, not ``json.dump``'s stream of pieces: only ``dumps`` uses the C encoder.
    text = json.dumps(doc, ensure_ascii=False, default=str)
    with gzip.open(temporary, "wt", encoding="utf-8") as handle:
        handle.write(text)
    with open(temporary, "rb") as raw:
        os.fsync(raw.fileno())
    os.replace(temporary, path)
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        back = json.load(handle)
    if [str(i["id"]) for i in back[items]] != [str(i["id"]) for i in doc[items]]:
        raise OSError(f"archive {path} does not read back")


def session_retire(session: Session, *, root: Path) -> tuple[Path, bool]:
    """Archive one session under ``root``, then delete it with everything hanging off it.

    Returns the archive's path and whether the session was deleted. It is not when it is
    gone already, or when it was resumed after it was read (its new events are not in the
    archive): the row is locked as ingestion locks it, and deleted only while it is still
    closed at the same time.
    """
    path = root / session.team.slug / f"{session.ended_at:%Y-%m}" / f"{session.pk}.json.gz"
    _write_archive(path, document([session], team=session.team))
    return path, lifecycle_services.session_delete_if_closed(session)


def retention_apply(
    *,
    days: int | None = None,
    archive_dir: Path | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
    progress: Callable[[], object] | None = None,
) -> RetentionResult:
    """Archive then delete expired sessions, one archive file per session."""
    days = settings.SESSIONHUB["RETENTION_DAYS"] if days is None else days
    result = RetentionResult()
    if not days or days <= 0:
        return result
    root = Path(archive_dir or settings.SESSIONHUB["ARCHIVE_DIR"])
    for session in expired_sessions(days=days, now=now):
        if dry_run:
            result.archived += 1
            continue
        path, deleted = session_retire(session, root=root)
        result.archived += 1
        result.files.append(str(path))
        result.deleted += 1 if deleted else 0
        if progress:
            progress()
    if not dry_run:
        _prune_orphans(days=days, root=root, now=now or timezone.now(), result=result)
    return result


def _prune_orphans(*, days: int, root: Path, now: datetime, result: RetentionResult) -> None:
    """Events that never found their session, archived under their team a page per file,
    then deleted. An event adopted by its session after it was read is left in place."""
    old = LifecycleEvent.objects.filter(
        session__isnull=True, received_at__lt=now - timedelta(days=days)
    )
    for team in Team.objects.filter(pk__in=old.values("team_id")).order_by("pk"):
        last = 0
        while rows := list(
            old.filter(team=team, pk__gt=last).order_by("pk").values()[:ORPHAN_PAGE]
        ):
            # Named by the ids it holds: a run started in the same second cannot replace a
            # file whose events are gone with one that lacks them.
            name = f"{now:%Y%m%dT%H%M%S}-{rows[0]['id']}-{rows[-1]['id']}.json.gz"
            path = root / team.slug / "orphan-events" / name
            doc = {"format": ORPHAN_FORMAT, "team": team.slug, "sessions": [], "events": rows}
            _write_archive(path, doc, items="events")
            last = rows[-1]["id"]
            lifecycle_services.orphan_events_delete([row["id"] for row in rows])
            result.files.append(str(path))
