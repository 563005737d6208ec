"""Export and import (by API and by command) round-trip exactly; retention archives
before it deletes, and deletes nothing it did not archive."""

from __future__ import annotations

import gzip
import json
from datetime import timedelta
from io import StringIO
from itertools import islice
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from lifecycle.models import LifecycleEvent, Session, SessionStatus
from memory import retention
from memory.export import document_import, session_export
from memory.models import ContinuityRecord, Observation, Pin, StreamTail, Summary
from memory.retention import (
    expired_count,
    expired_sessions,
    retention_apply,
    session_retire,
)
from memory.services.continuity import continuity_continue
from memory.services.pins import pin_create
from sessionhub.models import Team
from tests.conftest import claude_code_hooks, openclaw_hooks
from tests.factories import AgentFactory, SessionFactory

pytestmark = pytest.mark.django_db(transaction=True)

NOW = timezone.now()


def replay_chain(api: APIClient) -> tuple[Session, Session]:
    """Two Claude Code sessions in one project, the second continued from the first,
    with pins, tails, observations, summaries, features and continuity records."""
    first_lines = claude_code_hooks("basic")
    start = NOW - timedelta(hours=6)
    for i, line in enumerate(first_lines):
        extra = {"event_id": f"a-{i}", "occurred_at": (start + timedelta(minutes=i)).isoformat()}
        if line["hook_event_name"] == "Stop":
            extra["reasoning_tail"] = "I think the cache is fine now. TODO: task-415 follow-up."
        if i == 3:
            session = Session.objects.get(external_id=line["session_id"])
            pin_create(
                agent=session.agent, label="cache backend", content="redis", origin_session=session
            )
        assert (
            api.post(
                "/api/v1/hooks/claude-code", {**line, "sessionhub": extra}, format="json"
            ).status_code
            == 200
        )
    first = Session.objects.get(external_id=first_lines[0]["session_id"])
    second_start = dict(first_lines[0], session_id="second-session")
    second_start["sessionhub"] = {
        "event_id": "b-0",
        "occurred_at": (NOW - timedelta(hours=1)).isoformat(),
    }
    api.post("/api/v1/hooks/claude-code", second_start, format="json")
    second = Session.objects.get(external_id="second-session")
    continuity_continue(target=second, source=first)
    return Session.objects.get(pk=first.pk), Session.objects.get(pk=second.pk)


def strip_volatile(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "exported_at"}


def wipe() -> None:
    Session.objects.all().delete()
    LifecycleEvent.objects.all().delete()
    Pin.objects.all().delete()


def test_export_import_export_round_trips(api: APIClient, team: Team) -> None:
    first, second = replay_chain(api)
    assert Observation.objects.filter(session=first).count() == 5
    assert StreamTail.objects.filter(session=first).exists()
    assert Summary.objects.filter(session=first).exists()
    assert ContinuityRecord.objects.filter(session=second).exists()

    response = api.get(f"/api/v1/sessions/{second.pk}/export?chain=1")
    assert response.status_code == 200
    exported = response.json()
    assert [s["id"] for s in exported["sessions"]] == [str(first.pk), str(second.pk)]
    first_doc = exported["sessions"][0]
    assert len(first_doc["events"]) == len(claude_code_hooks("basic"))
    assert first_doc["summary"]["completed"]
    assert first_doc["pins"][0]["label"] == "cache backend"
    assert exported["sessions"][1]["continuity_records"][0]["trigger"] == "manual"

    wipe()
    assert not Session.objects.exists()
    assert document_import(exported, team=team) == 2
    assert document_import(exported, team=team) == 0  # idempotent
    again = session_export(Session.objects.get(pk=second.pk), chain=True)
    assert strip_volatile(again) == strip_volatile(json.loads(json.dumps(exported)))


def test_export_and_import_commands_with_many_sessions(
    api: APIClient, team: Team, tmp_path: Path
) -> None:
    for scenario in ("basic", "compact", "idle", "reset", "restart"):
        api.post("/api/v1/hooks/openclaw", openclaw_hooks(scenario), format="json")
    assert Session.objects.count() == 5
    out = tmp_path / "team.json"
    call_command("export_sessions", team.slug, "-o", str(out), stderr=StringIO())
    before = json.loads(out.read_text())
    assert len(before["sessions"]) == 5

    wipe()
    stdout = StringIO()
    call_command("import_sessions", "restored", str(out), stdout=stdout, stderr=StringIO())
    assert "Imported 5 new session(s)" in stdout.getvalue()
    call_command("import_sessions", "restored", str(out), stdout=StringIO(), stderr=StringIO())
    assert Session.objects.count() == 5
    assert LifecycleEvent.objects.count() == sum(
        len(openclaw_hooks(s)) for s in ("basic", "compact", "idle", "reset", "restart")
    )
    out2 = tmp_path / "again.json"
    call_command("export_sessions", "restored", "-o", str(out2), stderr=StringIO())
    after = json.loads(out2.read_text())
    assert strip_volatile(after) | {"team": "x"} == strip_volatile(before) | {"team": "x"}


def test_import_refuses_a_foreign_document(team: Team) -> None:
    from memory.export import ImportError_

    with pytest.raises(ImportError_):
        document_import({"format": "something-else", "sessions": []}, team=team)


def test_retention_archives_then_deletes(api: APIClient, tmp_path: Path) -> None:
    first, second = replay_chain(api)
    api.post(
        "/api/v1/hooks/claude-code",
        {
            **claude_code_hooks("basic")[-1],
            "session_id": "second-session",
            "sessionhub": {"event_id": "b-end"},
        },
        format="json",
    )
    later = timezone.now() + timedelta(days=31)
    result = retention_apply(days=30, archive_dir=tmp_path, now=later)
    assert result.archived == result.deleted == 2
    assert not Session.objects.exists()
    assert not LifecycleEvent.objects.filter(session__isnull=False).exists()
    archived_ids = set()
    for path in result.files:
        with gzip.open(path, "rt") as handle:
            doc = json.load(handle)
        archived_ids.update(s["id"] for s in doc["sessions"])
        assert doc["sessions"][0]["events"]
    assert archived_ids == {str(first.pk), str(second.pk)}


def test_retention_keeps_recent_and_open_sessions(api: APIClient, tmp_path: Path) -> None:
    for scenario in ("basic", "idle"):
        api.post("/api/v1/hooks/openclaw", openclaw_hooks(scenario), format="json")
    open_lines = claude_code_hooks("crash")
    api.post("/api/v1/hooks/claude-code", open_lines, format="json")
    result = retention_apply(days=3650, archive_dir=tmp_path)
    assert result.archived == result.deleted == 0
    later = timezone.now() + timedelta(days=40)
    result = retention_apply(days=30, archive_dir=tmp_path, now=later)
    assert result.deleted == 2  # the two ended OpenClaw sessions
    assert Session.objects.get().external_id == open_lines[0]["session_id"]  # still open


def test_nothing_is_deleted_when_the_archive_cannot_be_written(
    api: APIClient, tmp_path: Path
) -> None:
    api.post("/api/v1/hooks/openclaw", openclaw_hooks("basic"), format="json")
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the archive folder should be")
    with pytest.raises(OSError):
        retention_apply(days=1, archive_dir=blocked, now=timezone.now() + timedelta(days=5))
    assert Session.objects.count() == 1


def test_prune_command_dry_run_and_real(api: APIClient, tmp_path: Path) -> None:
    api.post("/api/v1/hooks/openclaw", openclaw_hooks("basic"), format="json")
    Session.objects.update(ended_at=timezone.now() - timedelta(days=100))
    out = StringIO()
    call_command(
        "prune_sessions",
        "--days",
        "30",
        "--dry-run",
        "--archive-dir",
        str(tmp_path),
        stdout=out,
        stderr=StringIO(),
    )
    assert "Would archive 1" in out.getvalue()
    assert Session.objects.count() == 1
    out = StringIO()
    call_command(
        "prune_sessions",
        "--days",
        "30",
        "--archive-dir",
        str(tmp_path),
        stdout=out,
        stderr=StringIO(),
    )
    assert "Archived 1 session(s), deleted 1" in out.getvalue()
    assert not Session.objects.exists()
    assert list(tmp_path.rglob("*.json.gz"))


def test_expired_sessions_are_read_in_pages_each_once(tmp_path: Path) -> None:
    """Three agents, sessions sharing end times (the page boundary falls between equals),
    a recent one and an open one: with pages of two, a dry run sees each expired session
    exactly once, and a real run deletes them all while it pages."""
    old = timezone.now() - timedelta(days=100)
    expired = set()
    for agent in AgentFactory.create_batch(3):
        for n in range(5):
            ended = old + timedelta(hours=n // 3)
            session = SessionFactory(
                agent=agent, started_at=ended - timedelta(hours=1), ended_at=ended
            )
            expired.add(session.pk)
        SessionFactory(agent=agent)  # ended two hours ago
        SessionFactory(agent=agent, status=SessionStatus.ACTIVE, ended_at=None)
    # A pager that does not move on would repeat itself: islice stops it.
    seen = [s.pk for s in islice(expired_sessions(days=30, page=2), 100)]
    assert len(seen) == len(expired) == 15
    assert set(seen) == expired
    assert expired_count(days=30) == 15

    assert retention_apply(days=30, archive_dir=tmp_path, dry_run=True).archived == 15
    assert Session.objects.count() == 21

    with patch("memory.retention.EXPIRED_PAGE", 2):
        result = retention_apply(days=30, archive_dir=tmp_path)
    assert result.archived == result.deleted == 15
    assert not Session.objects.filter(pk__in=expired).exists()
    assert Session.objects.count() == 6


def test_a_session_resumed_after_it_was_read_is_archived_but_kept(tmp_path: Path) -> None:
    """Retention reads a session, then archives it: if the gateway resumes it meanwhile,
    its new events would not be in the archive, so the delete leaves it."""
    session = SessionFactory(
        started_at=timezone.now() - timedelta(days=101),
        ended_at=timezone.now() - timedelta(days=100),
    )
    (read,) = expired_sessions(days=30)
    Session.objects.filter(pk=session.pk).update(status=SessionStatus.ACTIVE, ended_at=None)
    path, deleted = session_retire(read, root=tmp_path)
    assert path.exists()
    assert not deleted
    assert Session.objects.filter(pk=session.pk, status=SessionStatus.ACTIVE).exists()

    Session.objects.filter(pk=session.pk).update(status=SessionStatus.ENDED, ended_at=read.ended_at)
    assert session_retire(read, root=tmp_path)[1]
    assert not Session.objects.filter(pk=session.pk).exists()


def _orphans(client: APIClient, keys: list[str]) -> None:
    """OpenClaw commands that name only a session key: they wait as orphans."""
    bodies = [
        {
            "hook": "command:reset",
            "event": {},
            "ctx": {"agentId": "research", "sessionKey": key},
            "ts": 1795313897000 + n,
        }
        for n, key in enumerate(keys)
    ]
    assert client.post("/api/v1/hooks/openclaw", bodies, format="json").status_code == 200


def test_orphan_events_are_archived_under_their_team_a_page_a_file(
    api: APIClient, stranger: APIClient, tmp_path: Path
) -> None:
    _orphans(api, [f"acme:key:{n}" for n in range(5)])
    _orphans(stranger, ["globex:key:0"])
    LifecycleEvent.objects.update(received_at=timezone.now() - timedelta(days=100))
    _orphans(api, ["acme:key:recent"])
    recent = LifecycleEvent.objects.get(orphan_key="acme:key:recent")
    old = {
        team: set(
            LifecycleEvent.objects.filter(team__slug=team)
            .exclude(pk=recent.pk)
            .values_list("pk", flat=True)
        )
        for team in ("acme", "globex")
    }

    with patch("memory.retention.ORPHAN_PAGE", 2):
        result = retention_apply(days=30, archive_dir=tmp_path)

    archived: dict[str, list[int]] = {"acme": [], "globex": []}
    for name in result.files:
        path = Path(name)
        assert path.parent == tmp_path / path.parent.parent.name / "orphan-events"
        with gzip.open(path, "rt") as handle:
            doc = json.load(handle)
        assert doc["format"] == "sessionhub.orphan-events/1"
        assert path.parent.parent.name == doc["team"]
        assert 1 <= len(doc["events"]) <= 2
        first, last = map(int, path.name.removesuffix(".json.gz").split("-")[1:])
        assert (first, last) == (doc["events"][0]["id"], doc["events"][-1]["id"])
        archived[doc["team"]] += [event["id"] for event in doc["events"]]
    assert len(result.files) == 4  # acme's five in three files, globex's one in one
    assert {team: set(ids) for team, ids in archived.items()} == old
    assert sum(map(len, archived.values())) == 6  # each once
    assert LifecycleEvent.objects.get() == recent


def test_an_orphan_adopted_after_it_was_read_is_archived_but_kept(
    api: APIClient, tmp_path: Path
) -> None:
    """Between the archive and the delete, its session starts and adopts the event: the
    event now belongs to a live session, so the delete leaves it."""
    _orphans(api, ["acme:key:late"])
    LifecycleEvent.objects.update(received_at=timezone.now() - timedelta(days=100))
    session = SessionFactory(agent__team=Team.objects.get(slug="acme"))
    real_write = retention._write_archive

    def write_then_adopt(path: Path, doc: dict, **kw: Any) -> None:
        real_write(path, doc, **kw)
        LifecycleEvent.objects.update(session=session, orphan_key="")

    with patch("memory.retention._write_archive", side_effect=write_then_adopt):
        result = retention_apply(days=30, archive_dir=tmp_path)
    (path,) = result.files
    with gzip.open(path, "rt") as handle:
        assert len(json.load(handle)["events"]) == 1
    assert LifecycleEvent.objects.get().session == session


def test_orphans_are_kept_when_their_archive_cannot_be_written(
    api: APIClient, tmp_path: Path
) -> None:
    _orphans(api, ["acme:key:0"])
    LifecycleEvent.objects.update(received_at=timezone.now() - timedelta(days=100))
    blocked = tmp_path / "acme"
    blocked.write_text("a file where the team's archive folder should be")
    with pytest.raises(OSError):
        retention_apply(days=30, archive_dir=tmp_path)
    assert LifecycleEvent.objects.count() == 1


# --- import redacts as ingest does --------------------------------------------------------

IMPORTED_SECRETS = {
    "password": "maple7orbit_canyon",
    "ghp": "ghp_" + "Zq8vT3nWk2LmP9xR4cY7bH1dF6gJ0sA5eU2i",
    "aws_body": "wJalrXUtnFEMIK7MDENGbPxRfiCY9AqLpZ2mTt3Q",
    "prose": "Tr0ub4dor&3x",
}


def test_an_imported_document_is_redacted_like_the_api(
    api: APIClient, team: Team, tmp_path: Path
) -> None:
    """A document edited by hand (or made by an older version) carries secrets in every
    place a session has strings; `manage.py import_sessions` must store none of them."""
    first, _ = replay_chain(api)
    doc = session_export(Session.objects.get(pk=first.pk))
    item = doc["sessions"][0]
    s = IMPORTED_SECRETS
    item["id"] = "0b5c1a3e-7d7e-4f5e-9a51-2f3c4d5e6f70"
    item["external_id"] = f"sess-{s['aws_body']}"
    item["cwd"] = f"/home/dev/src/{s['aws_body']}"
    item["agent"]["external_id"] = f"claude-code:/home/dev/src/{s['aws_body']}"
    event = item["events"][1]
    event["event_id"] = f"ev-password={s['password']}"
    event["payload"] = {
        "prompt": f"export POSTGRES_PASSWORD={s['password']} and push with {s['ghp']}",
        s["ghp"]: "a key that is a token",
        "cwd": f"/home/dev/src/{s['aws_body']}",
    }
    event["facts"] = {"text": f"the staging password is {s['prose']}"}
    for tail in item["tails"]:
        tail["text"] = f"Found it. Your password `{s['prose']}` is in .env"
    item["summary"]["completed"] = [f"set REDIS_PASSWORD={s['password']}"]
    item["pins"] = [
        {**item["pins"][0], "uid": "7f0c2b1a-1111-4c2d-8e9f-a0b1c2d3e4f5", "content": s["ghp"]}
    ]
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))

    call_command("import_sessions", "imported", str(path), stdout=StringIO(), stderr=StringIO())

    imported = Session.objects.get(pk=item["id"])
    assert imported.team.slug == "imported"
    assert imported.events.count() == len(item["events"])
    from tests.memory.test_secrets_end_to_end import find_in_database

    assert find_in_database(list(s.values())) == []
    assert "[REDACTED:" in imported.external_id and "[REDACTED:" in imported.cwd
    assert all(e.redaction_version > 0 for e in imported.events.all())


def test_random_runs_in_identifiers_never_reach_the_database(api: APIClient, team: Team) -> None:
    """A key body with no prefix, bare in a session id, a working directory (and so the
    agent's id and name) or a JSON key, is stored redacted; git SHAs and UUIDs stay."""
    from tests.memory.test_secrets_end_to_end import find_in_database

    body = IMPORTED_SECRETS["aws_body"]
    sha = "9fceb02d0ae598e95dc970b74767f19372d61af8"
    line = {
        **claude_code_hooks("basic")[0],
        "session_id": f"sess-{body}",
        "cwd": f"/home/dev/src/{body}/app",
        "sessionhub": {"event_id": f"start-{sha}"},
    }
    line[f"k{body}"] = "a key that is a secret"
    response = api.post("/api/v1/hooks/claude-code", line, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["accepted"] == 1
    assert find_in_database([body, body[:20], body[20:]]) == []
    session = Session.objects.get()
    assert "[REDACTED:high_entropy]" in session.external_id
    assert session.cwd == "/home/dev/src/[REDACTED:high_entropy]/app"
    assert LifecycleEvent.objects.get().event_id == f"start-{sha}"
