#!/usr/bin/env python3
"""The dashboard's session list with 100,000 sessions: is it still quick?

    .venv/bin/python bench/dashboard_list.py                  # 100,000 sessions, 30 runs each
    .venv/bin/python bench/dashboard_list.py --sessions 5000 --runs 10   # a smoke run
    .venv/bin/python bench/dashboard_list.py --fresh          # recreate the database first

Seeds one team with N sessions (and per session a prompt, a turn end, a reasoning tail
and, when it ended, a summary) into the database named by DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/sessionhub_bench, created when missing; seeding is
skipped when the team already has N sessions). It then renders the session list through
Django's test client, in process, a few dozen times per scenario (plain, filtered,
sorted, deep pages, full-text searches) and prints p50/p95 in milliseconds, the number
of queries per render, and for comparison the time of the page's main SQL query run
straight with psycopg. It also times the COUNT(*) that the list deliberately avoids.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/sessionhub_bench")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sessionhub.settings_test")

import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402

TEAM_SLUG = "bench-dashboard"
USERNAME = "bench-dashboard"
AGENTS = 40
CHANNELS = ["cli", "cli", "cli", "discord", "signal", "slack"]
STATUSES = ["ended"] * 80 + ["crashed"] * 8 + ["active"] * 7 + ["suspended"] * 5
REASONS = ["prompt_input_exit", "clear", "new", "idle_timeout", "reset", "daily_reset"]
WORDS = (
    "migrate session store cache redis index query planner invoice billing export "
    "flaky test timezone footer header deploy rollback schema migration retry queue "
    "worker celery webhook token rotate secret dashboard chart latency memory leak "
    "parser lexer grammar release notes docs readme review refactor rename module"
).split()
SHOWING = re.compile(r"Showing (\d+)\u2013(\d+) of (?:(more than )?([\d,]+)|the matching)")
RARE = "kubernetes"  # in about one prompt in a hundred
COMMON = "changelog"  # in about one final message in three


def log(message: str) -> None:
    print(f"[dashboard-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def ms(seconds: float) -> float:
    return seconds * 1000


def pct(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(p / 100 * len(ordered) + 0.5) - 1))]


# --- the database ------------------------------------------------------------------------


def ensure_database(url: str, fresh: bool = False) -> None:
    """Create the database named in the URL when it does not exist (or anew)."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    name = info.get("dbname") or "postgres"
    admin = {**info, "dbname": "postgres"}
    with psycopg.connect(**admin, autocommit=True) as conn:
        if fresh:
            log(f"dropping database {name}")
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            log(f"creating database {name}")
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def copy_rows(model: Any, rows: Iterable[dict[str, Any]]) -> int:
    """COPY rows into a model's table; unnamed columns take the field's default."""
    from django.db import connection, models

    fields = [
        f
        for f in model._meta.concrete_fields
        if not (f.primary_key and isinstance(f, models.AutoField | models.BigAutoField))
        and not f.generated  # computed by the database, which refuses them in COPY
    ]
    now = datetime.now(UTC)
    columns = sql.SQL(", ").join(sql.Identifier(f.column) for f in fields)
    statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(model._meta.db_table), columns
    )
    count = 0
    connection.ensure_connection()
    raw = connection.connection
    with raw.cursor() as cursor, cursor.copy(statement) as copy:
        for row in rows:
            values = []
            for f in fields:
                if f.attname in row:
                    value = row[f.attname]
                elif getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False):
                    value = now
                else:
                    value = f.get_default()
                if isinstance(f, models.JSONField):
                    value = json.dumps(value)
                values.append(value)
            copy.write_row(values)
            count += 1
    return count


def seed(n: int, reseed: bool) -> tuple[Any, Any]:
    """The bench team with N sessions and their memory rows; its member user."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from lifecycle.models import Agent, EventKind, LifecycleEvent, Session
    from memory.models import StreamTail, Summary
    from sessionhub.models import Team
    from sessionhub.services import membership_add, team_get_or_create

    team = team_get_or_create(slug=TEAM_SLUG, name="Dashboard bench")
    user, _ = get_user_model().objects.get_or_create(username=USERNAME)
    membership_add(team=team, user=user)
    have = Session.objects.filter(team=team).count()
    if have == n and not reseed:
        log(f"team {TEAM_SLUG} already has {n} sessions: not seeding")
        return team, user
    if have:
        log(f"removing the {have} sessions seeded before")
        with connection.cursor() as cursor:
            for model in (StreamTail, Summary, LifecycleEvent, Session, Agent):
                table = connection.ops.quote_name(model._meta.db_table)
                cursor.execute(f"DELETE FROM {table} WHERE team_id = %s", [team.pk])

    rng = random.Random(42)
    now = datetime.now(UTC)
    started = time.perf_counter()
    agents = [
        Agent(
            team=team,
            source="claude-code" if i % 3 else "openclaw",
            external_id=f"bench-gw:/home/dev/src/project-{i}",
            name=f"project-{i}",
            project=f"/home/dev/src/project-{i}",
            last_seen_at=now,
        )
        for i in range(AGENTS)
    ]
    Agent.objects.bulk_create(agents)

    sessions: list[dict[str, Any]] = []
    for i in range(n):
        agent = agents[rng.randrange(AGENTS)]
        status = rng.choice(STATUSES)
        start = now - timedelta(seconds=rng.uniform(60, 60 * 86400))
        length = timedelta(seconds=rng.expovariate(1 / 1800))
        closed = status in ("ended", "crashed")
        sessions.append(
            {
                "id": uuid.uuid4(),
                "team_id": team.pk,
                "agent_id": agent.pk,
                "source": agent.source,
                "external_id": f"bench-{i:07d}",
                "channel": rng.choice(CHANNELS) if agent.source == "openclaw" else "cli",
                "cwd": agent.project,
                "project": agent.project,
                "status": status,
                "started_at": start,
                "first_event_at": start,
                "last_event_at": start + length,
                "ended_at": start + length if closed else None,
                "end_reason": ("crashed" if status == "crashed" else rng.choice(REASONS))
                if closed
                else "",
                "recovered": status == "crashed",
                "has_start": True,
                "event_count": rng.randint(3, 400),
                "prompt_count": rng.randint(1, 20),
                "turn_count": rng.randint(1, 20),
                "tool_use_count": rng.randint(0, 200),
                "compaction_count": min(6, int(rng.expovariate(1.5))),
            }
        )
    copy_rows(Session, sessions)
    log(f"{n} sessions copied")

    def events() -> Iterable[dict[str, Any]]:
        for s in sessions:
            words = " ".join(rng.choice(WORDS) for _ in range(8))
            prompt = f"{words} {RARE}" if rng.random() < 0.01 else words
            final = f"Done: {' '.join(rng.choice(WORDS) for _ in range(12))}."
            if rng.random() < 0.33:
                final += f" Next step: update the {COMMON}."
            s["final"] = final
            s["prompt"] = prompt
            at = s["started_at"]
            for j, (kind, facts) in enumerate(
                (
                    (EventKind.PROMPT, {"text": prompt}),
                    (EventKind.TURN_END, {"final_message": final, "reasoning": words}),
                )
            ):
                yield {
                    "team_id": team.pk,
                    "session_id": s["id"],
                    "event_id": f"{s['external_id']}-{j}",
                    "kind": kind,
                    "source": s["source"],
                    "occurred_at": at + timedelta(seconds=10 * (j + 1)),
                    "received_at": at + timedelta(seconds=10 * (j + 1)),
                    "facts": facts,
                    "payload": {},
                }

    copy_rows(LifecycleEvent, events())
    log(f"{2 * n} events copied")
    turn_ends = dict(
        LifecycleEvent.objects.filter(team=team, kind=EventKind.TURN_END).values_list(
            "session_id", "id"
        )
    )
    copy_rows(
        StreamTail,
        (
            {
                "team_id": team.pk,
                "session_id": s["id"],
                "event_id": turn_ends[s["id"]],
                "text": s["prompt"],
                "final_message": s["final"],
                "token_count": 8,
                "captured_at": s["last_event_at"],
            }
            for s in sessions
        ),
    )
    copy_rows(
        Summary,
        (
            {
                "team_id": team.pk,
                "session_id": s["id"],
                "request": s["prompt"],
                "investigated": "Read settings.py; Grep cache",
                "completed": s["final"],
                "next_steps": f"update the {COMMON}" if COMMON in s["final"] else "",
                "final_message": s["final"],
            }
            for s in sessions
            if s["status"] in ("ended", "crashed")
        ),
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    log(f"seeded in {time.perf_counter() - started:.1f} s")
    return Team.objects.get(pk=team.pk), user


# --- measuring ---------------------------------------------------------------------------


def timed(fn: Callable[[], Any], runs: int, warm: int = 2) -> list[float]:
    for _ in range(warm):
        fn()
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main_query(queries: list[dict[str, Any]]) -> str:
    """The page's query for its rows: the one that reads sessions with a LIMIT."""
    for query in queries:
        text = query["sql"]
        if text.lstrip().upper().startswith("SELECT") and "LIMIT 51" in text:
            return text
    raise LookupError("no session list query captured")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--reseed", action="store_true", help="seed again even when present")
    parser.add_argument("--fresh", action="store_true", help="drop and recreate the database first")
    args = parser.parse_args()

    url = os.environ["DATABASE_URL"]
    if not url.startswith(("postgres://", "postgresql://")):
        sys.exit("DATABASE_URL must point at PostgreSQL")
    ensure_database(url, fresh=args.fresh)

    import django

    warnings.filterwarnings("ignore", message="No directory at")
    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    from lifecycle.models import Agent, Session

    call_command("migrate", verbosity=0)
    team, user = seed(args.sessions, args.reseed)
    agent = Agent.objects.filter(team=team).order_by("name").first()
    client = Client()
    client.force_login(user)
    list_url = reverse("dashboard:sessions")
    week_ago = date.today() - timedelta(days=7)

    scenarios: list[tuple[str, dict[str, Any]]] = [
        ("newest first, page 1", {}),
        ("page 20", {"page": 20}),
        ("page 1000 (offset 49,950)", {"page": 1000}),
        ("status=crashed", {"status": "crashed"}),
        ("one agent", {"agent": str(agent.pk)}),
        ("channel=discord, source=openclaw", {"channel": "discord", "source": "openclaw"}),
        ("last 7 days, ended", {"started_from": str(week_ago), "status": "ended"}),
        ("sort by events", {"sort": "events"}),
        ("sort by last activity", {"sort": "active"}),
        (f"search '{COMMON}' (1 in 3)", {"q": COMMON}),
        (f"search '{RARE}' (1 in 100)", {"q": RARE}),
        (
            f"search '{COMMON}' + status=ended + agent",
            {"q": COMMON, "status": "ended", "agent": str(agent.pk)},
        ),
    ]

    raw_conn = psycopg.connect(url, autocommit=True)
    rows = []
    for name, params in scenarios:
        with CaptureQueriesContext(connection) as captured:
            response = client.get(list_url, params)
        assert response.status_code == 200, (name, response.status_code)
        shown = SHOWING.search(response.content.decode())
        first, last, more, total = shown.groups() if shown else ("0", "0", None, "0")
        total = total or "?"  # a search is not counted
        query = main_query(captured.captured_queries)
        query_count = len(captured.captured_queries)
        page_times = timed(lambda p=params: client.get(list_url, p), args.runs)
        raw_times = timed(lambda q=query: raw_conn.execute(q).fetchall(), args.runs)
        rows.append(
            (
                name,
                query_count,
                int(last) - int(first) + 1 if shown else 0,
                f"{'>' if more else ''}{total.replace(',', '')}",
                ms(statistics.median(page_times)),
                ms(pct(page_times, 95)),
                ms(statistics.median(raw_times)),
                ms(pct(raw_times, 95)),
            )
        )
        log(f"{name}: p50 {rows[-1][4]:.1f} ms")

    overview_times = timed(lambda: client.get(reverse("dashboard:overview")), args.runs)
    count_sql = 'SELECT COUNT(*) FROM "lifecycle_session" WHERE "team_id" = %s'
    count_times = timed(lambda: raw_conn.execute(count_sql, [team.pk]).fetchone(), args.runs)
    total = Session.objects.filter(team=team).count()

    print()
    print(f"Session list, {total:,} sessions in the team, {args.runs} renders per scenario")
    print(
        f"database: {connection.settings_dict['NAME']} on PostgreSQL "
        f"{connection.cursor().connection.info.server_version}"
    )
    head = ("scenario", "queries", "rows", "count", "page p50", "page p95", "SQL p50", "SQL p95")
    print(
        f"{head[0]:<44} {head[1]:>7} {head[2]:>5} {head[3]:>6} "
        f"{head[4]:>9} {head[5]:>9} {head[6]:>8} {head[7]:>8}"
    )
    for name, queries, n, count, p50, p95, r50, r95 in rows:
        print(
            f"{name:<44} {queries:>7} {n:>5} {count:>6} "
            f"{p50:>7.1f}ms {p95:>7.1f}ms {r50:>6.1f}ms {r95:>6.1f}ms"
        )
    print()
    print(
        f"overview page: p50 {ms(statistics.median(overview_times)):.1f} ms, "
        f"p95 {ms(pct(overview_times, 95)):.1f} ms"
    )
    print(
        f"COUNT(*) of the team's sessions (what the list avoids): "
        f"p50 {ms(statistics.median(count_times)):.1f} ms, "
        f"p95 {ms(pct(count_times, 95)):.1f} ms"
    )
    raw_conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
