"""Query budgets: how many SQL statements a request costs, whatever its size.

Ingestion must cost the same number of queries for 1, 10 or 100 events, to one session or
spread over ten; continuity the same for 5 or 50 candidate sessions; the read endpoints
the same for small and large sessions and teams. Each test prints what it counted
(``pytest -s tests/perf`` shows the lines; failures name the queries).

The counts leave out SAVEPOINT / RELEASE statements: they come from the test's own
transaction wrapping ``transaction.atomic`` and do not exist in production, where the
atomic block is a plain BEGIN ... COMMIT. The first request of each test is a warm-up
(it also records the token's last use, which later requests within a minute skip).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from lifecycle.models import EventKind, LifecycleEvent, Session, SessionStatus, Source
from memory.models import Observation, SessionFeatures, Summary
from sessionhub import revocations
from sessionhub.models import Team
from tests.factories import EventFactory, GenericAgentFactory, LiveSessionFactory, PinFactory

pytestmark = pytest.mark.django_db

HOOKS = "/api/v1/hooks/claude-code"
CWD = "/home/dev/src/budget"
_SAVEPOINT = re.compile(r"^\s*(SAVEPOINT|RELEASE SAVEPOINT|ROLLBACK TO SAVEPOINT)\b", re.I)

# What the design allows per request (ceilings, not today's exact counts). Ingest to known
# sessions: the token (cached per process, so usually no query), lock the sessions, insert
# the events, write the sessions back. Continuity: find and lock the asking session, look
# for an earlier answer, read the candidates with their features and summaries in one
# query, lock the agent for pins, read its pins, write the inherited pins (at most the
# inheritance cap), then the record, its sources and the continued-by mark in one
# statement. Reads: the session (or page) and a fixed number of related lists.
INGEST_BUDGET = 4
QUIET_EVENT_BUDGET = 1
CONTINUITY_BUDGET = 8
READ_BUDGET = 6


def _count(call: Callable[[], Any]) -> tuple[int, list[str], Any]:
    with CaptureQueriesContext(connection) as ctx:
        response = call()
    sqls = [q["sql"] for q in ctx.captured_queries if not _SAVEPOINT.match(q["sql"])]
    return len(sqls), sqls, response


def _show(title: str, counts: dict[str, int]) -> None:
    print(f"\nquery budget | {title}: " + ", ".join(f"{k}={v}" for k, v in counts.items()))


def _listing(sqls: list[str]) -> str:
    return "\n".join(f"  {i + 1:3}. {sql[:160]}" for i, sql in enumerate(sqls))


def _hook(session_id: str, name: str, **fields: Any) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "transcript_path": f"/home/dev/.claude/projects/budget/{session_id}.jsonl",
        "cwd": CWD,
        "permission_mode": "default",
        "hook_event_name": name,
        **fields,
    }


def _tool_use(session_id: str, n: int, tag: str) -> dict[str, Any]:
    return _hook(
        session_id,
        "PostToolUse",
        tool_name="Bash",
        tool_input={"command": f"ls -la {n}"},
        tool_response={"stdout": "x" * 2000, "stderr": ""},
        tool_use_id=f"toolu_{tag}_{n}",
    )


def _sid(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


def _post(api: APIClient, body: Any, expect: int | None = None) -> Any:
    response = api.post(HOOKS, body, format="json")
    assert response.status_code == 200, response.content
    if expect is not None:
        assert response.json()["accepted"] == expect, response.content
    return response


def _start_sessions(api: APIClient, count: int) -> list[str]:
    sids = [_sid(n) for n in range(1, count + 1)]
    _post(api, [_hook(s, "SessionStart", source="startup") for s in sids], expect=count)
    return sids


def _spread(sids: list[str], total: int, tag: str) -> list[dict[str, Any]]:
    return [_tool_use(sids[i % len(sids)], i, tag) for i in range(total)]


# --- ingestion ------------------------------------------------------------------------------


def test_ingest_to_one_session_costs_the_same_for_1_10_100_events(api: APIClient) -> None:
    # The process's revocation watch up before the first request, as in a server that
    # has answered one: a watch that comes up forgets the tokens cached before it, and
    # the lone event below would read its token again (once per process, not per event).
    revocations.generation()
    [sid] = _start_sessions(api, 1)
    counts: dict[str, int] = {}
    listings: dict[str, list[str]] = {}
    for size in (1, 10, 100):
        body = _spread([sid], size, f"one{size}")
        n, sqls, _ = _count(lambda body=body, size=size: _post(api, body, expect=size))
        counts[f"{size} events"] = n
        listings[f"{size} events"] = sqls
    _show("ingest, one known session", counts)
    assert counts["10 events"] == counts["100 events"], (
        f"{counts}\n100 events:\n{_listing(listings['100 events'])}"
    )
    assert counts["10 events"] <= INGEST_BUDGET, _listing(listings["10 events"])
    # A lone event that moves no state takes one statement (lifecycle/ingest/quick.py).
    assert counts["1 events"] == QUIET_EVENT_BUDGET, _listing(listings["1 events"])
    assert LifecycleEvent.objects.filter(kind=EventKind.TOOL_USE).count() == 111


def test_ingest_to_ten_sessions_costs_the_same_for_10_and_100_events(api: APIClient) -> None:
    sids = _start_sessions(api, 10)
    counts: dict[str, int] = {}
    listings: dict[str, list[str]] = {}
    for size in (10, 100):
        body = _spread(sids, size, f"ten{size}")
        n, sqls, _ = _count(lambda body=body, size=size: _post(api, body, expect=size))
        counts[f"{size} events"] = n
        listings[f"{size} events"] = sqls
    _show("ingest, ten known sessions", counts)
    assert counts["10 events"] == counts["100 events"], (
        f"{counts}\n100 events:\n{_listing(listings['100 events'])}"
    )


def test_ingest_to_ten_sessions_costs_no_more_than_to_one(api: APIClient) -> None:
    sids = _start_sessions(api, 10)
    one, one_sqls, _ = _count(lambda: _post(api, _spread(sids[:1], 100, "a"), expect=100))
    ten, ten_sqls, _ = _count(lambda: _post(api, _spread(sids, 100, "b"), expect=100))
    _show("ingest, 100 events to 1 vs 10 sessions", {"1 session": one, "10 sessions": ten})
    assert ten <= one, f"1 session:\n{_listing(one_sqls)}\n10 sessions:\n{_listing(ten_sqls)}"
    assert ten <= INGEST_BUDGET, _listing(ten_sqls)


def test_ingest_starting_ten_sessions_costs_no_more_than_one(api: APIClient) -> None:
    _post(api, [_hook(_sid(900), "SessionStart", source="startup")])  # warm-up
    one, one_sqls, _ = _count(
        lambda: _post(api, [_hook(_sid(1), "SessionStart", source="startup")], expect=1)
    )
    ten, ten_sqls, _ = _count(
        lambda: _post(
            api, [_hook(_sid(n), "SessionStart", source="startup") for n in range(2, 12)], expect=10
        )
    )
    _show("ingest, starting 1 vs 10 new sessions", {"1 start": one, "10 starts": ten})
    assert ten <= one + 2, f"1 start:\n{_listing(one_sqls)}\n10 starts:\n{_listing(ten_sqls)}"


# The columns an event moves on its session, in both ingest paths. An UPDATE that changes
# no indexed column is heap-only (HOT) on PostgreSQL: no index of the session table takes
# a new entry per event.
_PER_EVENT_COLUMNS = (
    "event_count",
    "prompt_count",
    "tool_use_count",
    "in_compaction",
    "last_event_at",
    "model",
    "token_count",
    "reported_message_count",
    "memory_dirty_at",
    "updated_at",
)


def _session_indexes() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index "
            "WHERE indrelid = %s::regclass",
            [Session._meta.db_table],
        )
        return dict(cursor.fetchall())


def _hot_counts() -> tuple[int, int]:
    """This transaction's updates of the session table so far, all and heap-only."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_stat_get_xact_tuples_updated(%s::regclass), "
            "pg_stat_get_xact_tuples_hot_updated(%s::regclass)",
            [Session._meta.db_table] * 2,
        )
        updated, hot = cursor.fetchone()
    return updated, hot


def test_no_session_index_holds_a_column_each_event_moves() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("index definitions are read from PostgreSQL's catalog")
    indexes = _session_indexes()
    assert len(indexes) >= 5, indexes
    for name, definition in indexes.items():
        words = set(re.findall(r"\w+", definition))
        moved = words.intersection(_PER_EVENT_COLUMNS)
        assert not moved, f"{name} holds {moved}: every event's update would touch it"


@pytest.mark.parametrize("size", [1, 10], ids=["one-statement path", "general path"])
def test_a_sessions_update_per_request_is_heap_only(api: APIClient, size: int) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("heap-only updates are PostgreSQL's")
    [sid] = _start_sessions(api, 1)
    _post(api, _spread([sid], 1, "warm"), expect=1)
    updated, hot = _hot_counts()
    for round_no in range(5):
        _post(api, _spread([sid], size, f"hot{round_no}"), expect=size)
    more_updated, more_hot = _hot_counts()
    assert more_updated - updated >= 5
    assert more_hot - hot == more_updated - updated, (
        f"{more_updated - updated} session updates, {more_hot - hot} of them heap-only"
    )


def test_the_session_table_leaves_room_on_each_page_for_the_rows_next_versions() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("a fill factor is PostgreSQL's")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reloptions FROM pg_class WHERE relname = %s", [Session._meta.db_table]
        )
        (options,) = cursor.fetchone()
    assert "fillfactor=70" in (options or []), options


def test_canonical_events_endpoint_costs_the_same_for_1_and_100_events(
    api: APIClient,
) -> None:
    def event(n: int, kind: str = "tool_use") -> dict[str, Any]:
        return {
            "event_id": f"canon-{n}",
            "kind": kind,
            "agent_id": "research",
            "session_id": "canon-session",
            "tool_name": "grep",
            "phase": "post",
        }

    response = api.post("/api/v1/events", event(0, "session_start"), format="json")
    assert response.status_code == 200, response.content
    counts = {}
    for size, first in ((1, 1), (100, 2)):
        body = [event(first + i) for i in range(size)]
        n, _sqls, response = _count(
            lambda body=body: api.post("/api/v1/events", body, format="json")
        )
        assert response.status_code == 200, response.content
        counts[f"{size} events"] = n
    _show("ingest, canonical /events, one session", counts)
    assert counts["100 events"] <= INGEST_BUDGET, counts
    # A lone event that moves no state takes one statement (lifecycle/ingest/quick.py).
    assert counts["1 events"] == QUIET_EVENT_BUDGET, counts


# --- continuity ------------------------------------------------------------------------------


def _completed(agent: Any, n: int, topics: list[str]) -> Session:
    ended = timezone.now() - timedelta(hours=1 + n)
    session = LiveSessionFactory(
        agent=agent,
        source=agent.source,
        status=SessionStatus.ENDED,
        started_at=ended - timedelta(minutes=30),
        ended_at=ended,
        last_event_at=ended,
        end_reason="prompt_input_exit",
    )
    SessionFeatures.objects.create(
        team=agent.team,
        session=session,
        hot_topics=topics,
        active_projects=[CWD],
        pending_tasks=[{"id": f"task-{n}", "text": f"TODO task-{n} is open", "source": "prompt"}],
        done_tasks=[],
    )
    Summary.objects.create(
        team=agent.team,
        session=session,
        request=f"request {n}",
        completed=f"completed {n}",
        next_steps=f"next {n}",
        events_seen=3,
    )
    return session


def _continuity_queries(api: APIClient, team: Team, candidates: int) -> tuple[int, list[str], Any]:
    agent = GenericAgentFactory(
        team=team, source=Source.CLAUDE_CODE, external_id=f"gw:{candidates}"
    )
    topics = ["orders", "billing", "postgres", "index", "latency"]
    made = [_completed(agent, n, topics) for n in range(candidates)]
    # The best candidate held two pins; both are inherited.
    for label in ("orders table", "billing flag"):
        PinFactory(
            agent=agent,
            team=team,
            label=label,
            origin_session=made[0],
            unpinned_at=made[0].ended_at,
        )
    LiveSessionFactory(agent=agent, source=agent.source, external_id=f"asking-{candidates}")
    # The warm-up asks for a session of another agent, so the measured answer still
    # inherits the two pins (a second session of the same agent would find them taken).
    loner = GenericAgentFactory(
        team=team, source=Source.CLAUDE_CODE, external_id=f"warm:{candidates}"
    )
    LiveSessionFactory(agent=loner, source=loner.source, external_id=f"warm-{candidates}")
    body = {"source": "claude-code", "keywords": topics}
    warm = api.post(
        "/api/v1/continuity", {**body, "session_id": f"warm-{candidates}"}, format="json"
    )
    assert warm.status_code == 200, warm.content
    n, sqls, response = _count(
        lambda: api.post(
            "/api/v1/continuity", {**body, "session_id": f"asking-{candidates}"}, format="json"
        )
    )
    assert response.status_code == 200, response.content
    assert response.json()["candidates_scored"] == candidates
    return n, sqls, response


def test_continuity_costs_the_same_for_5_and_50_candidates(api: APIClient, team: Team) -> None:
    five, five_sqls, five_answer = _continuity_queries(api, team, 5)
    fifty, fifty_sqls, fifty_answer = _continuity_queries(api, team, 50)
    _show("continuity, 5 vs 50 candidate sessions", {"5": five, "50": fifty})
    for answer in (five_answer.json(), fifty_answer.json()):
        assert "PENDING TASKS" in answer["preamble"], answer
        assert len(answer["inherited_pins"]) == 2, answer
    assert five == fifty, f"5:\n{_listing(five_sqls)}\n50:\n{_listing(fifty_sqls)}"
    assert fifty <= CONTINUITY_BUDGET, _listing(fifty_sqls)


# --- reading ---------------------------------------------------------------------------------


def _get(api: APIClient, path: str) -> tuple[int, list[str]]:
    n, sqls, response = _count(lambda: api.get(path))
    assert response.status_code == 200, response.content
    return n, sqls


def test_session_list_costs_the_same_for_5_and_50_sessions(api: APIClient, team: Team) -> None:
    agent = GenericAgentFactory(team=team)
    for _ in range(5):
        LiveSessionFactory(agent=agent)
    _get(api, "/api/v1/sessions")  # warm-up
    five, _ = _get(api, "/api/v1/sessions")
    other = GenericAgentFactory(team=team)
    for _ in range(45):
        LiveSessionFactory(agent=other)
    fifty, sqls = _get(api, "/api/v1/sessions")
    _show("session list, 5 vs 50 sessions", {"5": five, "50": fifty})
    assert five == fifty, _listing(sqls)
    assert fifty <= READ_BUDGET, _listing(sqls)


def _session_with_events(agent: Any, count: int) -> Session:
    session = LiveSessionFactory(agent=agent)
    for n in range(count):
        EventFactory(
            session=session, kind=EventKind.TOOL_USE, phase="post", event_id=f"{session.pk}-{n}"
        )
    return session


def test_session_detail_costs_the_same_for_1_and_100_events(api: APIClient, team: Team) -> None:
    agent = GenericAgentFactory(team=team)
    small = _session_with_events(agent, 1)
    large = _session_with_events(agent, 100)
    _get(api, f"/api/v1/sessions/{small.pk}")  # warm-up
    one, _ = _get(api, f"/api/v1/sessions/{small.pk}")
    hundred, sqls = _get(api, f"/api/v1/sessions/{large.pk}")
    _show("session detail, 1 vs 100 events", {"1": one, "100": hundred})
    assert one == hundred, _listing(sqls)
    assert hundred <= READ_BUDGET, _listing(sqls)


def test_session_detail_costs_the_same_in_a_chain_of_1_and_5(api: APIClient, team: Team) -> None:
    agent = GenericAgentFactory(team=team)
    alone = LiveSessionFactory(agent=agent)
    chain = [LiveSessionFactory(agent=agent)]
    for _ in range(4):
        chain.append(LiveSessionFactory(agent=agent, previous_session=chain[-1]))
    _get(api, f"/api/v1/sessions/{alone.pk}")  # warm-up
    one, one_sqls = _get(api, f"/api/v1/sessions/{alone.pk}")
    five, five_sqls = _get(api, f"/api/v1/sessions/{chain[2].pk}")
    _show("session detail, chain of 1 vs 5", {"1": one, "5": five})
    assert five == one, f"1:\n{_listing(one_sqls)}\n5:\n{_listing(five_sqls)}"


def test_session_events_and_memory_cost_the_same_for_1_and_100_events(
    api: APIClient, team: Team
) -> None:
    agent = GenericAgentFactory(team=team)
    counts: dict[str, int] = {}
    for size in (1, 100):
        session = _session_with_events(agent, size)
        for event in LifecycleEvent.objects.filter(session=session):
            Observation.objects.create(
                team=team,
                session=session,
                event=event,
                tool_name="Bash",
                occurred_at=event.occurred_at,
            )
        _get(api, f"/api/v1/sessions/{session.pk}/events")  # warm-up
        counts[f"events {size}"], _ = _get(api, f"/api/v1/sessions/{session.pk}/events")
        counts[f"memory {size}"], _ = _get(api, f"/api/v1/sessions/{session.pk}/memory")
    _show("session events and memory, 1 vs 100 events", counts)
    assert counts["events 1"] == counts["events 100"] <= READ_BUDGET, counts
    assert counts["memory 1"] == counts["memory 100"] <= READ_BUDGET, counts


# What a memory run over a session's new tool uses may cost, however many: read the
# session, read its new events, write their observations, record that it caught up.
MEMORY_RUN_BUDGET = 4


def test_a_memory_run_over_tool_uses_costs_the_same_for_1_and_50_events() -> None:
    from memory import tasks

    counts: dict[str, int] = {}
    for size in (1, 50):
        session = LiveSessionFactory()
        for n in range(size):
            EventFactory(
                session=session,
                kind=EventKind.TOOL_USE,
                phase="post",
                facts={"tool_name": "Bash"},
                payload={"tool_input": {"command": f"ls {n}"}, "tool_response": "ok"},
            )
        Session.objects.filter(pk=session.pk).update(memory_dirty_at=timezone.now())
        count, sqls, found = _count(lambda pk=str(session.pk): tasks.process_session(pk))
        assert found is True
        assert Observation.objects.filter(session=session).count() == size
        counts[f"{size} events"] = count
        assert count <= MEMORY_RUN_BUDGET, _listing(sqls)
    _show("a memory run over tool uses", counts)
    assert counts["1 events"] == counts["50 events"]
