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

``--mode wsgi`` measures the one ingest request as the application server runs it: the
same ``PostToolUse`` body as ``bench/hooks.lua`` (what ``make bench`` posts), with the
hook client's headers, handed to ``sessionhub.wsgi.application`` as a WSGI environ (no
test client in between), its answer read and closed. Each round is a fresh interpreter;
``--checkout DIR`` adds a second tree of the code (say an export of ``main``) and the
rounds alternate between the two (ABBA), so both meet the same stretch of a busy machine.
It prints CPU per request (``time.process_time``) p50 per tree and their ratio.
``--callgrind`` adds instruction counts under ``valgrind --tool=callgrind``: each tree
runs ``--requests`` and three times as many in two processes, and the difference divided
by the extra requests is the count per request (start-up, migrations and warm-up
cancel out); unlike CPU time it does not move with the machine's load.
``--mode profile`` runs the requests under cProfile and sums own time per part of the
stack (middleware, DRF, authentication, adapter, redaction, ORM and driver...).

    .venv/bin/python bench/ingest_paths.py --mode wsgi --checkout /tmp/main --rounds 6
    .venv/bin/python bench/ingest_paths.py --mode wsgi --checkout /tmp/main --callgrind
    .venv/bin/python bench/ingest_paths.py --mode profile --requests 2000
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
# A ``--mode wsgi`` round runs the code of the tree it is given (``--checkout``).
CODE = Path(os.environ.get("SESSIONHUB_BENCH_CODE") or REPO)
sys.path.insert(0, str(CODE))

DB = os.environ.get("SESSIONHUB_BENCH_DB", "sessionhub_bench_paths")
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
    parser.add_argument("--mode", choices=["paths", "wsgi", "profile", "round"], default="paths")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--checkout", type=Path, help="another tree to compare (--mode wsgi)")
    parser.add_argument("--callgrind", action="store_true", help="instruction counts too")
    parser.add_argument("--profile-out", type=Path, help="(round) write cProfile stats here")
    parser.add_argument(
        "--batch",
        type=int,
        default=int(os.environ.get("SESSIONHUB_BENCH_BATCH", "1")),
        help="(wsgi, profile) events per request, as make bench's batch part posts them",
    )
    args = parser.parse_args()
    # The rounds run in child interpreters: they read the batch size from the environment.
    os.environ["SESSIONHUB_BENCH_BATCH"] = str(args.batch)
    if args.mode == "wsgi":
        _wsgi_compare(args)
        return
    if args.mode == "profile":
        _profile(args)
        return
    if args.mode == "round":
        _wsgi_round(args.requests, args.profile_out)
        return

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


# --- the one ingest request through the WSGI application ----------------------------------

WARM_UP = 50


def _hook_body(session_id: str, n: int) -> bytes:
    """A PostToolUse body as ``bench/hooks.lua`` builds it (2 KB of tool output)."""
    return json.dumps(
        {
            "session_id": session_id,
            "transcript_path": f"/home/dev/.claude/projects/bench/{session_id}.jsonl",
            "cwd": "/home/dev/src/bench",
            "permission_mode": "default",
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": f"ls -la {n}"},
            "tool_response": {"stdout": "x" * 2000, "stderr": ""},
            "tool_use_id": f"toolu_{session_id[:8]}t{n}",
        },
        separators=(",", ":"),
    ).encode()


def _wsgi_round(requests: int, profile_out: Path | None) -> None:
    """One round in this interpreter: print the CPU and wall time of each request as JSON."""
    import io

    import django

    django.setup()
    from sessionhub.services import api_token_create, team_get_or_create
    from sessionhub.wsgi import application

    team = team_get_or_create(slug="bench", name="Bench")
    _, secret = api_token_create(team=team, name="bench", scopes=["ingest"])
    session_id = str(uuid.uuid4())
    headers = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/api/v1/hooks/claude-code",
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": "127.0.0.1",
        "HTTP_X_FORWARDED_PROTO": "https",
        "HTTP_X_FORWARDED_FOR": "127.0.0.1",
        "HTTP_CONNECTION": "keep-alive",
        "CONTENT_TYPE": "application/json",
        "HTTP_ACCEPT": "application/json",
        "HTTP_USER_AGENT": "sessionhub-hook/1",
        "HTTP_AUTHORIZATION": f"Bearer {secret}",
        "wsgi.url_scheme": "http",
        "wsgi.version": (1, 0),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    statuses: list[str] = []

    def start_response(status: str, response_headers: Any, exc_info: Any = None) -> Any:
        statuses.append(status)
        return lambda data: None

    def post(body: bytes) -> None:
        environ = dict(headers, CONTENT_LENGTH=str(len(body)))
        environ["wsgi.input"] = io.BytesIO(body)
        answer = application(environ, start_response)
        try:
            b"".join(answer)
        finally:
            close = getattr(answer, "close", None)
            if close is not None:
                close()
        status = statuses.pop()
        assert status.startswith("200"), status

    start = json.loads(_hook_body(session_id, 0))
    start.update(hook_event_name="SessionStart", source="startup")
    for key in ("tool_name", "tool_input", "tool_response", "tool_use_id"):
        start.pop(key)
    post(json.dumps(start).encode())
    size = int(os.environ.get("SESSIONHUB_BENCH_BATCH", "1"))
    if size > 1:  # a list of one session's events, as bench/hooks.lua batches them
        bodies = [
            b"[" + b",".join(_hook_body(session_id, n * size + i) for i in range(size)) + b"]"
            for n in range(1, WARM_UP + requests + 1)
        ]
    else:
        bodies = [_hook_body(session_id, n) for n in range(1, WARM_UP + requests + 1)]
    for body in bodies[:WARM_UP]:
        post(body)
    cpu: list[float] = []
    wall: list[float] = []
    profiler = None
    if profile_out is not None:
        import cProfile

        profiler = cProfile.Profile(time.process_time)  # CPU, not waits
        profiler.enable()
    from django.db import connection

    backend = connection.connection.info.backend_pid
    backend_before = _process_cpu_seconds(backend)
    for body in bodies[WARM_UP:]:
        w, c = time.perf_counter(), time.process_time()
        post(body)
        cpu.append((time.process_time() - c) * 1000)
        wall.append((time.perf_counter() - w) * 1000)
    # The PostgreSQL backend that served the round (the same connection throughout:
    # Django keeps it between requests): its own CPU, without the WAL writer's and the
    # checkpointer's, which make bench/run.py counts as PostgreSQL's too.
    kept = connection.connection
    if kept is None or kept.info.backend_pid != backend:
        # The connection was replaced mid-round (a round under valgrind outlives the
        # connection's lifetime): its backend has exited and took its counters with it.
        backend_ms = float("nan")
    else:
        backend_ms = (_process_cpu_seconds(backend) - backend_before) * 1000 / len(cpu)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(str(profile_out))
    print(json.dumps({"cpu": cpu, "wall": wall, "backend_ms": backend_ms}))


def _process_cpu_seconds(pid: int) -> float:
    """User and system CPU of a local process (the database's backend), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _round_command(code: Path, requests: int, *extra: str) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ, SESSIONHUB_BENCH_CODE=str(code), PYTHONHASHSEED="0")
    command = [sys.executable, str(Path(__file__).resolve()), "--mode", "round"]
    return [*command, "--requests", str(requests), *extra], env


def _run_round(code: Path, requests: int, *extra: str) -> Any:
    import subprocess

    command, env = _round_command(code, requests, *extra)
    # From the tree itself: Celery puts the working directory first on sys.path.
    done = subprocess.run(command, env=env, cwd=code, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"round in {code} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _migrated() -> None:
    """The scratch database, fresh and migrated (by this tree's code) before any round."""
    import subprocess

    _fresh_database()
    subprocess.run(
        [sys.executable, str(CODE / "manage.py"), "migrate", "--verbosity", "0"],
        env=dict(os.environ),
        check=True,
    )


def _wsgi_compare(args: argparse.Namespace) -> None:
    _migrated()
    trees = {"this tree": CODE}
    if args.checkout is not None:
        trees = {str(args.checkout): args.checkout.resolve(), **trees}
    names = list(trees)
    cpu: dict[str, list[float]] = {name: [] for name in names}
    wall: dict[str, list[float]] = {name: [] for name in names}
    per_round: dict[str, list[float]] = {name: [] for name in names}
    backend: dict[str, list[float]] = {name: [] for name in names}
    for round_no in range(args.rounds):
        order = names if round_no % 2 == 0 else names[::-1]
        for name in order:
            found = _run_round(trees[name], args.requests)
            cpu[name] += found["cpu"]
            wall[name] += found["wall"]
            per_round[name].append(statistics.median(found["cpu"]))
            backend[name].append(found.get("backend_ms", float("nan")))
    if args.rounds:
        _cpu_table(args, names, cpu, wall, per_round)
        print("PostgreSQL backend CPU per request (its /proc counters, 10 ms ticks; per round):")
        for name in names:
            print(f"  {name}: " + ", ".join(f"{v:.3f} ms" for v in backend[name]))
    if args.callgrind:
        _callgrind(trees, args.requests)


def _cpu_table(
    args: argparse.Namespace,
    names: list[str],
    cpu: dict[str, list[float]],
    wall: dict[str, list[float]],
    per_round: dict[str, list[float]],
) -> None:
    print(
        f"One PostToolUse request through the WSGI application, {args.rounds} rounds x "
        f"{args.requests} requests per tree (ABBA)"
    )
    print("| tree | CPU p50 | CPU p95 | wall p50 | round CPU p50s |")
    print("| --- | --- | --- | --- | --- |")
    for name in names:
        rounds = ", ".join(f"{v:.3f}" for v in per_round[name])
        print(
            f"| {name} | {statistics.median(cpu[name]):.3f} ms | "
            f"{_percentile(cpu[name], 0.95):.3f} ms | {statistics.median(wall[name]):.3f} ms | "
            f"{rounds} |"
        )
    if len(names) == 2:
        before, after = (statistics.median(cpu[n]) for n in names)
        print(f"CPU p50, this tree / {names[0]}: {after / before:.3f}")


def _callgrind(trees: dict[str, Path], requests: int) -> None:
    """Instructions per request: two processes per tree, ``requests`` and 3x as many (the
    processes run side by side: instruction counts do not depend on the machine's load)."""
    import re
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        runs = {}
        for name, code in trees.items():
            for n in (requests, 3 * requests):
                out = Path(folder) / f"callgrind.{len(runs)}.out"
                command, env = _round_command(code, n)
                runs[name, n] = (
                    out,
                    subprocess.Popen(
                        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command],
                        env=env,
                        cwd=code,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE,
                        text=True,
                    ),
                )
        totals: dict[tuple[str, int], int] = {}
        for key, (out, process) in runs.items():
            _, errors = process.communicate()
            if process.returncode != 0:
                raise SystemExit(f"callgrind run {key} failed:\n{errors[-3000:]}")
            found = re.search(r"^(?:summary|totals):\s+(\d+)", out.read_text(), re.MULTILINE)
            assert found, "no totals in callgrind's output"
            totals[key] = int(found.group(1))
    counts = {
        name: (totals[name, 3 * requests] - totals[name, requests]) / (2 * requests)
        for name in trees
    }
    print("| tree | instructions per request (callgrind) |")
    print("| --- | --- |")
    for name, count in counts.items():
        print(f"| {name} | {count / 1e6:.2f} M |")
    if len(counts) == 2:
        before, after = counts.values()
        print(f"instructions, this tree / other: {after / before:.3f}")


# Own CPU time (cProfile's tottime, timed by process_time) per part of the stack, by file name.
_PARTS = [
    ("DRF", ("rest_framework/",)),
    (
        "middleware",
        ("django/middleware/", "django/contrib/", "whitenoise/", "sessionhub/middleware"),
    ),
    (
        "Django request/response, URL routing",
        (
            "django/core/handlers",
            "django/http/",
            "django/urls/",
            "django/utils/",
            "django/core/",
            "django/dispatch",
        ),
    ),
    ("ORM and statements", ("django/db/", "sessionhub/db/", "lifecycle/ingest/statements")),
    ("psycopg", ("psycopg",)),
    (
        "token, scope, throttle, parser, errors",
        (
            "sessionhub/authentication",
            "sessionhub/throttling",
            "sessionhub/permissions",
            "sessionhub/parsers",
            "sessionhub/errors",
            "sessionhub/resilience",
        ),
    ),
    ("redis client", ("redis/",)),
    ("adapter", ("lifecycle/adapters/",)),
    ("redaction", ("sessionhub/text/",)),
    ("ingest service (fold, store, outbox)", ("lifecycle/",)),
    ("JSON", ("json/", "orjson")),
]


def _part(filename: str) -> str:
    for name, needles in _PARTS:
        if any(n in filename for n in needles):
            return name
    return "other"


def _profile(args: argparse.Namespace) -> None:
    import pstats
    import tempfile

    _migrated()
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "profile.out"
        _run_round(
            CODE if args.checkout is None else args.checkout,
            args.requests,
            "--profile-out",
            str(out),
        )
        stats = pstats.Stats(str(out))
    parts: dict[str, float] = {}
    top: list[tuple[float, str]] = []
    for (filename, line, function), row in stats.stats.items():  # type: ignore[attr-defined]
        own = row[2]
        where = filename if filename != "~" else function
        parts[_part(where)] = parts.get(_part(where), 0.0) + own
        top.append((own, f"{filename}:{line}({function})"))
    total = sum(parts.values())
    print(f"Own time under cProfile per request ({args.requests} requests), by part of the stack")
    print("| part | µs per request | share |")
    print("| --- | --- | --- |")
    for name, own in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {own / args.requests * 1e6:.0f} | {own / total:.0%} |")
    print(f"| total | {total / args.requests * 1e6:.0f} | |")
    print("\nTop 25 functions by own time (µs per request):")
    for own, where in sorted(top, reverse=True)[:25]:
        print(f"  {own / args.requests * 1e6:7.1f}  {where}")


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
