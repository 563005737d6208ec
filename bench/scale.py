#!/usr/bin/env python3
"""How the request costs grow with the tables: the same figures at three sizes.

    .venv/bin/python bench/scale.py            # 1k/100k/1M sessions, 0/1M/10M events (~20 min)
    .venv/bin/python bench/scale.py --quick    # 1k/10k/50k sessions, 0/100k/500k events
    make bench-scale

A team's tables grow for months; a request must cost the same on the first day and the
three-hundredth. This script seeds a dedicated PostgreSQL database (``sessionhub_scale``
on ``postgres://postgres@127.0.0.1:5432``, recreated at every start) in steps — the
sessions and events tables grow from the smallest size to the largest, spread over ten
teams, the rows written with COPY — and at each size measures, in process through
Django's test client against that database:

* single-event ingest: a Claude Code ``PostToolUse`` posted to the hook endpoint;
* batch ingest: 100 of them in one request (events/s);
* a session's start and end: a new session's ``SessionStart`` (the chain's lookups, its
  preamble) and its ``SessionEnd``, two requests;
* continuity: ``POST /api/v1/continuity`` for a new session of an agent whose completed
  sessions grew with the tables (features and summaries seeded for them);
* the dashboard's session list and a session page (a session of 500 events, the same at
  every size, so only the tables around it grow);
* retention: one expired session of 20 events archived and deleted, and 500 expired
  sessions of one agent found among every agent's, as the nightly run finds them;
* the raw database beside them: one event row inserted and committed straight with
  psycopg into the same table, the floor any ingest path stands on.

It prints p50 / p95 per figure and size, the growth factor from the smallest size to the
largest (flagged when over 1.5x), and, at the largest size, every statement the measured
requests ran that reads a table of 10,000 rows or more with a sequential scan (from
``EXPLAIN``): a request that stays flat needs an index or a partition, never a scan.

Figures in process leave out the HTTP server and the network on purpose: they are the same
at every size, and ``bench/run.py`` measures them.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
os.environ["DATABASE_URL"] = os.environ.get(
    "SCALE_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/sessionhub_scale"
)
# Production settings: tasks go to a Redis database no worker reads, so each request costs
# what it costs in production (the publish included) and the memory work runs nowhere.
os.environ["DJANGO_SETTINGS_MODULE"] = "sessionhub.settings"
os.environ["REDIS_URL"] = os.environ.get("SCALE_REDIS_URL", "redis://127.0.0.1:6379/12")
os.environ.update(
    DEBUG="0",
    SECRET_KEY="scale-bench-" + "k" * 40,
    ALLOWED_HOSTS="*",
    SECURE_SSL_REDIRECT="0",
    API_RATE_LIMIT="100000000/min",
)

import psycopg  # noqa: E402
from dashboard_list import copy_rows, ensure_database, pct  # noqa: E402

TEAMS = 10
AGENTS_PER_TEAM = 20
PROJECT = "/home/dev/src/scale-app"
# A second agent of the measured team with the same number of candidates at every size:
# its completed sessions all end inside the lookback, more than continuity scores
# (``MAX_CANDIDATES``, 200), and do not grow, so its figure shows what the tables' growth
# alone costs continuity. The first agent's candidates grow with the tables.
BUSY_PROJECT = "/home/dev/src/scale-busy"
BUSY_SESSIONS = 250
DETAIL_EVENTS = 500
# Retention's figures: the events of each session it archives and deletes, and the page
# of expired sessions it reads at a time (``memory.retention.EXPIRED_PAGE``).
RETIRED_EVENTS = 20
RETENTION_PAGE = 500
FULL = [(1_000, 0), (100_000, 1_000_000), (1_000_000, 10_000_000)]
QUICK = [(1_000, 0), (10_000, 100_000), (50_000, 500_000)]
SEQ_SCAN = re.compile(r"Seq Scan on (?P<table>\w+)")
BIG_TABLE_ROWS = 10_000
WORDS = (
    "orders billing invoices postgres index migration planner latency cache redis celery "
    "worker retries deploy helm terraform dashboard charts oauth webhook refunds reports "
    "export schema pipeline alerts logging tracing pagination search parser release"
).split()


def log(message: str) -> None:
    print(f"[scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def hook(session_id: str, name: str, **fields: Any) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "transcript_path": f"/tmp/{session_id}.jsonl",
        "cwd": PROJECT,
        "permission_mode": "default",
        "hook_event_name": name,
        **fields,
    }


def tool_use(session_id: str, n: str) -> dict[str, Any]:
    return hook(
        session_id,
        "PostToolUse",
        tool_name="Bash",
        tool_input={"command": f"pytest -q tests/test_{n}.py"},
        tool_response={"stdout": "12 passed in 0.4s\n" * 20, "stderr": "", "interrupted": False},
        tool_use_id=f"toolu_{n}",
    )


class World:
    """The seeded database: teams, agents, and how far each table has grown."""

    def __init__(self) -> None:
        from django.contrib.auth import get_user_model

        from lifecycle.models import Agent, Session
        from sessionhub.services import api_token_create, membership_add, team_get_or_create

        self.rng = random.Random(7)
        self.now = datetime.now(UTC)
        self.teams = [
            team_get_or_create(slug=f"scale-{t}", name=f"Scale {t}") for t in range(TEAMS)
        ]
        self.team = self.teams[0]
        self.user, _ = get_user_model().objects.get_or_create(username="scale-bench")
        membership_add(team=self.team, user=self.user)
        self.token = api_token_create(team=self.team, name="scale-gw", scopes=("ingest", "read"))[1]
        self.sessions = 0
        self.events = 0
        self.serial = 0
        # The agent the gateway's own identity rule gives PROJECT: learnt from a real start.
        from django.test import Client

        self.api = Client(HTTP_AUTHORIZATION=f"Bearer {self.token}")
        self.post(
            "/api/v1/hooks/claude-code", hook("scale-probe-0", "SessionStart", source="startup")
        )
        self.agent = Session.objects.get(team=self.team, external_id="scale-probe-0").agent
        self.agents = {
            team.pk: [
                Agent.objects.create(
                    team=team,
                    source="claude-code",
                    external_id=f"scale-gw:/home/dev/src/project-{a}",
                    name=f"project-{a}",
                    project=f"/home/dev/src/project-{a}",
                )
                for a in range(AGENTS_PER_TEAM)
            ]
            for team in self.teams
        }
        self.post(
            "/api/v1/hooks/claude-code",
            hook("scale-busy-probe-0", "SessionStart", source="startup", cwd=BUSY_PROJECT),
        )
        self.busy_agent = Session.objects.get(
            team=self.team, external_id="scale-busy-probe-0"
        ).agent
        self._busy_sessions()
        self.detail = self._detail_session()

    def _busy_sessions(self) -> None:
        """The busy agent's completed sessions: ended over the last six days, with their
        features and summaries, seeded once."""
        from lifecycle.models import Session
        from memory.models import SessionFeatures, Summary

        rows = [
            self._session_row(
                self.team,
                self.busy_agent,
                self.now - timedelta(hours=1 + i * 0.5),
                f"busy-{i:04d}",
                0,
            )
            for i in range(BUSY_SESSIONS)
        ]
        copy_rows(Session, rows)
        copy_rows(SessionFeatures, (self._features(r) for r in rows))
        copy_rows(Summary, (self._summary(r) for r in rows))

    def _session_row(
        self, team: Any, agent: Any, ended: datetime, external_id: str, events: int
    ) -> dict[str, Any]:
        started = ended - timedelta(minutes=self.rng.uniform(5, 120))
        return {
            "id": uuid.uuid4(),
            "team_id": team.pk,
            "agent_id": agent.pk,
            "source": "claude-code",
            "external_id": external_id,
            "channel": "cli",
            "cwd": agent.project,
            "project": agent.project,
            "status": "ended",
            "started_at": started,
            "ended_at": ended,
            "first_event_at": started,
            "last_event_at": ended,
            "end_reason": "prompt_input_exit",
            "has_start": True,
            "event_count": events,
            "tool_use_count": events,
        }

    def post(self, path: str, body: Any) -> Any:
        response = self.api.post(path, json.dumps(body), content_type="application/json")
        if response.status_code >= 300:
            raise RuntimeError(f"{path}: {response.status_code} {response.content[:300]!r}")
        return response

    def _detail_session(self) -> str:
        sid = "scale-detail-0"
        self.post("/api/v1/hooks/claude-code", hook(sid, "SessionStart", source="startup"))
        for start in range(0, DETAIL_EVENTS, 100):
            batch = [tool_use(sid, f"detail-{n}") for n in range(start, start + 100)]
            self.post("/api/v1/hooks/claude-code", batch)
        self.post("/api/v1/hooks/claude-code", hook(sid, "SessionEnd", reason="other"))
        from lifecycle.models import Session

        return str(Session.objects.get(team=self.team, external_id=sid).pk)

    def grow(self, sessions: int, events: int) -> None:
        """Add sessions (ended, over the last 90 days) and events until the totals hold."""
        from lifecycle.models import LifecycleEvent, Session
        from memory.models import SessionFeatures, Summary

        new = max(0, sessions - self.sessions)
        per_session = max(0, events - self.events) // max(1, new)
        rows: list[dict[str, Any]] = []
        for i in range(new):
            team = self.teams[i % TEAMS]
            ours = team.pk == self.team.pk and i % (TEAMS * AGENTS_PER_TEAM) < TEAMS
            agent = self.agent if ours else self.rng.choice(self.agents[team.pk])
            ended = self.now - timedelta(seconds=self.rng.uniform(3600, 90 * 86400))
            self.serial += 1
            row = self._session_row(team, agent, ended, f"scale-{self.serial:08d}", per_session)
            rows.append({**row, "_ours": ours})
        copy_rows(Session, ({k: v for k, v in r.items() if k != "_ours"} for r in rows))
        ours = [r for r in rows if r["_ours"]]
        copy_rows(SessionFeatures, (self._features(r) for r in ours))
        copy_rows(Summary, (self._summary(r) for r in ours))
        if per_session:
            copy_rows(LifecycleEvent, self._events(rows, per_session))
        self.sessions += new
        self.events += new * per_session
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")

    def _features(self, row: dict[str, Any]) -> dict[str, Any]:
        topics = self.rng.sample(WORDS, 20)
        return {
            "team_id": row["team_id"],
            "session_id": row["id"],
            "hot_topics": topics,
            "active_projects": [PROJECT],
            "pending_tasks": [{"id": "task-1", "text": f"TODO: {topics[0]}", "source": "pin"}],
            "done_tasks": [],
        }

    def _summary(self, row: dict[str, Any]) -> dict[str, Any]:
        words = self.rng.sample(WORDS, 6)
        return {
            "team_id": row["team_id"],
            "session_id": row["id"],
            "request": f"Look into {words[0]} and {words[1]}.",
            "completed": f"Fixed the {words[2]} handling.",
            "next_steps": f"Roll out the {words[3]} change.",
            "final_message": "Done.",
            "events_seen": row["event_count"],
        }

    def _events(self, rows: list[dict[str, Any]], per_session: int) -> Iterator[dict[str, Any]]:
        payload = {"tool_name": "Bash", "tool_input": {"command": "pytest -q"}}
        facts = {"tool_name": "Bash", "failed": False}
        for row in rows:
            for n in range(per_session):
                at = row["started_at"] + timedelta(seconds=n)
                yield {
                    "team_id": row["team_id"],
                    "session_id": row["id"],
                    "event_id": f"{row['external_id']}:{n}",
                    "kind": "tool_use",
                    "source": "claude-code",
                    "hook": "PostToolUse",
                    "phase": "post",
                    "occurred_at": at,
                    "received_at": at,
                    "facts": facts,
                    "payload": payload,
                }


def timed(fn: Callable[[int], Any], runs: int, warm: int = 3) -> list[float]:
    """Milliseconds of ``fn(i)`` over ``runs`` calls, after ``warm`` unmeasured ones."""
    for i in range(warm):
        fn(-1 - i)
    out = []
    for i in range(runs):
        started = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - started) * 1000)
    return out


class Measure:
    """The figures at the world's current size; statements captured for EXPLAIN."""

    def __init__(self, world: World, runs: int, level: int) -> None:
        from django.test import Client

        self.world = world
        self.runs = runs
        self.level = level
        # Every argument a figure's function is called with: timed()'s three warm-up calls,
        # its measured runs, and capture()'s one call.
        self.calls = [-3, -2, -1, *range(runs), 10_000_000 + level]
        self.web = Client()
        self.web.force_login(world.user)
        self.statements: dict[str, list[tuple[str, Any]]] = {}

    def capture(self, figure: str, fn: Callable[[int], Any]) -> None:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as captured:
            fn(self.calls[-1])
        self.statements[figure] = [(q["sql"], None) for q in captured.captured_queries]

    def all(self) -> dict[str, list[float]]:
        w = self.world
        sid = f"scale-live-{self.level}"
        w.post("/api/v1/hooks/claude-code", hook(sid, "SessionStart", source="startup"))

        def single(i: int) -> None:
            w.post("/api/v1/hooks/claude-code", tool_use(sid, f"s{self.level}-{i}"))

        def batch(i: int) -> None:
            body = [tool_use(sid, f"b{self.level}-{i}-{n}") for n in range(100)]
            w.post("/api/v1/hooks/claude-code", body)

        def continuity(i: int) -> None:
            w.post("/api/v1/continuity", {"source": "claude-code", "session_id": new(i)})

        def new(i: int) -> str:
            return f"scale-new-{self.level}-{i}"

        def busy(i: int) -> None:
            w.post("/api/v1/continuity", {"source": "claude-code", "session_id": busy_new(i)})

        def busy_new(i: int) -> str:
            return f"scale-busy-new-{self.level}-{i}"

        for i in self.calls:
            w.post("/api/v1/hooks/claude-code", hook(new(i), "SessionStart", source="startup"))
            w.post(
                "/api/v1/hooks/claude-code",
                hook(busy_new(i), "SessionStart", source="startup", cwd=BUSY_PROJECT),
            )

        def start_and_end(i: int) -> None:
            # A short session of its own: its start looks up the chain (the session that
            # names it as successor, those naming it as where they resumed from), its end
            # closes it.
            short = f"scale-short-{self.level}-{i}"
            w.post("/api/v1/hooks/claude-code", hook(short, "SessionStart", source="startup"))
            w.post(
                "/api/v1/hooks/claude-code", hook(short, "SessionEnd", reason="prompt_input_exit")
            )

        def page(url: str) -> Callable[[int], None]:
            def get(_: int) -> None:
                response = self.web.get(url)
                if response.status_code != 200:
                    raise RuntimeError(f"{url}: {response.status_code}")

            return get

        retire, expired_page = self.retention()
        figures: dict[str, list[float]] = {}
        for name, fn in (
            ("single-event ingest", single),
            ("batch of 100", batch),
            ("a session's start and end (two requests)", start_and_end),
            ("session list", page("/sessions/")),
            ("session page", page(f"/sessions/{w.detail}/")),
            ("continuity", continuity),
            ("continuity, 200 candidates at every size", busy),
            (f"retention: one session of {RETIRED_EVENTS} events archived and deleted", retire),
            (f"retention: {RETENTION_PAGE} expired sessions found", expired_page),
        ):
            figures[name] = timed(fn, self.runs)
            self.capture(name, fn)
        figures["raw insert (psycopg)"] = self.raw(sid)
        return figures

    def retention(self) -> tuple[Callable[[int], None], Callable[[int], None]]:
        """What the nightly retention does per session, and how it finds them.

        A fresh agent gets sessions that ended long before anything else (every other
        session ended within the last 90 days): one of ``RETIRED_EVENTS`` events per call
        of the first figure, which archives it and deletes it; and ``RETENTION_PAGE`` more
        for the second, which reads every expired session as the nightly run does, with an
        age that only these pass: a probe of every agent's index range and one full page,
        the same work at every size (the previous size's sessions are deleted first).
        """
        from lifecycle.models import Agent, LifecycleEvent, Session
        from memory.retention import expired_sessions, session_retire

        w = self.world
        Session.objects.filter(external_id__startswith="scale-expired-").delete()
        agent = Agent.objects.create(
            team=w.team,
            source="claude-code",
            external_id=f"scale-gw:/home/dev/src/retired-{self.level}",
            name=f"retired-{self.level}",
            project=f"/home/dev/src/retired-{self.level}",
        )
        rows = {
            i: w._session_row(
                w.team,
                agent,
                w.now - timedelta(days=200, minutes=n),
                f"scale-retired-{self.level}-{n}",
                RETIRED_EVENTS,
            )
            for n, i in enumerate(self.calls)
        }
        copy_rows(Session, rows.values())
        copy_rows(LifecycleEvent, w._events(list(rows.values()), RETIRED_EVENTS))
        copy_rows(
            Session,
            (
                w._session_row(
                    w.team,
                    agent,
                    w.now - timedelta(days=250, minutes=n),
                    f"scale-expired-{self.level}-{n}",
                    0,
                )
                for n in range(RETENTION_PAGE)
            ),
        )
        retired = Session.objects.filter(pk__in=[r["id"] for r in rows.values()])
        sessions = {s.pk: s for s in retired.select_related("team", "agent")}
        root = Path(tempfile.mkdtemp(prefix="sessionhub-scale-archive-"))
        atexit.register(shutil.rmtree, root, ignore_errors=True)

        def retire(i: int) -> None:
            session_retire(sessions[rows[i]["id"]], root=root)

        def expired_page(_: int) -> None:
            found = sum(1 for _ in expired_sessions(days=180))
            if found != RETENTION_PAGE:
                raise RuntimeError(f"{found} expired sessions found, not {RETENTION_PAGE}")

        return retire, expired_page

    def raw(self, sid: str) -> list[float]:
        from lifecycle.models import Session

        session = Session.objects.get(team=self.world.team, external_id=sid)
        url = os.environ["DATABASE_URL"]
        statement = (
            "INSERT INTO lifecycle_lifecycleevent (team_id, session_id, event_id, kind, source, "
            "hook, phase, occurred_at, received_at, facts, payload, redaction_version, orphan_key) "
            "VALUES (%s, %s, %s, 'tool_use', 'claude-code', 'PostToolUse', 'post', now(), now(), "
            "%s, %s, 1, '') ON CONFLICT (team_id, event_id) DO NOTHING"
        )
        body = json.dumps(tool_use(sid, "raw"))
        with psycopg.connect(url, autocommit=True) as conn:

            def insert(i: int) -> None:
                conn.execute(
                    statement,
                    [
                        self.world.team.pk,
                        session.pk,
                        f"raw-{self.level}-{i}",
                        '{"tool_name": "Bash"}',
                        body,
                    ],
                )

            return timed(insert, self.runs)

    def scans(self) -> list[str]:
        """Statements that read a large table with a sequential scan, per figure."""
        from django.db import connection

        found = []
        with connection.cursor() as cursor:
            for figure, statements in self.statements.items():
                for text, _ in statements:
                    if not text.lstrip().upper().startswith(("SELECT", "WITH", "DELETE", "UPDATE")):
                        continue
                    try:
                        plan = self.plan(cursor, text)
                    except Exception as error:  # noqa: BLE001 - a statement EXPLAIN cannot take
                        found.append(f"{figure}: EXPLAIN failed ({error}): {text[:120]}")
                        continue
                    for line in plan:
                        match = SEQ_SCAN.search(line)
                        if match and self.rows_of(cursor, match["table"]) >= BIG_TABLE_ROWS:
                            found.append(f"{figure}: {line.strip()} <- {text[:160]}")
        return found

    @staticmethod
    def plan(cursor: Any, text: str) -> list[str]:
        """The statement's plan. A statement bound server-side was captured with ``$n``
        placeholders and no values: it is prepared and its generic plan (the same for any
        values) explained."""
        placeholders = {int(n) for n in re.findall(r"\$(\d+)", text)}
        if not placeholders:
            cursor.execute("EXPLAIN " + text)
            return [row[0] for row in cursor.fetchall()]
        cursor.execute("SET plan_cache_mode = force_generic_plan")
        try:
            cursor.execute("PREPARE scale_probe AS " + text)
            nulls = ", ".join(["NULL"] * max(placeholders))
            cursor.execute(f"EXPLAIN EXECUTE scale_probe({nulls})")
            return [row[0] for row in cursor.fetchall()]
        finally:
            cursor.execute("DEALLOCATE ALL")
            cursor.execute("RESET plan_cache_mode")

    @staticmethod
    def rows_of(cursor: Any, table: str) -> float:
        """The planner's row estimate of a table (a scan of a small table is no problem)."""
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = %s", [table])
        row = cursor.fetchone()
        return float(row[0]) if row else 0.0


def render(levels: list[tuple[int, int]], results: list[dict[str, list[float]]]) -> str:
    head = ["figure"] + [f"{s:,} sessions / {e:,} events" for s, e in levels] + ["growth (p50)"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for figure in results[0]:
        cells = [figure]
        p50s = []
        for result in results:
            values = result[figure]
            p50s.append(statistics.median(values))
            cells.append(f"{p50s[-1]:.1f} / {pct(values, 95):.1f} ms")
        growth = p50s[-1] / p50s[0] if p50s[0] else float("nan")
        cells.append(f"{growth:.2f}x" + (" **> 1.5x**" if growth > 1.5 else ""))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    parser.add_argument("--runs", type=int, default=40, help="measured calls per figure")
    args = parser.parse_args()
    levels = QUICK if args.quick else FULL

    warnings.filterwarnings("ignore", message="No directory at")
    ensure_database(os.environ["DATABASE_URL"], fresh=True)
    import django

    django.setup()
    import redis
    from django.conf import settings
    from django.core.management import call_command

    # The pages' static files as in development: no collectstatic manifest is needed.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }

    redis.Redis.from_url(os.environ["REDIS_URL"]).flushdb()
    call_command("migrate", verbosity=0)
    world = World()
    results = []
    measure = None
    for level, (sessions, events) in enumerate(levels):
        started = time.perf_counter()
        world.grow(sessions, events)
        log(
            f"grew to {world.sessions:,} sessions / {world.events:,} events "
            f"in {time.perf_counter() - started:.0f} s; measuring"
        )
        measure = Measure(world, args.runs, level)
        results.append(measure.all())
        for figure, values in results[-1].items():
            log(f"  {figure}: p50 {statistics.median(values):.1f} ms")

    print()
    print(f"Request cost as the tables grow ({args.runs} calls per figure, p50 / p95, in process)")
    print()
    print(render(levels, results))
    print()
    scans = measure.scans() if measure else []
    print(f"Sequential scans of large tables at the largest size: {len(scans) or 'none'}")
    for line in scans:
        print(f"- {line}")
    redis.Redis.from_url(os.environ["REDIS_URL"]).flushdb()
    return 0


if __name__ == "__main__":
    sys.exit(main())
