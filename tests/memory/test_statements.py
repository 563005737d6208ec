"""Continuity's hand-built statements against what the ORM does for the same job, on
whichever database the run uses (PostgreSQL in the main suite, where they run; SQLite in
``make test-sqlite``, where the ORM's own statements run and the comparisons still hold)."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.db import DataError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from lifecycle.models import Agent, Session, SessionStatus
from memory import statements
from memory.continuity.read import _candidate_rows, _candidates_queryset
from memory.models import ContinuityRecord, Observation, SessionFeatures
from sessionhub.models import Team
from tests.factories import AgentFactory, EventFactory, SessionFactory, SummaryFactory

postgres_only = pytest.mark.skipif(
    "connection.vendor != 'postgresql'", reason="the statements run on PostgreSQL only"
)


def _dsn() -> str:
    """The test database's address, for a connection of another client's own."""
    settings = connection.settings_dict
    return (
        f"host={settings['HOST'] or 'localhost'} port={settings['PORT'] or 5432} "
        f"dbname={settings['NAME']} user={settings['USER']}"
    )


SOURCE = uuid.UUID("6f1c0a52-3b1e-4c57-9d0e-2a4b8c1d7e90")


def _record(session: Session, **fields: Any) -> ContinuityRecord:
    values: dict[str, Any] = {
        "team_id": session.team_id,
        "session": session,
        "trigger": ContinuityRecord.Trigger.AUTOMATIC,
        "stage": ContinuityRecord.Stage.START,
        "candidates": [
            {"session_id": str(SOURCE), "score": 0.4125, "used": True, "parts": {}},
            {"session_id": str(SOURCE), "external_id": "ünïcode ✓", "score": 0.0},
        ],
        "inherited_pins": [{"uid": str(SOURCE), "label": "db", "inherited_from": None}],
        "keywords": ["billing", "schema"],
        "preamble": "## Continuing from\n- a line with 'quotes' and \\ backslashes",
        "requested_by": "token:abcd1234",
        "redaction_version": 7,
        "created_at": timezone.now(),
        **fields,
    }
    return ContinuityRecord(**values)


def _columns(record: ContinuityRecord) -> dict[str, Any]:
    row = {f.attname: getattr(record, f.attname) for f in ContinuityRecord._meta.concrete_fields}
    for name in ("id", "uid", "created_at"):  # each record its own
        row.pop(name)
    return row


@pytest.mark.django_db
def test_the_record_insert_writes_what_the_orm_writes(team: Team) -> None:
    agent = AgentFactory(team=team)
    asking, other = (
        SessionFactory(agent=agent, status=SessionStatus.ACTIVE),
        SessionFactory(agent=agent, status=SessionStatus.ACTIVE),
    )
    sources = [SessionFactory(agent=agent), SessionFactory(agent=agent)]
    bystander = SessionFactory(agent=agent)

    record = _record(asking, candidates=[{"1": "a key that was an integer"}, {"x": None}])
    with CaptureQueriesContext(connection) as queries:
        statements.record_insert(record, [s.pk for s in sources])
    if connection.vendor == "postgresql":
        assert len(queries) == 1  # the record, its sources, the sources marked: one trip

    orm = _record(other, candidates=[{"1": "a key that was an integer"}, {"x": None}])
    orm.save()
    orm.sources.set(sources)

    stored, expected = ContinuityRecord.objects.get(pk=record.pk), orm
    expected.refresh_from_db()
    assert stored.uid == record.uid and not record._state.adding
    assert stored.created_at == record.created_at
    assert _columns(stored) == {**_columns(expected), "session_id": asking.pk}
    assert set(stored.sources.all()) == set(sources)
    assert {s.pk: s.continued_by_id for s in Session.objects.filter(agent=agent)} == {
        asking.pk: None,
        other.pk: None,
        sources[0].pk: asking.pk,
        sources[1].pk: asking.pk,
        bystander.pk: None,
    }


@pytest.mark.django_db
def test_a_record_without_sources_marks_nothing(team: Team) -> None:
    session = SessionFactory(agent=AgentFactory(team=team), status=SessionStatus.ACTIVE)
    record = _record(session, candidates=[])
    statements.record_insert(record, [])
    stored = ContinuityRecord.objects.get(pk=record.pk)
    assert stored.candidates == [] and not stored.sources.exists()
    assert not Session.objects.filter(continued_by__isnull=False).exists()


@postgres_only
@pytest.mark.django_db
def test_an_over_long_value_fails_the_record_insert_as_it_fails_save(team: Team) -> None:
    session = SessionFactory(agent=AgentFactory(team=team), status=SessionStatus.ACTIVE)
    source = SessionFactory(agent=session.agent)
    for write in (
        lambda r: statements.record_insert(r, [source.pk]),
        lambda r: r.save(),
    ):
        with pytest.raises(DataError), transaction.atomic():
            write(_record(session, trigger="x" * 17))  # varchar(16)
    assert not ContinuityRecord.objects.exists()
    source.refresh_from_db()
    assert source.continued_by_id is None  # nothing of the failed statement stayed


@pytest.mark.django_db
def test_the_automatic_record_is_the_first_of_its_stage(team: Team) -> None:
    session = SessionFactory(agent=AgentFactory(team=team), status=SessionStatus.ACTIVE)
    assert statements.automatic_record(session.pk, ContinuityRecord.Stage.START) is None
    now = timezone.now()
    manual = _record(session, trigger=ContinuityRecord.Trigger.MANUAL, stage="")
    later = _record(session, created_at=now)
    first = _record(session, created_at=now - timedelta(seconds=1))
    prompt = _record(session, stage=ContinuityRecord.Stage.PROMPT, created_at=now)
    other = _record(
        SessionFactory(agent=session.agent, status=SessionStatus.ACTIVE),
        created_at=now - timedelta(days=1),
    )
    for record in (manual, later, first, prompt, other):
        at = record.created_at
        statements.record_insert(record, [])
        # save() (the SQLite path) stamps its own now: the order is the test's.
        ContinuityRecord.objects.filter(pk=record.pk).update(created_at=at)

    found = statements.automatic_record(session.pk, ContinuityRecord.Stage.START)
    assert found is not None and found.pk == first.pk
    assert found.candidates == first.candidates and found.session_id == session.pk
    found = statements.automatic_record(session.pk, ContinuityRecord.Stage.PROMPT)
    assert found is not None and found.pk == prompt.pk
    assert statements.automatic_record(uuid.uuid4(), ContinuityRecord.Stage.START) is None


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_the_row_lock_holds_the_row_until_the_transaction_ends(team: Team) -> None:
    agent = AgentFactory(team=team)
    session = SessionFactory(agent=agent)

    def try_lock(model: type[Any], pk: Any) -> str:
        with psycopg.connect(_dsn(), autocommit=True) as other:
            table = model._meta.db_table
            try:
                other.execute(f"SELECT 1 FROM {table} WHERE id = %s FOR UPDATE NOWAIT", [pk])  # noqa: S608
            except psycopg.errors.LockNotAvailable:
                return "held"
            return "free"

    outcome: dict[str, str] = {}
    with transaction.atomic():
        statements.row_lock(Session, session.pk)
        statements.row_lock(Agent, agent.pk)
        # From another thread, as another client would: the locks are held.
        worker = threading.Thread(
            target=lambda: outcome.update(
                session=try_lock(Session, session.pk), agent=try_lock(Agent, agent.pk)
            )
        )
        worker.start()
        worker.join()
    assert outcome == {"session": "held", "agent": "held"}
    assert try_lock(Session, session.pk) == "free"


@pytest.mark.django_db
def test_the_candidate_rows_are_the_querysets_rows(team: Team) -> None:
    agent = AgentFactory(team=team)
    now = timezone.now()
    sessions = [
        SessionFactory(
            agent=agent, started_at=now - timedelta(days=i, hours=1), status=status, trigger=trigger
        )
        for i, (status, trigger) in enumerate(
            [
                (SessionStatus.ENDED, ""),
                (SessionStatus.CRASHED, "user"),
                (SessionStatus.ENDED, "heartbeat"),  # background: never a candidate
                (SessionStatus.ACTIVE, ""),  # not closed
                (SessionStatus.ENDED, ""),  # the excluded one
                (SessionStatus.ENDED, ""),
                (SessionStatus.ENDED, ""),  # past the window
            ]
        )
    ]
    sessions[6].ended_at = now - timedelta(days=40)
    sessions[6].save(update_fields=["ended_at"])
    SessionFeatures.objects.create(
        team=team,
        session=sessions[0],
        hot_topics=["Billing", "schema"],
        pending_tasks=[{"id": "task-001", "text": "write the notes"}],
        done_tasks=["task-000"],
    )
    SessionFeatures.objects.create(team=team, session=sessions[5], pending_tasks={"odd": 1})
    SummaryFactory(session=sessions[1], learned="the ledger is append-only")
    SessionFactory(agent=AgentFactory(team=team))  # another agent's

    since = now - timedelta(days=30)
    for limit in (200, 2):
        rows = _candidate_rows(agent.pk, sessions[4].pk, since, limit)
        orm = _candidates_queryset(agent.pk, sessions[4].pk, since, limit)
        assert rows == [tuple(r) for r in orm]
        wanted = [s.pk for s in (sessions[0], sessions[1], sessions[5])][:limit]
        assert [r[0] for r in rows] == wanted
    # The statement is compiled once, and the second agent's rows are its own.
    assert _candidate_rows(uuid.uuid4(), sessions[4].pk, since, 200) == []


@pytest.mark.django_db
def test_the_pins_read_returns_what_the_orm_returns(team: Team) -> None:
    from memory.continuity.read import _pins_read, pins_with_originals
    from tests.factories import PinFactory

    agent = AgentFactory(team=team)
    source, target = SessionFactory(agent=agent), SessionFactory(agent=agent)
    now = timezone.now()
    original = PinFactory(agent=agent, team=team, origin_session=source, label="schema")
    PinFactory(
        agent=agent,
        team=team,
        label="deploy",
        origin_session=None,
        inherited_from=original,
        inherited_into=source,
        pinned_at=now - timedelta(days=2),
        unpinned_at=now,
    )
    PinFactory(agent=agent, team=team, origin_session=target, label="active", pinned_at=now)
    PinFactory(agent=AgentFactory(team=team), team=team, label="another agent's")

    found = pins_with_originals(agent.pk, source.pk)
    orm = list(_pins_read(agent.pk, source.pk))
    assert [p.pk for p in found] == [p.pk for p in orm] and len(found) == 3

    def fields(pin: Any) -> dict[str, Any]:
        return {f.attname: getattr(pin, f.attname) for f in type(pin)._meta.concrete_fields}

    with CaptureQueriesContext(connection) as queries:
        for mine, theirs in zip(found, orm, strict=True):
            assert fields(mine) == fields(theirs)
            assert (mine.inherited_from and fields(mine.inherited_from)) == (
                theirs.inherited_from and fields(theirs.inherited_from)
            )
    assert len(queries) == 0  # the originals came with the pins


def _observation_rows(session: Session, events: list[Any]) -> list[dict[str, Any]]:
    moment = timezone.now().replace(microsecond=123456)
    return [
        {
            "team_id": session.team_id,
            "session_id": session.pk,
            "event_id": event.pk,
            "tool_name": "Bash" if n else "ünïcode ✓ 'quoted' \\ tool",
            "input_digest": f"ls -la {n}",
            "output_digest": "" if n else "a line\nwith \x01 control",
            "failed": bool(n % 2),
            "occurred_at": moment + timedelta(seconds=n),
            "redaction_version": 7,
        }
        for n, event in enumerate(events)
    ]


def _observations(session: Session) -> list[dict[str, Any]]:
    return list(
        Observation.objects.filter(session=session)
        .order_by("event_id")
        .values(
            "team_id",
            "session_id",
            "event_id",
            "tool_name",
            "input_digest",
            "output_digest",
            "failed",
            "occurred_at",
            "redaction_version",
        )
    )


@pytest.mark.django_db
def test_the_rows_insert_writes_what_bulk_create_writes(team: Team) -> None:
    ours = SessionFactory(agent=AgentFactory(team=team))
    theirs = SessionFactory(agent=ours.agent)
    mine = [EventFactory(session=ours, kind="tool_use") for _ in range(3)]
    others = [EventFactory(session=theirs, kind="tool_use") for _ in range(3)]
    rows = _observation_rows(ours, mine)
    with CaptureQueriesContext(connection) as queries:
        statements.rows_insert(Observation, ours, rows)
    # One statement on PostgreSQL; elsewhere the session's read and bulk_create's insert,
    # in a savepoint of their own.
    assert len(queries) == (1 if connection.vendor == "postgresql" else 4)
    Observation.objects.bulk_create(
        [Observation(**row) for row in _observation_rows(theirs, others)]
    )
    written, expected = _observations(ours), _observations(theirs)
    for row in (*written, *expected):
        row.pop("session_id"), row.pop("event_id")
    assert written == expected
    assert [row["event_id"] for row in _observations(ours)] == [e.pk for e in mine]


@pytest.mark.django_db
def test_the_rows_insert_skips_a_row_stored_before(team: Team) -> None:
    session = SessionFactory(agent=AgentFactory(team=team))
    events = [EventFactory(session=session, kind="tool_use") for _ in range(3)]
    rows = _observation_rows(session, events)
    statements.rows_insert(Observation, session, rows[:1])
    statements.rows_insert(Observation, session, [{**rows[0], "tool_name": "changed"}, *rows[1:]])
    stored = _observations(session)
    assert [row["event_id"] for row in stored] == [e.pk for e in events]
    assert stored[0]["tool_name"] == rows[0]["tool_name"]  # the first write stands
    statements.rows_insert(Observation, session, [])
    assert Observation.objects.count() == 3


@postgres_only
@pytest.mark.django_db
def test_an_over_long_value_fails_the_rows_insert_as_it_fails_bulk_create(team: Team) -> None:
    session = SessionFactory(agent=AgentFactory(team=team))
    event = EventFactory(session=session, kind="tool_use")
    row = {**_observation_rows(session, [event])[0], "tool_name": "x" * 201}  # varchar(200)
    for write in (
        lambda: statements.rows_insert(Observation, session, [row]),
        lambda: Observation.objects.bulk_create([Observation(**row)]),
    ):
        with pytest.raises(DataError), transaction.atomic():
            write()
    assert not Observation.objects.exists()


@pytest.mark.django_db
def test_the_rows_insert_writes_nothing_for_a_session_that_is_gone(team: Team) -> None:
    session = SessionFactory(agent=AgentFactory(team=team))
    rows = _observation_rows(session, [EventFactory(session=session, kind="tool_use")])
    Session.objects.filter(pk=session.pk).delete()
    statements.rows_insert(Observation, session, rows)
    assert not Observation.objects.exists()


@pytest.mark.django_db
def test_a_deletion_takes_the_observations_with_it(team: Team) -> None:
    # The rows' foreign keys have no constraints in the database: Django's cascade is what
    # deletes them, whichever of their event, session or team goes.
    sessions = [SessionFactory(agent=AgentFactory(team=team)) for _ in range(2)]
    events = {s.pk: [EventFactory(session=s, kind="tool_use") for _ in range(3)] for s in sessions}
    for session in sessions:
        statements.rows_insert(Observation, session, _observation_rows(session, events[session.pk]))
    first, second = sessions
    events[first.pk][0].delete()
    assert Observation.objects.filter(session=first).count() == 2
    first.delete()
    assert set(Observation.objects.values_list("session_id", flat=True)) == {second.pk}
    team.delete()
    assert not Observation.objects.exists()


def _waiting_on_a_lock(seconds: float = 10.0) -> bool:
    """Whether another backend of this database comes to wait on a row lock meanwhile."""
    deadline = time.monotonic() + seconds
    with psycopg.connect(_dsn(), autocommit=True) as watcher:
        while time.monotonic() < deadline:
            found = watcher.execute(
                "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            ).fetchone()
            if found:
                return True
            time.sleep(0.01)
    return False


def _in_a_thread(job: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """``job`` run on another thread, with its own connection, as another process would."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = job()
        except Exception as exc:  # noqa: BLE001 - handed back to the test
            outcome["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def _ended_session_with_rows(team: Team) -> tuple[Session, list[dict[str, Any]]]:
    """An ended session (retention may delete it) and an observation row of its tool use."""
    session = SessionFactory(agent=AgentFactory(team=team), status=SessionStatus.ENDED)
    return session, _observation_rows(session, [EventFactory(session=session, kind="tool_use")])


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_session_deleted_while_its_rows_go_in_takes_them(team: Team) -> None:
    from lifecycle.services import session_delete_if_closed

    session, rows = _ended_session_with_rows(team)
    with transaction.atomic():
        statements.rows_insert(Observation, session, rows)
        thread, outcome = _in_a_thread(lambda: session_delete_if_closed(session))
        # The deletion waits for the insert's lock on the session, as it waited for the
        # foreign keys' checks.
        assert _waiting_on_a_lock()
    thread.join(10)
    assert outcome == {"result": True}
    assert not Observation.objects.exists()


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_rows_that_wait_for_their_sessions_deletion_are_not_written(team: Team) -> None:
    session, rows = _ended_session_with_rows(team)
    with transaction.atomic():
        Session.objects.select_for_update().get(pk=session.pk)
        thread, outcome = _in_a_thread(lambda: statements.rows_insert(Observation, session, rows))
        assert _waiting_on_a_lock()
        Session.objects.filter(pk=session.pk).delete()
    thread.join(10)
    assert outcome == {"result": None}  # no error, and no row left without its session
    assert not Observation.objects.exists()


# --- a memory run's reads --------------------------------------------------------------------


def test_a_runs_session_read_returns_what_the_orm_returns(team: Team) -> None:
    from memory import pipeline

    session = SessionFactory(team=team, memory_cursor=17, model="claude-x", cwd="/tmp/ünï")
    SessionFactory(team=team)  # another
    mine = pipeline._session(str(session.pk))
    orm = Session.objects.get(pk=session.pk)
    assert mine is not None
    for field in Session._meta.concrete_fields:
        assert getattr(mine, field.attname) == getattr(orm, field.attname), field.name
    assert mine.team == team  # read when wanted (the LLM budget), not joined on every run
    assert pipeline._session(str(uuid.uuid4())) is None
    assert pipeline._session("not an id") is None


def test_a_runs_new_events_are_the_querysets_rows(team: Team) -> None:
    from lifecycle.models import EventKind
    from memory import pipeline

    session = SessionFactory(team=team)
    events = [
        EventFactory(
            session=session,
            kind=EventKind.TOOL_USE,
            phase="post",
            facts={"tool_name": "Bash", "note": "ünïcode ✓"},
            payload={"tool_input": {"command": f"ls {n}"}, "big": 2**53 + n},
        )
        for n in range(4)
    ]
    EventFactory(session=SessionFactory(team=team), kind=EventKind.PROMPT)  # another's
    session.memory_cursor = events[0].pk  # the first taken in already
    # The queryset the statement was compiled from, run by the ORM (in no set order).
    orm = sorted(pipeline._NEW_EVENTS.build(session.pk, session.memory_cursor))
    new = pipeline._new_events(session)
    assert [e.id for e in new] == [e.pk for e in events[1:]]
    for event, row in zip(new, orm, strict=True):
        assert (event.id, event.kind, event.phase, event.source) == row[:4]
        assert event.facts == pipeline._decoded(row[4])
        assert event.payload == pipeline._decoded(row[5])
        assert event.occurred_at == row[6]
    assert new[0].payload["big"] == 2**53 + 1  # read as stored, not as a float


def test_a_runs_new_events_come_in_the_order_they_were_stored(team: Team) -> None:
    """The statement leaves the order to the run: events whose times run against their
    ids (a gateway that sent them late) and a row rewritten since (re-redaction moves it
    on disk) come back from the database out of id order, and the run still has them
    by id."""
    from lifecycle.models import EventKind, LifecycleEvent
    from memory import pipeline

    session = SessionFactory(team=team)
    now = timezone.now()
    events = [
        EventFactory(
            session=session,
            kind=EventKind.TOOL_USE,
            phase="post",
            payload={"n": n},
            occurred_at=now - timedelta(seconds=n),
        )
        for n in range(5)
    ]
    LifecycleEvent.objects.filter(pk=events[1].pk).update(payload={"n": 1, "again": True})
    session.memory_cursor = events[0].pk
    if connection.vendor == "postgresql":
        given = [row[0] for row in pipeline._NEW_EVENTS.rows(session.pk, session.memory_cursor)]
        assert sorted(given) == [e.pk for e in events[1:]]
        assert given != sorted(given)  # the database's own order is not the stored one
    new = pipeline._new_events(session)
    assert [e.id for e in new] == [e.pk for e in events[1:]]
    assert new[0].payload == {"n": 1, "again": True}
