#!/usr/bin/env python3
"""One request of the hot path in process, the one-statement path against the general one.

A Claude Code ``PostToolUse`` body (2 KB of tool output, every one new) is posted through
Django's test client (middleware, authentication, throttling, DRF, the ingest service:
everything but the HTTP server) to a session that is already active, over and over; in
alternating rounds the one-statement path for events that move no state
(``lifecycle/ingest/quick.py``) is on, then off. Per request it prints wall time and the
process's CPU time (p50, p95), and beside them the same INSERT and UPDATE issued by
psycopg alone in one transaction (the raw database's floor for the general path's writes).

    .venv/bin/python bench/ingest_paths.py                 # 5 rounds of 300 requests each way
    .venv/bin/python bench/ingest_paths.py --rounds 3 --requests 500

It uses a scratch PostgreSQL database (``sessionhub_bench_paths``, created and migrated on
each run) and Redis database 13 for the rate limiter, as the server would.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DB = "sessionhub_bench_paths"
os.environ.setdefault("DATABASE_URL", f"postgres://postgres@127.0.0.1:5432/{DB}")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/13")
os.environ["DJANGO_SETTINGS_MODULE"] = "sessionhub.settings"
os.environ.setdefault("SECRET_KEY", "bench-" + uuid.uuid4().hex)
os.environ["DEBUG"] = "0"
os.environ["API_RATE_LIMIT"] = "100000000/min"
os.environ.setdefault("ALLOWED_HOSTS", "testserver,127.0.0.1,localhost")


def _fresh_database() -> None:
    import psycopg

    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        c.execute(f'CREATE DATABASE "{DB}"')


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()

    _fresh_database()
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    from lifecycle import services
    from sessionhub.services import api_token_create, team_get_or_create

    call_command("migrate", verbosity=0)
    team = team_get_or_create(slug="bench", name="Bench")
    _, secret = api_token_create(team=team, name="bench", scopes=["ingest"])
    client = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    session_id = str(uuid.uuid4())
    output = "x" * 2048

    def post(hook: str, **fields: Any) -> None:
        body = {
            "session_id": session_id,
            "transcript_path": f"/tmp/{session_id}.jsonl",
            "cwd": "/home/dev/src/bench",
            "hook_event_name": hook,
            "sessionhub": {"event_id": uuid.uuid4().hex},
            **fields,
        }
        response = client.post(
            "/api/v1/hooks/claude-code",
            json.dumps(body),
            content_type="application/json",
            secure=True,
        )
        assert response.status_code == 200, response.content

    post("SessionStart", source="startup")
    real_quiet = services.quiet
    timings: dict[str, dict[str, list[float]]] = {
        name: {"wall": [], "cpu": []} for name in ("one statement", "general path")
    }
    for _ in range(args.rounds):
        for name, quiet in (("one statement", real_quiet), ("general path", lambda e: False)):
            services.quiet = quiet  # type: ignore[assignment]
            for n in range(args.requests):
                wall, cpu = time.perf_counter(), time.process_time()
                post(
                    "PostToolUse",
                    tool_name="Bash",
                    tool_input={"command": f"echo {n}"},
                    tool_response={"stdout": output, "stderr": "", "interrupted": False},
                )
                timings[name]["wall"].append((time.perf_counter() - wall) * 1000)
                timings[name]["cpu"].append((time.process_time() - cpu) * 1000)
    services.quiet = real_quiet

    raw = _raw_writes(connection, args.requests * args.rounds, output)
    print(f"One PostToolUse request in process, {args.rounds} x {args.requests} each way")
    print("| path | wall p50 | wall p95 | CPU p50 | CPU p95 |")
    print("| --- | --- | --- | --- | --- |")
    for name, t in timings.items():
        print(
            f"| {name} | {statistics.median(t['wall']):.2f} ms | "
            f"{_percentile(t['wall'], 0.95):.2f} ms | {statistics.median(t['cpu']):.2f} ms | "
            f"{_percentile(t['cpu'], 0.95):.2f} ms |"
        )
    print(
        f"| raw psycopg: INSERT + UPDATE in a transaction | {statistics.median(raw):.2f} ms | "
        f"{_percentile(raw, 0.95):.2f} ms | | |"
    )


def _raw_writes(connection: Any, count: int, output: str) -> list[float]:
    """The general path's two writes, by psycopg alone, into scratch copies of the tables."""
    import psycopg

    dsn = f"postgresql://postgres@127.0.0.1:5432/{DB}"
    times = []
    with psycopg.connect(dsn) as raw:
        # Logged tables like the real ones (a temporary table skips the WAL, and so the
        # commit's flush that every stored event pays for).
        raw.execute("CREATE TABLE e (LIKE lifecycle_lifecycleevent INCLUDING ALL)")
        raw.execute("CREATE TABLE s (LIKE lifecycle_session INCLUDING ALL)")
        raw.execute("INSERT INTO s SELECT * FROM lifecycle_session")
        raw.commit()
        session = raw.execute("SELECT id FROM s").fetchone()[0]  # type: ignore[index]
        payload = json.dumps({"tool_response": {"stdout": output}})
        for n in range(count):
            start = time.perf_counter()
            with raw.transaction():
                raw.execute("SELECT id FROM s WHERE id = %s FOR UPDATE", [session])
                raw.execute(
                    "INSERT INTO e (team_id, session_id, event_id, kind, source, hook, phase,"
                    " occurred_at, received_at, facts, payload, redaction_version, orphan_key)"
                    " SELECT team_id, id, %s, 'tool_use', source, 'PostToolUse', 'post', now(),"
                    " now(), '{}', %s, 1, '' FROM s WHERE id = %s",
                    [f"raw-{n}", payload, session],
                )
                raw.execute(
                    "UPDATE s SET event_count = event_count + 1, last_event_at = now()"
                    " WHERE id = %s",
                    [session],
                )
            times.append((time.perf_counter() - start) * 1000)
    return times


if __name__ == "__main__":
    main()
