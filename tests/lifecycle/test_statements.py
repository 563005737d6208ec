"""The hand-built statements of the ingest path against what the ORM does for the same
job, on whichever database the run uses (PostgreSQL in the main suite, SQLite in
``make test-sqlite``): the same rows come back, the same values are written, repeats are
skipped."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import DataError, connection, transaction
from django.test.utils import CaptureQueriesContext

from lifecycle.ingest import statements
from lifecycle.models import Agent, EventKind, LifecycleEvent, Session, SessionStatus, Source
from sessionhub.db import statements as db_statements
from sessionhub.db.statements import Compiled
from sessionhub.models import Team
from sessionhub.text.redaction import RULES_VERSION

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


def _session(team: Team, agent: Agent, external_id: str, **fields: Any) -> Session:
    return Session.objects.create(
        team=team, agent=agent, source=Source.CLAUDE_CODE, external_id=external_id, **fields
    )


@pytest.fixture
def agent(team: Team) -> Agent:
    return Agent.objects.create(team=team, source=Source.CLAUDE_CODE, external_id="repo")


def _columns(session: Session) -> dict[str, Any]:
    row = {f.attname: getattr(session, f.attname) for f in Session._meta.concrete_fields}
    row.pop("updated_at")  # both paths stamp it with their own now
    return row


def test_the_locked_read_returns_what_the_orm_returns(
    team: Team, other_team: Team, agent: Agent
) -> None:
    wanted = [
        _session(team, agent, "a", status=SessionStatus.ACTIVE, started_at=T0, event_count=3),
        _session(team, agent, "b", status=SessionStatus.ENDED, cwd="/src/x", channel="cli"),
    ]
    _session(team, agent, "c")  # not asked for
    other_agent = Agent.objects.create(team=other_team, source=Source.CLAUDE_CODE, external_id="r")
    _session(other_team, other_agent, "a")  # same key, another team

    keys = [(Source.CLAUDE_CODE, "a"), (Source.CLAUDE_CODE, "b"), (Source.OPENCLAW, "a")]
    found = statements.sessions_locked(team, keys)

    orm = {
        (s.source, s.external_id): s
        for s in Session.objects.filter(team=team, external_id__in=["a", "b"])
    }
    assert set(found) == set(orm) == {(Source.CLAUDE_CODE, "a"), (Source.CLAUDE_CODE, "b")}
    for key, session in found.items():
        assert _columns(session) == _columns(orm[key])
        assert session.pk in {s.pk for s in wanted}
        assert not session._state.adding  # a saved row, as the ORM's


def _moved(session: Session, n: int, previous: Session) -> None:
    """Every kind of column ingestion writes: text, times (to the microsecond), flags,
    counts, a float, a big integer, NULLs and a foreign key."""
    session.status = SessionStatus.ENDED
    session.started_at = T0
    session.ended_at = T0 + timedelta(minutes=n, microseconds=123_457)
    session.suspended_at = None if n else T0
    session.event_count = 7 + n
    session.compaction_count = n
    session.suspended_seconds = 12.345 + n / 3
    session.token_count = 2**40 + n
    session.reported_message_count = n or None
    session.has_start = bool(n % 2)
    session.end_detail = "fin ✓ ünïcode"
    session.cwd = f"/src/project-{n}"
    session.channel = "cli"
    session.trigger = "compact" if n else ""
    session.previous_session = previous if n else None
    session.successor_external_id = f"next-{n}"
    session.memory_dirty_at = T0


@pytest.mark.parametrize("how", ["one", "many", "many, no JSON"])
def test_the_session_update_writes_what_save_writes(
    team: Team, agent: Agent, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "many, no JSON": the rows orjson cannot encode take the VALUES statement."""
    if how == "many, no JSON":

        def refuse(*_: Any, **__: Any) -> bytes:
            raise TypeError("Integer exceeds 64-bit range")

        monkeypatch.setattr(db_statements.orjson, "dumps", refuse)
    previous = _session(team, agent, "before")
    mine = [_session(team, agent, f"m{n}") for n in range(3)]
    theirs = [_session(team, agent, f"t{n}") for n in range(3)]
    for n, (a, b) in enumerate(zip(mine, theirs, strict=True)):
        _moved(a, n, previous)
        _moved(b, n, previous)
    if how == "one":
        for session in mine:
            statements.session_write(session)
    else:
        with CaptureQueriesContext(connection) as queries:
            statements.sessions_write(mine)
        (update,) = [q["sql"] for q in queries.captured_queries if "UPDATE" in q["sql"]]
        from_json = connection.vendor == "postgresql" and how == "many"
        assert ("jsonb_to_recordset" in update) is from_json
    for session in theirs:
        session.save()

    for a, b in zip(mine, theirs, strict=True):
        stored_a = _columns(Session.objects.get(pk=a.pk))
        stored_b = _columns(Session.objects.get(pk=b.pk))
        for name in ("id", "external_id", "created_at"):  # identity and creation time
            stored_a.pop(name)
            stored_b.pop(name)
        assert stored_a == stored_b


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="SQLite does not hold text to a length"
)
@pytest.mark.parametrize("how", ["one", "many"])
def test_an_over_long_value_fails_the_session_update_as_it_fails_save(
    team: Team, agent: Agent, how: str
) -> None:
    sessions = [_session(team, agent, f"m{n}") for n in range(2)]
    sessions[1].cwd = "x" * 1001  # the column holds 1,000
    with pytest.raises(DataError), transaction.atomic():
        sessions[1].save()
    with pytest.raises(DataError), transaction.atomic():
        if how == "one":
            statements.session_write(sessions[1])
        else:
            statements.sessions_write(sessions)
    assert not Session.objects.filter(cwd__startswith="xxx").exists()


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="statements are prepared on PostgreSQL only"
)
def test_the_locked_read_and_the_session_update_are_prepared_once_per_connection(
    team: Team, agent: Agent
) -> None:
    _session(team, agent, "p", status=SessionStatus.ACTIVE, started_at=T0)

    def request(n: int) -> None:
        with transaction.atomic():
            (found,) = statements.sessions_locked(team, [(Source.CLAUDE_CODE, "p")]).values()
            found.event_count = n
            statements.session_write(found)

    def prepared() -> set[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT statement FROM pg_prepared_statements")
            return {row[0] for row in cursor.fetchall()}

    request(1)
    after_one = prepared()
    request(2)
    request(3)
    assert prepared() == after_one  # the next requests run them, nothing is prepared anew
    assert Session.objects.get(external_id="p").event_count == 3
    table = Session._meta.db_table
    reads = [s for s in after_one if s.startswith("SELECT") and "FOR UPDATE" in s and table in s]
    updates = [s for s in after_one if s.startswith(f'UPDATE "{table}" SET') and "v.id" not in s]
    # Bound server-side: PostgreSQL shows psycopg's parameters as $n.
    assert reads and all("$1" in s for s in reads)
    assert updates and all("$1" in s for s in updates)


def _row(team: Team, session: Session | None, event_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "team_id": team.pk,
        "session_id": session.pk if session else None,
        "event_id": event_id,
        "kind": EventKind.TOOL_USE,
        "source": Source.CLAUDE_CODE,
        "hook": "PostToolUse",
        "phase": "post",
        "occurred_at": T0,
        "received_at": T0 + timedelta(seconds=1),
        "facts": {"tool": "Bash", "nested": {"n": [1, 2.5, None, "ünïcode"]}},
        "payload": {"tool_input": {"command": "ls"}},
        "redaction_version": RULES_VERSION,
        "orphan_key": "" if session else "orphan-1",
        **extra,
    }


def _stored(event_ids: list[str]) -> list[dict[str, Any]]:
    fields = [f.attname for f in LifecycleEvent._meta.concrete_fields if f.attname != "id"]
    return [
        {name: getattr(e, name) for name in fields}
        for e in LifecycleEvent.objects.filter(event_id__in=event_ids).order_by("event_id")
    ]


def test_the_event_insert_stores_what_bulk_create_stores_and_skips_repeats(
    team: Team, agent: Agent
) -> None:
    session = _session(team, agent, "s")
    ours = [_row(team, session, "ours-1"), _row(team, None, "ours-2", kind=EventKind.OTHER)]
    assert statements.insert_events(ours) == {"ours-1", "ours-2"}
    theirs = [dict(r, event_id=r["event_id"].replace("ours", "orm")) for r in ours]
    LifecycleEvent.objects.bulk_create(LifecycleEvent(**r) for r in theirs)

    def without_ids(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in r.items() if k != "event_id"} for r in rows]

    assert without_ids(_stored(["ours-1", "ours-2"])) == without_ids(_stored(["orm-1", "orm-2"]))
    # A second delivery: the repeat is skipped, the new one inserted, nothing doubled.
    again = [_row(team, session, "ours-1"), _row(team, session, f"new-{uuid.uuid4()}")]
    inserted = statements.insert_events(again)
    assert inserted == {again[1]["event_id"]}
    assert LifecycleEvent.objects.filter(event_id="ours-1").count() == 1


def test_a_compiled_query_returns_what_its_queryset_returns(team: Team, agent: Agent) -> None:
    from lifecycle.services import _CONTINUITY_SESSION

    wanted = _session(
        team, agent, "wanted", status=SessionStatus.ENDED, started_at=T0, ended_at=T0, cwd="/x"
    )
    another = _session(team, agent, "another")
    compiled = Compiled(
        lambda key: Session.objects.filter(team=team, external_id__in=[key, "another"]).order_by(
            "external_id"
        ),
        "\x00stand-in",
    )
    found = compiled.instances("wanted")
    orm = list(Session.objects.filter(team=team).order_by("external_id"))
    assert [_columns(s) for s in found] == [_columns(s) for s in orm]
    assert [row[0] for row in compiled.rows("nothing")] == [another.pk]

    # The continuity lookup: compiled once, each call's own values.
    for key, expected in (("wanted", wanted), ("nobody", None)):
        got = _CONTINUITY_SESSION.instances(team.pk, Source.CLAUDE_CODE, key)
        assert [_columns(s) for s in got] == ([_columns(expected)] if expected else [])
    assert _CONTINUITY_SESSION.instances(team.pk, Source.OPENCLAW, "wanted") == []
