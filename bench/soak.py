#!/usr/bin/env python3
"""Soak: SessionHub as in production under a steady stream of Claude Code hooks.

    .venv/bin/python bench/soak.py --minutes 10 --rate 300

What it runs, on this machine:

- PostgreSQL database ``sessionhub_soak`` (dropped, created and migrated at the start;
  kept afterwards for inspection), Redis database 14 (flushed);
- the web server as the Dockerfile starts it (``python -m sessionhub.serve``: ``--workers``
  processes, 4 threads each; process recycling off, so a leak would show), a Celery worker
  (``--celery-concurrency``) and Celery beat, all with production settings (DEBUG=0);
- a separate load process that sends ``--rate`` hook posts a second for ``--minutes``,
  open loop (each request due at a fixed time, on a fresh connection, latency measured
  from when it was due): realistic Claude Code sessions (the hooks of tests/fixtures, each
  with the hook client's ``sessionhub`` block) starting and ending, ``--sessions`` at a
  time, spread over six gateway tokens (each under the production rate limit).

Every ``--sample`` seconds it records the RSS of every web and worker process. At the end
it waits for the background work to drain, then prints: requests sent, errors, events
stored (counted in the database) against events sent, duplicates, the latency
percentiles, and RSS at start / after warm-up / at the end / max per process with the
growth after warm-up. ``--json FILE`` writes every figure. Exit status 1 when an event is
missing, an error occurred or a process grew more than ``--max-growth`` percent.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from queue import Empty
from typing import Any

import psycopg

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
DATABASE = "sessionhub_soak"
REDIS_DB = 14
TOKENS = 6


def log(message: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {message}", flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


# --- the services -------------------------------------------------------------------------


def environment(args: argparse.Namespace) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "SESSIONHUB_"))}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "sessionhub.settings",
            "DEBUG": "0",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "SECURE_SSL_REDIRECT": "0",
            "DATABASE_URL": f"{args.postgres.rstrip('/')}/{DATABASE}",
            "REDIS_URL": f"{args.redis.rstrip('/')}/{REDIS_DB}",
            "LOG_LEVEL": "WARNING",
            "SESSIONHUB_WEB_WORKERS": str(args.workers),
            "SESSIONHUB_WEB_THREADS": "4",
            # No recycling: a leak must show.
            "SESSIONHUB_WEB_LIFETIME": "0",
            "SESSIONHUB_WEB_MAX_RSS": "0",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def recreate_database(admin_dsn: str) -> None:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (DATABASE,),
        )
        conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}"')
        conn.execute(f'CREATE DATABASE "{DATABASE}"')


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def flush_redis(url: str) -> None:
    import redis

    redis.Redis.from_url(url).flushdb()


@dataclass
class Service:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def pids(self) -> list[int]:
        """The main process and every descendant (the web server's processes, Celery's pool)."""
        found, todo = [], [self.process.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            with contextlib.suppress(OSError):  # it may exit while the tree is walked
                for task in Path(f"/proc/{pid}/task").iterdir():
                    with contextlib.suppress(OSError):
                        todo += [int(x) for x in (task / "children").read_text().split()]
        return found

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        except ProcessLookupError:
            pass


def start(name: str, args: list[str], env: dict[str, str], logs: Path) -> Service:
    path = logs / f"{name}.log"
    process = subprocess.Popen(
        args,
        cwd=REPO,
        env=env,
        stdout=path.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return Service(name, process, path)


def wait_for(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.3)
    raise SystemExit(f"{what} did not come up within {timeout:.0f}s")


def http_up(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            return sock.recv(16).startswith(b"HTTP/1.")
    except OSError:
        return False


def preflight(port: int, token: str) -> None:
    """One event before the load: a server that cannot store it stops the run here."""
    import http.client

    body = json.dumps(
        {
            "session_id": f"preflight-{uuid.uuid4().hex[:8]}",
            "hook_event_name": "Notification",
            "message": "soak preflight",
            "cwd": "/tmp",
        }
    )
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(
        "POST",
        "/api/v1/hooks/claude-code",
        body,
        {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    answer = conn.getresponse()
    text = answer.read().decode(errors="replace")
    if answer.status != 200:
        raise SystemExit(f"preflight event refused: {answer.status} {text[:500]}")


def rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time a process has used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_label(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return str(pid)
    return cmd.strip()[:60]


# --- the load -------------------------------------------------------------------------------


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def session_scripts() -> list[list[dict[str, Any]]]:
    """Claude Code sessions that start and end, as their hooks arrive."""
    scripts = []
    for name in ("basic", "compact", "clear", "secrets"):
        lines = read_jsonl(FIXTURES / "claude-code" / name / "hooks.jsonl")
        if lines and lines[-1].get("hook_event_name") == "SessionEnd":
            scripts.append(lines)
    if not scripts:
        raise SystemExit(f"no fixture sessions under {FIXTURES}")
    return scripts


@dataclass
class LoadResult:
    sent: int = 0
    events: int = 0
    ok: int = 0
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    sessions_started: int = 0
    sessions_ended: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)
    seconds: float = 0.0
    max_lag_ms: float = 0.0


def _line(script: list[dict[str, Any]], number: int, index: int, nonce: str) -> dict[str, Any]:
    """Hook ``index`` of session ``number``, as the hook client posts it."""
    line = dict(script[index])
    sid = f"soak-{nonce}-{number:06d}"
    line["session_id"] = sid
    line["cwd"] = f"/home/dev/src/project-{number % 40}"
    line["sessionhub"] = {
        "event_id": f"{sid}-{index:03d}",
        "occurred_at": datetime.now(UTC).isoformat(),
    }
    return line


async def _drive(
    port: int,
    tokens: list[str],
    rate: float,
    seconds: float,
    concurrent: int,
    nonce: str,
    batch: int,
) -> LoadResult:
    scripts = session_scripts()
    result = LoadResult()
    loop = asyncio.get_running_loop()
    # Sessions in flight: [session number, script, next line], served round-robin.
    live: list[list[Any]] = []
    next_session = 0

    def next_body() -> tuple[Any, str, int]:
        """The next post: one hook, or up to ``batch`` consecutive hooks of one session
        (as the hook client sends its spool); with its token and its number of events."""
        nonlocal next_session
        while len(live) < concurrent:
            live.append([next_session, scripts[next_session % len(scripts)], 0])
            next_session += 1
            result.sessions_started += 1
        number, script, index = live.pop(0)
        upto = min(len(script), index + batch)
        lines = [_line(script, number, i, nonce) for i in range(index, upto)]
        if upto < len(script):
            live.append([number, script, upto])
        else:
            result.sessions_ended += 1
        body: Any = lines[0] if batch == 1 else lines
        return body, tokens[number % len(tokens)], len(lines)

    async def one(body: bytes, token: str, due: float) -> None:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
            writer.write(
                (
                    "POST /api/v1/hooks/claude-code HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                ).encode()
                + body
            )
            await writer.drain()
            raw = await asyncio.wait_for(reader.read(), 60)
            writer.close()
        except (OSError, TimeoutError) as exc:
            name = type(exc).__name__
            result.failures[name] = result.failures.get(name, 0) + 1
            return
        result.latencies_ms.append((loop.time() - due) * 1000)
        status = raw[9:12].decode(errors="replace")
        result.statuses[status] = result.statuses.get(status, 0) + 1
        if status != "200":
            key = f"http_{status}"
            result.failures[key] = result.failures.get(key, 0) + 1
            return
        result.ok += 1
        try:
            answer = json.loads(raw.split(b"\r\n\r\n", 1)[1])
            result.accepted += answer["accepted"]
            result.duplicates += answer["duplicates"]
            result.rejected += answer["rejected"]
        except (ValueError, KeyError, IndexError):
            result.failures["unreadable_answer"] = result.failures.get("unreadable_answer", 0) + 1

    total_events = int(rate * seconds)
    tasks: set[asyncio.Task[None]] = set()
    start_at = loop.time() + 0.1
    while result.events < total_events:
        # Each post is due when the events before it have had their time at ``rate``.
        due = start_at + result.events / rate
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            result.max_lag_ms = max(result.max_lag_ms, -delay * 1000)
        body, token, count = next_body()
        task = asyncio.ensure_future(one(json.dumps(body).encode(), token, due))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        result.sent += 1
        result.events += count
    if tasks:
        await asyncio.gather(*tasks)
    result.seconds = loop.time() - start_at
    # Sessions cut short by the end of the run are finished, so every session ends.
    while live:
        body, token, count = next_body()
        await one(json.dumps(body).encode(), token, loop.time())
        result.sent += 1
        result.events += count
        if len(live) < concurrent:
            concurrent = len(live)  # start no new session
    return result


def load_process(
    port: int,
    tokens: list[str],
    rate: float,
    seconds: float,
    concurrent: int,
    nonce: str,
    batch: int,
    out: Any,
) -> None:
    result = asyncio.run(_drive(port, tokens, rate, seconds, concurrent, nonce, batch))
    out.put(result.__dict__)


# --- the run -------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=300.0, help="events per second")
    parser.add_argument(
        "--batch",
        type=int,
        default=1,
        help="hooks per post: 1 as Claude Code's hooks post; more as the hook client's "
        "spool flush or a batching gateway posts (consecutive hooks of one session)",
    )
    parser.add_argument("--sessions", type=int, default=60, help="sessions in flight")
    parser.add_argument("--workers", type=int, default=3, help="web server processes")
    parser.add_argument("--celery-concurrency", type=int, default=2)
    parser.add_argument("--sample", type=float, default=10.0, help="RSS sampling period (s)")
    parser.add_argument(
        "--warmup", type=float, default=60.0, help="seconds before the RSS baseline"
    )
    parser.add_argument("--max-growth", type=float, default=5.0, help="percent, after warm-up")
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379")
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    parser.add_argument("--logs", type=Path, default=Path("/tmp/sessionhub-soak"))
    args = parser.parse_args()

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the services on a kill too
    args.logs.mkdir(parents=True, exist_ok=True)
    env = environment(args)
    log(f"database {DATABASE}: recreating and migrating")
    recreate_database(f"{args.postgres.rstrip('/')}/postgres")
    manage(env, "migrate", "--noinput")
    flush_redis(env["REDIS_URL"])
    tokens = []
    for i in range(TOKENS):
        out = manage(
            env,
            "create_api_token",
            "soak",
            "--scopes",
            "ingest",
            "--name",
            f"gw-{i}",
            "--create-team",
        )
        tokens.append(next(x.strip() for x in out.splitlines() if x.strip().startswith("shub_")))

    port = free_port()
    web_env = {**env, "SESSIONHUB_WEB_BIND": f"127.0.0.1:{port}"}
    services = [
        start("web", [sys.executable, "-m", "sessionhub.serve"], web_env, args.logs),
        start(
            "worker",
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "sessionhub",
                "worker",
                f"--concurrency={args.celery_concurrency}",
                "--loglevel=WARNING",
            ],
            env,
            args.logs,
        ),
        start(
            "beat",
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "sessionhub",
                "beat",
                "--loglevel=WARNING",
                f"--schedule={args.logs / 'celerybeat-schedule'}",
            ],
            env,
            args.logs,
        ),
    ]
    web, worker = services[0], services[1]
    samples: list[dict[str, Any]] = []
    try:
        wait_for(lambda: http_up(port), 60, "the web server")
        time.sleep(3)  # let the worker connect to the broker
        preflight(port, tokens[0])
        seconds = args.minutes * 60
        nonce = uuid.uuid4().hex[:8]
        log(
            f"driving {args.rate:.0f} events/s ({args.batch} per post) for {args.minutes:g} "
            f"min against 127.0.0.1:{port} ({args.workers} web processes, Celery -c "
            f"{args.celery_concurrency}); RSS every {args.sample:g}s"
        )
        queue: Any = multiprocessing.Queue()
        load = multiprocessing.Process(
            target=load_process,
            args=(port, tokens, args.rate, seconds, args.sessions, nonce, args.batch, queue),
        )
        started = time.monotonic()
        load.start()
        next_sample = started
        result: dict[str, Any] | None = None
        while result is None:
            try:
                # Read the result as soon as it is there: a process that has put a large
                # object on a queue does not exit until someone takes it.
                result = queue.get(timeout=0.5)
                break
            except Empty:
                if not load.is_alive() and queue.empty():
                    raise SystemExit("the load process died without a result") from None
            now = time.monotonic()
            if now >= next_sample:
                sample = {"t": round(now - started, 1)}
                for service in (web, worker):
                    for pid in service.pids():
                        value = rss_kb(pid)
                        if value is not None:
                            sample[f"{service.name}:{pid}"] = value
                for service in (web, worker):
                    for pid in service.pids():
                        cpu = cpu_seconds(pid)
                        if cpu is not None:
                            sample[f"cpu:{service.name}:{pid}"] = cpu
                cpu = cpu_seconds(load.pid) if load.pid else None
                if cpu is not None:
                    sample["cpu:load:generator"] = cpu
                samples.append(sample)
                next_sample += args.sample
                if len(samples) % 6 == 1:
                    total = {
                        s.name: sum(v for k, v in sample.items() if k.startswith(s.name + ":"))
                        for s in (web, worker)
                    }
                    log(
                        f"t={sample['t']:.0f}s RSS web {total['web'] // 1024} MB, "
                        f"worker {total['worker'] // 1024} MB"
                    )
        load.join(timeout=60)
        log(
            f"load done: {result['events']} events in {result['sent']} posts in "
            f"{result['seconds']:.0f}s; waiting for the worker"
        )

        # The background work drains: the outbox (memory_dirty_at) empties.
        dsn = env["DATABASE_URL"]
        drain_started = time.monotonic()
        backlog = -1
        while time.monotonic() - drain_started < args.drain_timeout:
            with psycopg.connect(dsn) as conn:
                backlog = conn.execute(
                    "SELECT count(*) FROM lifecycle_session WHERE memory_dirty_at IS NOT NULL"
                ).fetchone()[0]
            if backlog == 0:
                break
            time.sleep(2)
        drain_seconds = time.monotonic() - drain_started
        final = {"t": round(time.monotonic() - started, 1)}
        for service in (web, worker):
            for pid in service.pids():
                value = rss_kb(pid)
                if value is not None:
                    final[f"{service.name}:{pid}"] = value
        samples.append(final)
        with psycopg.connect(dsn) as conn:
            ours = (f"soak-{nonce}-%",)  # the load's events (not the preflight's)
            stored = conn.execute(
                "SELECT count(*) FROM lifecycle_lifecycleevent WHERE event_id LIKE %s", ours
            ).fetchone()[0]
            distinct = conn.execute(
                "SELECT count(DISTINCT (team_id, event_id)) FROM lifecycle_lifecycleevent "
                "WHERE event_id LIKE %s",
                ours,
            ).fetchone()[0]
            sessions = conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE status = 'ended') FROM lifecycle_session "
                "WHERE external_id LIKE %s",
                ours,
            ).fetchone()
            summaries = conn.execute(
                "SELECT count(*) FROM memory_summary m JOIN lifecycle_session s "
                "ON s.id = m.session_id WHERE s.external_id LIKE %s",
                ours,
            ).fetchone()[0]
            labels = {
                key: process_label(int(key.split(":")[1]))
                for key in {k for s in samples for k in s if k != "t" and not k.startswith("cpu:")}
            }
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not stop the cleanup
        for service in reversed(services):
            service.stop()

    report = build_report(
        args, result, samples, labels, stored, distinct, sessions, summaries, backlog, drain_seconds
    )
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))
        log(f"figures written to {args.json}")
    bad = (
        report["errors"] > 0
        or report["events_stored"] != report["events_sent"]
        or report["duplicates_stored"] != 0
        or any(p["growth_after_warmup_pct"] > args.max_growth for p in report["rss"])
    )
    return 1 if bad else 0


def build_report(
    args: argparse.Namespace,
    result: dict[str, Any],
    samples: list[dict[str, Any]],
    labels: dict[str, str],
    stored: int,
    distinct: int,
    sessions: tuple[int, int],
    summaries: int,
    backlog: int,
    drain_seconds: float,
) -> dict[str, Any]:
    latencies = result["latencies_ms"]
    rss = []
    keys = sorted({k for s in samples for k in s if k != "t" and not k.startswith("cpu:")})
    cpu: dict[str, float] = {}
    for key in sorted({k for s in samples for k in s if k.startswith("cpu:")}):
        series = [s[key] for s in samples if key in s]
        group = key.split(":")[1]
        cpu[group] = round(cpu.get(group, 0.0) + series[-1] - series[0], 1)
    for key in keys:
        series = [(s["t"], s[key]) for s in samples if key in s]
        if len(series) < 2:
            continue
        after = [v for t, v in series if t >= args.warmup] or [series[-1][1]]
        baseline = after[0]
        rss.append(
            {
                "process": key,
                "command": labels.get(key, ""),
                "start_mb": round(series[0][1] / 1024, 1),
                "after_warmup_mb": round(baseline / 1024, 1),
                "end_mb": round(series[-1][1] / 1024, 1),
                "max_mb": round(max(v for _, v in series) / 1024, 1),
                "growth_after_warmup_pct": round((series[-1][1] - baseline) / baseline * 100, 1),
                "samples": len(series),
            }
        )
    events_sent = result["events"]  # every event id unique
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "minutes": args.minutes,
        "target_rate": args.rate,
        "batch": args.batch,
        "achieved_rate": round(result["events"] / result["seconds"], 1) if result["seconds"] else 0,
        "requests_sent": result["sent"],
        "requests_ok": result["ok"],
        "errors": sum(result["failures"].values()),
        "failures": result["failures"],
        "statuses": result["statuses"],
        "events_sent": events_sent,
        "events_accepted": result["accepted"],
        "events_answered_duplicate": result["duplicates"],
        "events_rejected": result["rejected"],
        "events_stored": stored,
        "duplicates_stored": stored - distinct,
        "sessions_started": result["sessions_started"],
        "sessions_ended": result["sessions_ended"],
        "sessions_in_db": sessions[0],
        "sessions_ended_in_db": sessions[1],
        "summaries": summaries,
        "outbox_backlog_at_end": backlog,
        "drain_seconds": round(drain_seconds, 1),
        "latency_ms": {
            "p50": round(percentile(latencies, 50), 1),
            "p95": round(percentile(latencies, 95), 1),
            "p99": round(percentile(latencies, 99), 1),
            "max": round(max(latencies), 1) if latencies else None,
            "mean": round(statistics.fmean(latencies), 1) if latencies else None,
        },
        "generator_max_lag_ms": round(result["max_lag_ms"], 1),
        "cpu_seconds_during_load": cpu,
        "rss": rss,
    }


def print_report(r: dict[str, Any]) -> None:
    lat = r["latency_ms"]
    lines = [
        "",
        f"soak: {r['minutes']:g} min at {r['target_rate']:g} events/s, {r['batch']} per post "
        f"(achieved {r['achieved_rate']}/s), {r['machine']['cpus']} CPUs",
        f"  requests sent      {r['requests_sent']}  (ok {r['requests_ok']}, "
        f"errors {r['errors']} {r['failures'] or ''})",
        f"  events sent        {r['events_sent']}  (accepted {r['events_accepted']}, "
        f"duplicate answers {r['events_answered_duplicate']}, rejected {r['events_rejected']})",
        f"  events stored      {r['events_stored']}  (counted in the database; "
        f"duplicates stored: {r['duplicates_stored']})",
        f"  lost               {r['events_sent'] - r['events_stored']}",
        f"  sessions           {r['sessions_in_db']} in the database, "
        f"{r['sessions_ended_in_db']} ended, {r['summaries']} summaries; outbox backlog "
        f"{r['outbox_backlog_at_end']} after {r['drain_seconds']}s of drain",
        f"  latency (ms)       p50 {lat['p50']}  p95 {lat['p95']}  p99 {lat['p99']}  "
        f"max {lat['max']}",
        f"  CPU seconds        {r['cpu_seconds_during_load']} (while the load ran)",
        "  RSS (MB)           start  warm  end    max    growth-after-warm-up  process",
    ]
    for p in r["rss"]:
        lines.append(
            f"                     {p['start_mb']:<6} {p['after_warmup_mb']:<5} "
            f"{p['end_mb']:<6} {p['max_mb']:<6} {p['growth_after_warmup_pct']:>+6.1f}%"
            f"               {p['command']}"
        )
    print("\n".join(lines))


if __name__ == "__main__":
    if shutil.which("redis-server") is None and "--help" not in sys.argv:
        print("note: redis-server not on PATH; the soak needs Redis on --redis", file=sys.stderr)
    sys.exit(main())
