#!/usr/bin/env python3
"""SessionHub's benchmark: run it as in production, load it over HTTP, print one table.

    .venv/bin/python bench/run.py            # the full run, about 4 minutes
    .venv/bin/python bench/run.py --quick    # everything shorter, for a smoke test

It starts SessionHub the way docker-compose.yml does (migrations on a dedicated PostgreSQL
database, the web server as the Dockerfile runs it, a Celery worker and Celery beat on
Redis, DEBUG off), drives load from
other processes (wrk, and Python load generators for a fixed rate and for probes), measures
the raw database limit and the claude-mem peer in the same run, and prints a table with
the machine, the versions and each target met or not. Every process it starts is stopped
at the end, whatever happens. bench/README.md says what each figure means.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
import psycopg
from common import REPO, log

PG = "postgres://postgres@127.0.0.1:5432"
DB_NAME = "sessionhub_bench"
REDIS_URL = "redis://127.0.0.1:6379/13"
HOOK_PATH = "/api/v1/hooks/claude-code"


def _production_web() -> tuple[int, int]:
    """Processes and threads as the production web server (sessionhub/serve.py) takes them
    on this machine, without SESSIONHUB_WEB_* in the environment."""
    from sessionhub.serve import server_options

    options = server_options()
    return int(options["workers"]), int(options["blocking_threads"])


WORKERS, THREADS = _production_web()

TARGETS = {
    # Batch ingest: at least this share of what the raw database took in the same round.
    "batch_vs_raw": 0.6,
    "single_vs_peer": 1.0,
    # CPU per single-event request, every SessionHub process, over the peer's own.
    "cpu_vs_peer": 1.0,
    "single_p99_ms": 15.0,
    "continuity_p99_ms": 25.0,
    "mcp_search_p99_ms": 25.0,
    "summary_p95_s": 2.0,
}


@dataclass(frozen=True)
class Plan:
    """How long each part runs."""

    warmup: float
    rounds: int
    round_seconds: float
    rate: float
    fixed_seconds: float
    probe_every: float
    batch_seconds: float
    raw_seconds: float
    continuity_requests: int
    big: int
    drain_timeout: float


FULL = Plan(
    warmup=5,
    rounds=3,
    round_seconds=10,
    rate=300,
    fixed_seconds=60,
    probe_every=1.0,
    batch_seconds=15,
    raw_seconds=10,
    continuity_requests=500,
    big=100_000,
    drain_timeout=120,
)
QUICK = Plan(
    warmup=2,
    rounds=1,
    round_seconds=3,
    rate=300,
    fixed_seconds=8,
    probe_every=0.5,
    batch_seconds=3,
    raw_seconds=3,
    continuity_requests=60,
    big=100_000,
    drain_timeout=20,
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="everything shorter (smoke test)")
    parser.add_argument(
        "--workers",
        type=int,
        default=WORKERS,
        help=f"web server processes (default {WORKERS}: production's value on this machine)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=THREADS,
        help=f"request threads per web server process (default {THREADS}: production's "
        "value); with --server gunicorn, more than 1 means gthread",
    )
    parser.add_argument(
        "--server",
        choices=("sessionhub", "gunicorn"),
        default="sessionhub",
        help="the application server: production's (python -m sessionhub.serve, Granian; the "
        "default), or gunicorn with the same processes and threads, for comparison",
    )
    parser.add_argument(
        "--front",
        choices=("nginx", "none"),
        default="nginx",
        help="what the load reaches first: nginx with deploy/nginx.conf before the application "
        "server, as docker-compose runs it (default), or the application server itself",
    )
    parser.add_argument(
        "--celery-concurrency", type=int, default=1, help="Celery worker processes (default 1)"
    )
    parser.add_argument("--rounds", type=int, help="saturation rounds (default 3, --quick 1)")
    parser.add_argument(
        "--round-seconds", type=float, help="seconds per saturation round (default 10)"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        help="times the whole plan runs; each figure is reported as the worst of them, with "
        "every round's value (default 3, --quick 1)",
    )
    parser.add_argument(
        "--once", action="store_true", help="run the plan once (--repeat 1), for quick runs"
    )
    parser.add_argument("--no-peer", action="store_true", help="skip the claude-mem peer")
    parser.add_argument(
        "--sessions",
        type=int,
        default=20,
        help="sessions the wrk loads (saturation, batch, warm-up) spread their events over, "
        "SessionHub's and the peer's alike; every wrk run starts its own (default 20: about "
        "50 events a second each at saturation, where a busy agent sends a few)",
    )
    parser.add_argument(
        "--all-in-lookback",
        action="store_true",
        help="seed every completed session inside the 7-day lookback (worst case) instead of "
        "spreading them over 30 days",
    )
    parser.add_argument(
        "--only",
        default="",
        help="comma list of parts to run: single,fixed,batch,raw,continuity,mcp (default: all)",
    )
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="at the end, profile the gunicorn workers (and the Celery worker) with py-spy "
        "under single-event, batch and continuity load; stacks and summaries go to DIR",
    )
    parser.add_argument("--keep-logs", action="store_true", help="keep the server logs")
    parser.add_argument(
        "--database",
        default=DB_NAME,
        help=f"the PostgreSQL database to recreate and use (default {DB_NAME}), so that two "
        "runs on one machine do not drop each other's",
    )
    parser.add_argument(
        "--redis-db",
        type=int,
        default=int(REDIS_URL.rsplit("/", 1)[1]),
        help="the Redis database number to flush and use (default 13)",
    )
    return parser.parse_args()


def _stop_on_signal(signum: int, _frame: Any) -> None:
    raise SystemExit(f"stopped by signal {signum}")


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        plan = QUICK if args.quick else FULL
        if args.rounds:
            plan = replace(plan, rounds=args.rounds)
        if args.round_seconds:
            plan = replace(plan, round_seconds=args.round_seconds)
        self.plan = plan
        self.only = {x.strip() for x in args.only.split(",") if x.strip()}
        self.workdir = Path(tempfile.mkdtemp(prefix="sessionhub-bench-"))
        self.procs = common.Processes(self.workdir)
        self.dsn = f"{PG}/{DB_NAME}"
        self.port = common.free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = self._server_env()
        self.token = ""
        self.team_id = 0
        self.results: dict[str, Any] = {"notes": []}
        self.peer_dir = Path(tempfile.gettempdir()) / "sessionhub-bench-claude-mem"
        self.peer_base = ""
        self.peer_group: common.Group | None = None
        self.web: common.Group | None = None
        self.worker: common.Group | None = None
        self.nginx: Any = None  # stack.Nginx when --front nginx
        self.continuity_agent = ""
        self.seeded_sessions = 0  # completed sessions the continuity part seeded
        # Each continuity size's sessions in the lookback, once it is seeded (the rounds
        # after the first measure the same seed).
        self.continuity_seeded: dict[str, int] = {}
        self.repeat = 1 if args.once else (args.repeat or (1 if args.quick else 3))
        self.rounds: list[dict[str, Any]] = []  # each round's figures, as ``results`` holds them
        self.mp = multiprocessing.get_context("spawn")
        self.worker_class = "gthread" if args.threads > 1 else "sync"

    def wants(self, part: str) -> bool:
        return not self.only or part in self.only

    def note(self, text: str) -> None:
        log(text)
        self.results["notes"].append(text)

    # --- starting SessionHub ---------------------------------------------------------------

    def _server_env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("DJANGO_", "SESSIONHUB_", "CELERY_")) and k != "DATABASE_URL"
        }
        env.update(
            DJANGO_SETTINGS_MODULE="sessionhub.settings",
            DATABASE_URL=f"{PG}/{DB_NAME}",
            REDIS_URL=REDIS_URL,
            DEBUG="0",
            SECRET_KEY=secrets.token_urlsafe(50),
            ALLOWED_HOSTS="127.0.0.1",
            SECURE_SSL_REDIRECT="0",
            API_RATE_LIMIT="100000000/min",
            # Extractive summaries: no LLM endpoint from a developer's .env leaks in.
            SESSIONHUB_LLM_URL="",
            PYTHONUNBUFFERED="1",
        )
        return env

    def bin(self, name: str) -> str:
        return str(Path(sys.executable).parent / name)

    def setup(self) -> None:
        if not common.ensure_wrk():
            raise SystemExit("wrk is needed: apt-get install -y wrk")
        if self.args.front == "nginx" and not common.ensure_nginx():
            raise SystemExit("nginx is needed for --front nginx: apt-get install -y nginx")
        common.ensure_services()
        self.results["versions"] = common.versions(f"{PG}/postgres", REDIS_URL)
        log(f"database {DB_NAME}: recreated empty; Redis {REDIS_URL} flushed; logs: {self.workdir}")
        common.recreate_database(f"{PG}/postgres", DB_NAME)
        import redis

        redis.Redis.from_url(REDIS_URL).flushdb()
        self.manage("migrate", "--noinput", "-v", "0")
        self.token = self.manage(
            "create_api_token", "bench", "--scopes", "ingest,read", "--quiet", "--create-team"
        ).strip()
        with psycopg.connect(self.dsn) as conn:
            self.team_id = conn.execute(
                "SELECT id FROM sessionhub_team WHERE slug = 'bench'"
            ).fetchone()[0]

        # Production's server, as the Dockerfile starts it; or gunicorn with the same
        # processes and threads, to compare the two in one run.
        server = [self.bin("python"), "-m", "sessionhub.serve"]
        server_env = {
            **self.env,
            "SESSIONHUB_WEB_BIND": f"127.0.0.1:{self.port}",
            "SESSIONHUB_WEB_WORKERS": str(self.args.workers),
            "SESSIONHUB_WEB_THREADS": str(self.args.threads),
        }
        if self.args.server == "gunicorn":
            server = [
                self.bin("gunicorn"),
                "sessionhub.wsgi",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                str(self.args.workers),
                "--threads",
                str(self.args.threads),
                "--worker-class",
                self.worker_class,
                "--graceful-timeout",
                "5",
            ]
        web = self.web = self.procs.start("web", server, env=server_env)
        self.worker = self.procs.start(
            "celery-worker",
            [
                self.bin("celery"),
                "-A",
                "sessionhub",
                "worker",
                "--loglevel=INFO",
                f"--concurrency={self.args.celery_concurrency}",
                "--without-gossip",
                "--without-mingle",
                "-n",
                f"bench-{os.getpid()}@%h",
            ],
            env=self.env,
        )
        self.procs.start(
            "celery-beat",
            [
                self.bin("celery"),
                "-A",
                "sessionhub",
                "beat",
                "--loglevel=INFO",
                f"--schedule={self.workdir / 'celerybeat-schedule'}",
            ],
            env=self.env,
        )
        common.wait_http(f"{self.base}/healthz", timeout=60, group=web)
        front = ""
        if self.args.front == "nginx":
            # deploy/nginx.conf with only its deployment lines changed, as the reliability
            # tests run it; every load below goes through it.
            from stack import Nginx

            self.nginx = Nginx(self.port, self.workdir / "nginx.log")
            self.nginx.start()
            self.base = self.nginx.url
            common.wait_http(f"{self.base}/healthz", timeout=30, group=web)
            front = "nginx (deploy/nginx.conf) before "
        log(
            f"SessionHub up at {self.base}: {front}{server_label(self.results['server'])}, "
            f"Celery worker -c {self.args.celery_concurrency}, beat"
        )

    def manage(self, *args: str) -> str:
        """``manage.py`` with the server's environment; its output, or an error with it."""
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            env=self.env,
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"manage.py {' '.join(args)} failed:\n{(result.stdout + result.stderr)[-3000:]}"
            )
        return result.stdout

    def start_peer(self) -> None:
        reason = common.ensure_node()
        if reason:
            self.note(f"peer skipped: {reason}")
            return
        try:
            bun, plugin = common.claude_mem_install(self.peer_dir)
        except (OSError, subprocess.CalledProcessError) as exc:
            detail = getattr(exc, "stderr", "") or str(exc)
            self.note(f"peer skipped: installing {common.CLAUDE_MEM} failed: {detail[-500:]}")
            return
        port = common.free_port()
        # Its install is kept between runs; its data is not: it starts empty like ours.
        home = self.peer_dir / "home"
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir()
        # The worker is its own process group, stopped at the end with the others.
        group = self.procs.start(
            "claude-mem",
            [str(bun), "scripts/worker-service.cjs"],
            env=common.claude_mem_env(home, port),
            cwd=plugin,
        )
        (self.peer_dir / "worker.pid").write_text(str(group.proc.pid))
        try:
            common.wait_http(f"http://127.0.0.1:{port}/api/health", timeout=30, group=group)
        except RuntimeError:
            self.note(
                f"peer skipped: the claude-mem worker did not start (see {group.log_path}):\n"
                f"{group.tail(5)}"
            )
            return
        self.peer_base = f"http://127.0.0.1:{port}"
        self.peer_group = group
        log(f"peer: claude-mem worker at {self.peer_base}")
        self.peer_signal(signal.SIGSTOP)

    def _peer_processes(self) -> list[int]:
        """The peer's worker and every process under it."""
        pid_file = self.peer_dir / "worker.pid"
        if not self.peer_base or not pid_file.exists():
            return []
        try:
            found = [int(pid_file.read_text().strip())]
        except ValueError:
            return []
        for pid in found:  # grows as children are found
            found += common.child_pids(pid)
        return found

    def peer_signal(self, signum: int) -> None:
        """SIGSTOP the peer while SessionHub is measured, SIGCONT it for its own rounds.

        The peer keeps working after it has answered (its queue is processed in the
        background, tens of percent of a core for a while), and left running it would
        take that CPU from SessionHub's rounds; SessionHub's worker is drained before each
        peer round in turn."""
        for pid in self._peer_processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def stop_peer(self) -> None:
        self.peer_signal(signal.SIGCONT)
        pid_file = self.peer_dir / "worker.pid"
        if self.peer_base and pid_file.exists():
            with contextlib.suppress(ValueError, ProcessLookupError):
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
        if self.peer_group is not None:
            self.peer_group.stop()

    # --- helpers ---------------------------------------------------------------------------

    def event_count(self) -> int:
        with psycopg.connect(self.dsn) as conn:
            return conn.execute("SELECT count(*) FROM lifecycle_lifecycleevent").fetchone()[0]

    def drain(self, what: str) -> None:
        """Wait for the Celery worker to finish the work the last part queued, so it does
        not eat into the next part's CPU."""
        import redis

        broker = redis.Redis.from_url(REDIS_URL)
        started = time.monotonic()
        dirty = queued = 0
        while time.monotonic() - started < self.plan.drain_timeout:
            queued = broker.llen("celery")
            with psycopg.connect(self.dsn) as conn:
                dirty = conn.execute(
                    "SELECT count(*) FROM lifecycle_session WHERE memory_dirty_at IS NOT NULL"
                ).fetchone()[0]
            if not queued and not dirty:
                log(f"worker idle {time.monotonic() - started:.1f} s after {what}")
                return
            time.sleep(0.5)
        self.note(
            f"after {what} the worker still had {queued} queued tasks and {dirty} sessions "
            f"to process after {self.plan.drain_timeout:.0f} s; went on"
        )

    def wrk_hooks(self, seconds: float, *, batch: int = 1) -> common.WrkResult:
        return common.run_wrk(
            self.base + HOOK_PATH,
            seconds=seconds,
            env={
                "SHAPE": "sessionhub",
                "TOKEN": self.token,
                "BATCH": str(batch),
                "SESSIONS": str(self.args.sessions),
            },
        )

    def wrk_peer(self, seconds: float) -> common.WrkResult:
        return common.run_wrk(
            self.peer_base + "/api/sessions/observations",
            seconds=seconds,
            env={"SHAPE": "claude-mem", "SESSIONS": str(self.args.sessions)},
        )

    def child(self, target: Any, *args: Any, timeout: float) -> dict[str, Any]:
        """Run a load generator in its own interpreter and return what it reports."""
        queue = self.mp.Queue()
        proc = self.mp.Process(target=target, args=(*args, queue), daemon=True)
        proc.start()
        try:
            return queue.get(timeout=timeout)
        finally:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()

    # --- the parts -------------------------------------------------------------------------

    def warmup(self) -> None:
        result = self.wrk_hooks(self.plan.warmup)
        log(f"warm-up: {result.requests} requests, {result.bad} errors")
        if result.requests and result.bad == result.requests:
            raise SystemExit(f"every warm-up request failed; see {self.workdir}")
        self.drain("the warm-up")

    def single(self) -> None:
        """Saturation, side by side with the peer: alternating rounds, medians."""
        ours: list[common.WrkResult] = []
        theirs: list[common.WrkResult] = []
        cpus: list[dict[str, float]] = []
        peer_cpus: list[dict[str, float]] = []
        for round_no in range(1, self.plan.rounds + 1):
            before = self.event_count()
            cpu_before = common.cpu_seconds()
            result = self.wrk_hooks(self.plan.round_seconds)
            cpu = common.cpu_per_request(cpu_before, common.cpu_seconds(), result.requests)
            stored = self.event_count() - before
            ours.append(result)
            cpus.append(cpu)
            log(
                f"round {round_no} SessionHub: {result.rps:.0f} req/s, p50 {result.p50_ms:.1f} ms, "
                f"p99 {result.p99_ms:.1f} ms, errors {result.errors or 0}, {stored} events stored; "
                "CPU ms per request: " + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())
            )
            if stored < result.requests - result.bad:
                self.note(
                    f"round {round_no}: {stored} events stored for {result.requests} requests"
                )
            self.drain(f"round {round_no}")
            if self.peer_base:
                self.peer_signal(signal.SIGCONT)
                cpu_before = common.cpu_seconds()
                peer = self.wrk_peer(self.plan.round_seconds)
                cpu = common.cpu_per_request(cpu_before, common.cpu_seconds(), peer.requests)
                self.peer_signal(signal.SIGSTOP)
                theirs.append(peer)
                peer_cpus.append(cpu)
                log(
                    f"round {round_no} claude-mem: {peer.rps:.0f} req/s, p50 {peer.p50_ms:.1f} ms, "
                    f"p99 {peer.p99_ms:.1f} ms, errors {peer.errors or 0}; "
                    "CPU ms per request: " + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())
                )
        self.results["single"] = {
            "rps": common.median([r.rps for r in ours]),
            "rounds": [r.rps for r in ours],
            "p50_ms": common.median([r.p50_ms for r in ours]),
            "p99_ms": common.median([r.p99_ms for r in ours]),
            "errors": sum(r.bad for r in ours),
            "cpu_ms": _median_cpu(cpus),
        }
        if theirs:
            self.results["peer"] = {
                "rps": common.median([r.rps for r in theirs]),
                "rounds": [r.rps for r in theirs],
                "p50_ms": common.median([r.p50_ms for r in theirs]),
                "p99_ms": common.median([r.p99_ms for r in theirs]),
                "errors": sum(r.bad for r in theirs),
                "cpu_ms": _median_cpu(peer_cpus),
            }

    def fixed_rate(self) -> None:
        """300 requests/s open loop, and the summary probe alongside it."""
        plan = self.plan
        nonce = secrets.token_hex(4)
        queue = self.mp.Queue()
        # The load's first request waits until the probe is up too (and this process):
        # neither starts its interpreter inside the measured minute.
        ready = self.mp.Barrier(3)
        load = self.mp.Process(
            target=common.open_loop_process,
            args=(
                self.base,
                HOOK_PATH,
                self.token,
                plan.rate,
                plan.fixed_seconds,
                nonce,
                queue,
                ready,
            ),
            daemon=True,
        )
        probe_queue = self.mp.Queue()
        probe = self.mp.Process(
            target=common.summary_probe_process,
            args=(
                self.base,
                self.token,
                self.dsn,
                self.team_id,
                plan.fixed_seconds,
                plan.probe_every,
                secrets.token_hex(4),
                probe_queue,
                ready,
            ),
            daemon=True,
        )
        load.start()
        probe.start()
        try:
            ready.wait(timeout=120)
            result = queue.get(timeout=plan.fixed_seconds + 120)
            probed = probe_queue.get(timeout=120)
        finally:
            for proc in (load, probe):
                proc.join(timeout=10)
                if proc.is_alive():
                    proc.kill()
        latencies = result["latencies_ms"]
        self.results["fixed"] = {
            "rate": plan.rate,
            "sent": result["sent"],
            "achieved_rps": len(latencies) / result["seconds"] if result["seconds"] else 0,
            "p50_ms": common.percentile(latencies, 50),
            "p90_ms": common.percentile(latencies, 90),
            "p99_ms": common.percentile(latencies, 99),
            "max_ms": max(latencies) if latencies else math.nan,
            "failures": result["failures"],
            "send_lag_p99_ms": result["send_lag_p99_ms"],
        }
        log(
            f"fixed {plan.rate:.0f} req/s: p50 {self.results['fixed']['p50_ms']:.1f} ms, "
            f"p99 {self.results['fixed']['p99_ms']:.1f} ms, failures {result['failures'] or 0}, "
            f"generator lag p99 {result['send_lag_p99_ms']:.1f} ms"
        )
        worst = result.get("worst_by_second", {})
        if worst:
            slow = sorted(worst.items(), key=lambda item: -item[1])[:8]
            log(
                f"fixed: seconds whose slowest request took over 15 ms: "
                f"{sum(1 for ms in worst.values() if ms > 15)} of {len(worst)}; the worst: "
                + ", ".join(f"s{second} {ms:.0f} ms" for second, ms in sorted(slow))
            )
            self.results["fixed"]["worst_by_second"] = worst
        if result["send_lag_p99_ms"] > 5:
            self.note(
                f"the fixed-rate generator fell behind by up to {result['send_lag_p99_ms']:.0f} ms "
                "(p99): the machine was short of CPU; its latencies include that wait"
            )
        seconds = probed["seconds_to_summary"]
        self.results["summary"] = {
            "sessions": probed["sessions"],
            "measured": len(seconds),
            "never": probed["never"],
            "p50_s": common.percentile(seconds, 50),
            "p95_s": common.percentile(seconds, 95),
            "max_s": max(seconds) if seconds else math.nan,
            "errors": probed["errors"],
        }
        log(
            f"summary after session_end: {len(seconds)} sessions, p50 "
            f"{common.percentile(seconds, 50):.2f} s, p95 {common.percentile(seconds, 95):.2f} s, "
            f"{probed['never']} not summarized within 30 s of the load's end"
        )
        if probed["errors"]:
            self.note(f"summary probe errors: {probed['errors'][:3]}")
        self.drain("the fixed-rate load")

    def batch(self) -> None:
        before = self.event_count()
        cpu_before = common.cpu_seconds()
        result = self.wrk_hooks(self.plan.batch_seconds, batch=100)
        cpu = common.cpu_per_request(cpu_before, common.cpu_seconds(), result.requests)
        stored = self.event_count() - before
        eps = stored / result.seconds
        self.results["batch"] = {
            "eps": eps,
            "requests_per_s": result.rps,
            "p50_ms": result.p50_ms,
            "p99_ms": result.p99_ms,
            "errors": result.bad,
            "stored": stored,
            # The worker's share is the memory work for the batch's events done meanwhile
            # (the rest is done after the load: see the drain below).
            "cpu_ms": cpu,
        }
        log(
            f"batch: {eps:.0f} events/s ({result.rps:.1f} requests/s of 100, p50 "
            f"{result.p50_ms:.0f} ms), errors {result.errors or 0}; CPU ms per request: "
            + ", ".join(f"{kind} {ms:.2f}" for kind, ms in cpu.items())
        )
        self.drain("the batch load")

    def raw(self) -> None:
        common.raw_table_create(self.dsn)
        with psycopg.connect(self.dsn) as conn:
            rows = conn.execute(
                "SELECT id::text, external_id FROM lifecycle_session WHERE team_id = %s "
                "AND status = 'active' ORDER BY created_at LIMIT 20",
                [self.team_id],
            ).fetchall()
        pks = [r[0] for r in rows]
        ext = [r[1] for r in rows]
        writers = max(1, common.machine()["cores"])
        queue = self.mp.Queue()
        procs = [
            self.mp.Process(
                target=common.raw_writer_process,
                args=(self.dsn, self.team_id, pks, ext, self.plan.raw_seconds, 100, w, queue),
                daemon=True,
            )
            for w in range(writers)
        ]
        cpu_before = common.cpu_seconds()
        for proc in procs:
            proc.start()
        try:
            parts = [queue.get(timeout=self.plan.raw_seconds + 60) for _ in procs]
        finally:
            for proc in procs:
                proc.join(timeout=10)
                if proc.is_alive():
                    proc.kill()
        cpu_after = common.cpu_seconds()
        rows = sum(p["rows"] for p in parts)
        eps = rows / max(p["seconds"] for p in parts)
        # Per 100 rows, as the batch's figures are per request of 100: the database's CPU,
        # and the writers' (reaped children of this process, counted under "other").
        cpu = common.cpu_per_request(cpu_before, cpu_after, rows // 100)
        if rows >= 100:
            writers_cpu = cpu_after.get("other", 0.0) - cpu_before.get("other", 0.0)
            cpu["writers"] = round(writers_cpu * 1000 / (rows // 100), 3)
        self.results["raw"] = {"eps": eps, "writers": writers, "cpu_ms": cpu}
        log(
            f"raw psycopg: {eps:.0f} events/s with {writers} writers; CPU ms per 100 rows: "
            + ", ".join(f"{kind} {ms:.2f}" for kind, ms in cpu.items())
        )
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE {common.RAW_TABLE}")

    def continuity(self) -> None:
        """Latency with 50, then with ``plan.big`` completed sessions of one agent."""
        now = datetime.now(UTC)
        days = 7 if self.args.all_in_lookback else 30
        gateway = "bench-token"  # the token's name: part of a Claude Code agent's identity
        if self.continuity_agent:
            agent_id = self.continuity_agent
        else:
            agent_id = self.continuity_agent = str(uuid.uuid4())
            self._continuity_agent_create(agent_id, gateway, now)
        keywords = common.TOPICS[:6]
        results: dict[str, Any] = {}
        seeded = self.seeded_sessions
        for label, total in (("small", 50), ("big", self.plan.big)):
            if seeded > total:
                continue  # a later round: the agent has the big seed, the small one is past
            started = time.monotonic()
            names = [
                f"{label}-{i:06d}-{secrets.token_hex(4)}-4000-8000-continuity"
                for i in range(self.plan.continuity_requests + 20)
            ]
            with psycopg.connect(self.dsn) as conn:
                if label not in self.continuity_seeded:
                    common.seed_completed_sessions(
                        conn,
                        team_id=self.team_id,
                        agent_id=agent_id,
                        count=total - seeded,
                        start_serial=seeded,
                        days=days,
                        now=now,
                    )
                common.seed_new_sessions(
                    conn, team_id=self.team_id, agent_id=agent_id, names=names, now=now
                )
                conn.commit()
                conn.autocommit = True
                if label not in self.continuity_seeded:
                    conn.execute("ANALYZE")
                    # The seed is months of a team's work written in seconds: its
                    # write-back is done here, not during the requests measured next.
                    conn.execute("CHECKPOINT")
                    self.continuity_seeded[label] = conn.execute(
                        "SELECT count(*) FROM lifecycle_session WHERE agent_id = %s "
                        "AND status = 'ended' AND ended_at >= now() - interval '7 days'",
                        [agent_id],
                    ).fetchone()[0]
            in_window = self.continuity_seeded[label]
            seeded = self.seeded_sessions = total
            log(
                f"continuity: {total} completed sessions ({in_window} in the 7-day lookback) "
                f"ready in {time.monotonic() - started:.1f} s"
            )
            stages = [(label, {"keywords": keywords})]
            if label == "big":  # then the same sessions' first prompt
                stages.append(("big_prompt", {"prompt": common.FIRST_PROMPT}))
            for stage, ask in stages:
                results[stage] = self._continuity_measure(
                    names, ask, total=total, in_window=in_window
                )
        self.results["continuity"] = results
        self.results["continuity_spread_days"] = days

    def _continuity_agent_create(self, agent_id: str, gateway: str, now: datetime) -> None:
        with psycopg.connect(self.dsn) as conn:
            common.copy_rows(
                conn,
                "lifecycle_agent",
                [
                    {
                        "id": agent_id,
                        "team_id": self.team_id,
                        "source": "claude-code",
                        "external_id": f"{gateway}:/home/dev/src/continuity",
                        "name": f"continuity ({gateway})",
                        "project": "/home/dev/src/continuity",
                        "created_at": now,
                        "last_seen_at": now,
                    }
                ],
            )

    def _continuity_measure(
        self, names: list[str], ask: dict[str, Any], *, total: int, in_window: int
    ) -> dict[str, Any]:
        """Twenty requests to warm the workers' connections and caches, then the count."""
        process, base, token = common.continuity_process, self.base, self.token
        self.child(process, base, token, names[:20], ask, 0, timeout=120)
        measured = self.child(process, base, token, names[20:], ask, 0, timeout=600)
        latencies = measured["latencies_ms"]
        result = {
            "sessions": total,
            "in_lookback": in_window,
            "stage": "prompt" if "prompt" in ask else "start",
            "requests": len(latencies),
            "candidates_scored": common.median(measured["scored"]),
            "p50_ms": common.percentile(latencies, 50),
            "p95_ms": common.percentile(latencies, 95),
            "p99_ms": common.percentile(latencies, 99),
            "failures": measured["failures"],
        }
        log(
            f"continuity at the {result['stage']} with {total} sessions: "
            f"p50 {result['p50_ms']:.1f} ms, p95 {result['p95_ms']:.1f} ms, "
            f"p99 {result['p99_ms']:.1f} ms ({result['candidates_scored']:.0f} candidates scored)"
        )
        if measured["failures"]:
            self.note(f"continuity failures: {measured['failures'][:3]}")
        return result

    def mcp(self) -> None:
        """The MCP endpoint with the team's ``plan.big`` completed sessions (continuity's
        seed, or its own when that part did not run): ``tools/list``, the framework's own
        cost per call (token, JSON-RPC, the answer; no memory read), then
        ``search_memory`` over the whole team, and ``get_session`` of one session found."""
        if self.seeded_sessions < self.plan.big:
            now = datetime.now(UTC)
            agent_id = str(uuid.uuid4())
            with psycopg.connect(self.dsn) as conn:
                common.copy_rows(
                    conn,
                    "lifecycle_agent",
                    [
                        {
                            "id": agent_id,
                            "team_id": self.team_id,
                            "source": "claude-code",
                            "external_id": "bench-token:/home/dev/src/mcp",
                            "name": "mcp (bench-token)",
                            "project": "/home/dev/src/mcp",
                            "created_at": now,
                            "last_seen_at": now,
                        }
                    ],
                )
                common.seed_completed_sessions(
                    conn,
                    team_id=self.team_id,
                    agent_id=agent_id,
                    count=self.plan.big - self.seeded_sessions,
                    start_serial=self.seeded_sessions,
                    days=30,
                    now=now,
                )
                conn.commit()
                conn.autocommit = True
                conn.execute("ANALYZE")
                conn.execute("CHECKPOINT")
            self.seeded_sessions = self.plan.big
        with psycopg.connect(self.dsn) as conn:
            sessions = conn.execute(
                "SELECT count(*) FROM lifecycle_session WHERE team_id = %s", [self.team_id]
            ).fetchone()[0]
        n = self.plan.continuity_requests
        queries = common.MCP_QUERIES
        searches = [
            (
                "tools/call",
                {"name": "search_memory", "arguments": {"query": queries[i % len(queries)]}},
            )
            for i in range(n)
        ]
        status, found = common.mcp_call(self.base, self.token, *searches[0])
        text = found["result"]["content"][0]["text"] if status == 200 else "{}"
        hits = json.loads(text).get("hits") or [{}]
        one = hits[0].get("session_id", "")
        plans = {
            "tools_list": [("tools/list", {})] * n,
            "search": searches,
            "get_session": [
                ("tools/call", {"name": "get_session", "arguments": {"session_id": one}})
            ]
            * n,
        }
        results: dict[str, Any] = {"sessions": sessions}
        for label, calls in plans.items():
            process, base, token = common.mcp_process, self.base, self.token
            self.child(process, base, token, calls[:20], timeout=120)  # warm the workers
            measured = self.child(process, base, token, calls, timeout=600)
            latencies = measured["latencies_ms"]
            results[label] = {
                "requests": len(latencies),
                "p50_ms": common.percentile(latencies, 50),
                "p95_ms": common.percentile(latencies, 95),
                "p99_ms": common.percentile(latencies, 99),
                "answer_chars": common.median(measured["sizes"]) if measured["sizes"] else 0,
                "hits": common.median(measured["hits"]) if measured["hits"] else 0,
                "failures": measured["failures"],
            }
            log(
                f"mcp {label} with {sessions} sessions: p50 {results[label]['p50_ms']:.1f} ms, "
                f"p95 {results[label]['p95_ms']:.1f} ms, p99 {results[label]['p99_ms']:.1f} ms"
            )
            if measured["failures"]:
                self.note(f"mcp {label} failures: {measured['failures'][:3]}")
        self.results["mcp"] = results

    def profile(self) -> None:
        """py-spy on the web server's processes (wall clock: waits on PostgreSQL count) under
        single-event, batch and continuity load, and on the Celery worker meanwhile."""
        spy = common.py_spy()
        if spy is None:
            self.note("--profile needs py-spy in the venv: pip install py-spy")
            return
        out = self.args.profile
        out.mkdir(parents=True, exist_ok=True)
        seconds = 6 if self.args.quick else 20
        loads: list[tuple[str, Any]] = [
            ("single", lambda: self.wrk_hooks(seconds - 2)),
            ("batch", lambda: self.wrk_hooks(seconds - 2, batch=100)),
        ]
        if self.continuity_agent:
            loads.append(("continuity", lambda: self._continuity_load(seconds - 2)))
        for name, load in loads:
            recorders = []
            for who, group in (("web", self.web), ("worker", self.worker)):
                if group is None or not group.alive():
                    continue
                raw = out / f"{name}-{who}.raw.txt"
                cmd = [spy, "record", "--pid", str(group.proc.pid), "--subprocesses", "--idle"]
                cmd += ["--nonblocking", "--rate", "250", "--format", "raw"]
                cmd += ["--duration", str(seconds), "-o", str(raw)]
                log_file = (out / f"{name}-{who}.py-spy.log").open("w")
                recorders.append(
                    (who, raw, subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT))
                )
            time.sleep(1)
            load()
            for who, raw, proc in recorders:
                try:
                    proc.wait(timeout=seconds + 30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                if not raw.exists():
                    self.note(f"py-spy wrote no profile for {name}/{who} (see {out})")
                    continue
                focus = ["WSGIHandler.__call__"] if who == "web" else ["celery/app/trace.py"]
                summary = common.profile_summary(raw, focus=focus)
                (out / f"{name}-{who}.txt").write_text(summary + "\n")
                log(f"profile {name}/{who}: {out / f'{name}-{who}.txt'}")
            self.drain(f"the {name} profile")
        self.results["profile_dir"] = str(out)

    def _continuity_load(self, seconds: float) -> None:
        now = datetime.now(UTC)
        names = [f"prof-{i:06d}-{secrets.token_hex(4)}-continuity" for i in range(2000)]
        with psycopg.connect(self.dsn) as conn:
            common.seed_new_sessions(
                conn,
                team_id=self.team_id,
                agent_id=self.continuity_agent,
                names=names,
                now=now,
            )
        self.child(
            common.continuity_process,
            self.base,
            self.token,
            names,
            {"keywords": common.TOPICS[:6]},
            seconds,
            timeout=seconds + 120,
        )

    # --- the run ---------------------------------------------------------------------------

    def run(self) -> int:
        self.results["machine"] = common.machine()
        self.results["load_before"] = os.getloadavg()[0]
        self.results["started"] = datetime.now(UTC).isoformat(timespec="seconds")
        self.results["quick"] = self.args.quick
        self.results["server"] = {
            "software": self.args.server,
            "workers": self.args.workers,
            "worker_class": self.worker_class,
            "threads": self.args.threads,
            "celery_concurrency": self.args.celery_concurrency,
            "sessions": self.args.sessions,
            "front": self.args.front,
        }
        signal.signal(signal.SIGTERM, _stop_on_signal)
        signal.signal(signal.SIGHUP, _stop_on_signal)
        failed = False
        try:
            self.setup()
            if self.wants("single") and not self.args.no_peer:
                self.start_peer()
            self.warmup()
            for round_no in range(1, self.repeat + 1):
                if self.repeat > 1:
                    log(f"=== round {round_no} of {self.repeat}")
                for part in ("single", "fixed", "batch", "raw", "continuity", "mcp"):
                    if self.wants(part):
                        log(f"--- {part}")
                        getattr(self, {"fixed": "fixed_rate"}.get(part, part))()
                self.rounds.append(
                    {key: self.results.pop(key) for key in ROUND_KEYS if key in self.results}
                )
            if self.args.profile:
                log("--- profile")
                self.profile()
        except (KeyboardInterrupt, SystemExit) as exc:
            self.note(f"stopped early: {exc or 'interrupted'}")
            failed = True
        except Exception as exc:  # noqa: BLE001 - report, stop everything, print the table
            self.note(f"the run stopped early: {type(exc).__name__}: {exc}")
            failed = True
            import traceback

            traceback.print_exc()
        finally:
            if self.rounds:
                self.results.update(worst_of_rounds(self.rounds))
                self.results["rounds"] = self.rounds
            self.stop_peer()
            if self.nginx is not None:
                self.nginx.close()
            self.procs.stop_all()
            log("every process the benchmark started is stopped")
        self.results["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
        self.results["load_after"] = os.getloadavg()[0]
        print(render(self.results))
        if self.args.json:
            self.args.json.write_text(json.dumps(self.results, indent=2, default=str) + "\n")
        if not self.args.keep_logs and not failed:
            for path in self.workdir.iterdir():
                path.unlink()
            self.workdir.rmdir()
        else:
            log(f"logs kept in {self.workdir}")
        return 1 if failed else 0


# --- the rounds ----------------------------------------------------------------------------

# What one round of the plan measures, by its key in the results.
ROUND_KEYS = (
    "single",
    "peer",
    "fixed",
    "summary",
    "batch",
    "raw",
    "continuity",
    "continuity_spread_days",
    "mcp",
)


def _worst(values: list[dict[str, Any]], key: Any) -> dict[str, Any]:
    """The round whose figure is worst: the greatest ``key`` (ties: the earliest round)."""
    return max(values, key=key)


def worst_of_rounds(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure as the worst of the rounds that measured it, so a target counts as met
    only when every round meets it: the lowest throughput (with the peer's, or the raw
    database's, of the same round: the ratio is the round's), the highest latencies, each
    continuity stage and MCP call on its own. Every round's figures stay in ``rounds``."""
    worst: dict[str, Any] = {}
    with_single = [r for r in rounds if r.get("single")]
    if with_single:

        def single_key(r: dict[str, Any]) -> float:
            peer = r.get("peer")
            ratio = r["single"]["rps"] / peer["rps"] if peer and peer["rps"] else None
            return -(ratio if ratio is not None else r["single"]["rps"])

        chosen = _worst(with_single, single_key)
        worst["single"] = chosen["single"]
        if chosen.get("peer"):
            worst["peer"] = chosen["peer"]
    for key, figure in (("fixed", "p99_ms"), ("summary", "p95_s")):
        found = [r[key] for r in rounds if r.get(key)]
        if found:
            worst[key] = _worst(found, lambda f, figure=figure: f[figure])
    with_batch = [r for r in rounds if r.get("batch")]
    if with_batch:

        def batch_key(r: dict[str, Any]) -> tuple[bool, float]:
            # A round that misses the target first (its share of raw), then the lowest
            # share of raw (or events/s without raw).
            eps, raw = r["batch"]["eps"], r.get("raw")
            ratio = eps / raw["eps"] if raw and raw["eps"] else None
            met = ratio is not None and ratio >= TARGETS["batch_vs_raw"]
            return (not met, -(ratio if ratio is not None else eps))

        chosen = _worst(with_batch, batch_key)
        worst["batch"] = chosen["batch"]
        if chosen.get("raw"):
            worst["raw"] = chosen["raw"]
    elif any(r.get("raw") for r in rounds):
        worst["raw"] = min((r["raw"] for r in rounds if r.get("raw")), key=lambda f: f["eps"])
    cpu_rounds = [r for r in rounds if cpu_vs_peer(r) is not None]
    if cpu_rounds:
        chosen = _worst(cpu_rounds, lambda r: cpu_vs_peer(r))
        worst["cpu"] = {
            "ratio": cpu_vs_peer(chosen),
            "ours": chosen["single"]["cpu_ms"],
            "peer": chosen["peer"]["cpu_ms"],
        }
    for key in ("continuity", "mcp"):
        parts = [r[key] for r in rounds if r.get(key)]
        if not parts:
            continue
        merged: dict[str, Any] = {}
        for part in parts:
            for label, figure in part.items():
                if not isinstance(figure, dict) or "p99_ms" not in figure:
                    merged[label] = figure  # a property of the run (sessions): the latest
                    continue
                if label not in merged or figure["p99_ms"] > merged[label]["p99_ms"]:
                    merged[label] = figure
        worst[key] = merged
    spread = [r["continuity_spread_days"] for r in rounds if r.get("continuity_spread_days")]
    if spread:
        worst["continuity_spread_days"] = spread[0]
    return worst


def peer_cpu_ms(cpu: dict[str, float]) -> float:
    """The peer's CPU per request: its own process (SessionHub's idle processes, sampled
    during the peer's rounds, are left out)."""
    return cpu["peer"] if "peer" in cpu else sum(cpu.values())


def cpu_vs_peer(r: dict[str, Any]) -> float | None:
    """A round's CPU per single-event request, all of SessionHub's processes (front, web,
    PostgreSQL, worker, Redis), over the peer's."""
    single, peer = r.get("single"), r.get("peer")
    if not single or not peer or not single.get("cpu_ms") or not peer.get("cpu_ms"):
        return None
    theirs = peer_cpu_ms(peer["cpu_ms"])
    return sum(single["cpu_ms"].values()) / theirs if theirs else None


def rounds_text(rounds: list[dict[str, Any]]) -> list[str]:
    """Every round's value of each figure with a target, in order (the table shows the
    worst)."""

    def each(values: list[Any], digits: int, unit: str) -> str:
        return ", ".join(_n(v, digits) for v in values) + unit

    lines = []
    single = [r for r in rounds if r.get("single")]
    if single:
        ratios = [
            r["single"]["rps"] / r["peer"]["rps"] if r.get("peer") and r["peer"]["rps"] else None
            for r in single
        ]
        text = each([r["single"]["rps"] for r in single], 0, " req/s")
        if all(x is not None for x in ratios):
            text += " (÷ peer " + ", ".join(f"{x:.2f}" for x in ratios) + ")"
        lines.append(f"  single-event ingest: {text}")
    cpu = [cpu_vs_peer(r) for r in rounds]
    if any(x is not None for x in cpu):
        lines.append(
            "  CPU per single event ÷ peer: "
            + ", ".join("—" if x is None else f"{x:.2f}" for x in cpu)
        )
    fixed = [r["fixed"] for r in rounds if r.get("fixed")]
    if fixed:
        lines.append(f"  300/s open loop, p99: {each([f['p99_ms'] for f in fixed], 1, ' ms')}")
    batch = [r for r in rounds if r.get("batch")]
    if batch:
        text = each([r["batch"]["eps"] for r in batch], 0, " events/s")
        if all(r.get("raw") for r in batch):
            text += (
                " (÷ raw "
                + ", ".join(f"{r['batch']['eps'] / r['raw']['eps']:.2f}" for r in batch)
                + ")"
            )
        lines.append(f"  batch: {text}")
    for key, title in (("continuity", "continuity"), ("mcp", "MCP")):
        labels: dict[str, list[float]] = {}
        for r in rounds:
            for label, figure in (r.get(key) or {}).items():
                if isinstance(figure, dict) and "p99_ms" in figure:
                    labels.setdefault(label, []).append(figure["p99_ms"])
        for label, values in labels.items():
            lines.append(f"  {title} {label}, p99: {each(values, 1, ' ms')}")
    summary = [r["summary"] for r in rounds if r.get("summary")]
    if summary:
        lines.append(f"  summary after end, p95: {each([f['p95_s'] for f in summary], 2, ' s')}")
    return lines


# --- the table -----------------------------------------------------------------------------


def _median_cpu(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Each kind's median CPU ms per request over the rounds."""
    kinds = sorted({kind for cpu in rounds for kind in cpu})
    return {kind: common.median([cpu.get(kind, 0.0) for cpu in rounds]) for kind in kinds}


def _cpu_text(cpu: dict[str, float]) -> str:
    parts = [f"{kind} {ms:.2f}" for kind, ms in cpu.items()]
    return ", ".join(parts) + f"; total {sum(cpu.values()):.2f}"


def _n(value: float, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:,.{digits}f}"


def _met(ok: bool | None) -> str:
    return "—" if ok is None else ("met" if ok else "NOT MET")


def server_label(s: dict[str, Any]) -> str:
    """The web server a run measured, in words."""
    if s.get("software") == "gunicorn":
        label = f"gunicorn {s.get('workers')} {s.get('worker_class')} workers"
        if s.get("worker_class") == "gthread":
            label += f" x {s.get('threads')} threads"
        return label
    return f"python -m sessionhub.serve (Granian) {s.get('workers')} x {s.get('threads')} threads"


def render(r: dict[str, Any]) -> str:
    m = r.get("machine", {})
    v = r.get("versions", {})
    s = r.get("server", {})
    lines = [
        "",
        f"SessionHub benchmark, {r.get('started', '?')}{' (--quick)' if r.get('quick') else ''}",
        f"machine: {m.get('cores')} cores, {m.get('memory_gib')} GiB, {m.get('cpu')}, "
        f"Linux {m.get('kernel')}",
        f"versions: Python {v.get('python', '?')} ({v.get('python_executable', '?')}), "
        f"Django {v.get('django', '?')}, DRF "
        f"{v.get('djangorestframework', '?')}, PostgreSQL {v.get('postgresql', '?')}, Redis "
        f"{v.get('redis', '?')}, Granian {v.get('granian', '?')}, Celery {v.get('celery', '?')}, "
        f"psycopg {v.get('psycopg', '?')}, wrk {v.get('wrk', '?')}; commit {v.get('commit', '?')}",
        f"server: {'nginx before ' if s.get('front') == 'nginx' else ''}{server_label(s)}, "
        f"Celery worker -c {s.get('celery_concurrency')} and beat, "
        "PostgreSQL and Redis on the same machine; the wrk loads spread over "
        f"{s.get('sessions', 20)} sessions",
        f"load average (1 min) of the machine before the run {r.get('load_before', 0):.2f}, "
        f"after {r.get('load_after', 0):.2f} (other work on the machine skews the figures)",
        "",
        "| figure | SessionHub | reference | target | |",
        "| --- | --- | --- | --- | --- |",
    ]

    def row(figure: str, value: str, ref: str, target: str, ok: bool | None) -> None:
        lines.append(f"| {figure} | {value} | {ref} | {target} | {_met(ok)} |")

    single, peer = r.get("single"), r.get("peer")
    if single:
        ratio = single["rps"] / peer["rps"] if peer and peer["rps"] else None
        row(
            "single-event ingest at saturation (wrk -t2 -c8, req/s, median of rounds)",
            _n(single["rps"]),
            f"claude-mem {_n(peer['rps'])}; ratio {ratio:.2f}" if ratio else "peer not run",
            "ratio ≥ 1.0",
            None if ratio is None else ratio >= TARGETS["single_vs_peer"],
        )
    fixed = r.get("fixed")
    if fixed:
        row(
            f"single-event latency at {fixed['rate']:.0f} req/s open loop, p50 / p99",
            f"{_n(fixed['p50_ms'], 1)} / {_n(fixed['p99_ms'], 1)} ms",
            f"{_n(fixed['achieved_rps'])} req/s done, {sum(fixed['failures'].values())} failed",
            "p99 ≤ 15 ms",
            fixed["p99_ms"] <= TARGETS["single_p99_ms"] and not fixed["failures"],
        )
    cpu = r.get("cpu")
    if cpu:
        ours = sum(cpu["ours"].values())
        row(
            "CPU per single-event request, all of SessionHub's processes (ms)",
            f"{ours:.2f}",
            f"claude-mem {peer_cpu_ms(cpu['peer']):.2f}; ratio {cpu['ratio']:.2f}",
            f"ratio ≤ {TARGETS['cpu_vs_peer']:g}",
            cpu["ratio"] <= TARGETS["cpu_vs_peer"],
        )
    batch, raw = r.get("batch"), r.get("raw")
    ratio = batch["eps"] / raw["eps"] if batch and raw and raw["eps"] else None
    if batch:
        row(
            "batch ingest, 100 events per request (events/s)",
            _n(batch["eps"]),
            "",
            f"≥ {TARGETS['batch_vs_raw']:g} of raw",
            not batch["errors"] and ratio is not None and ratio >= TARGETS["batch_vs_raw"],
        )
    if raw:
        row(
            f"raw psycopg insert, same rows, 100 per transaction, {raw['writers']} writers "
            "(events/s)",
            f"batch ÷ raw {ratio:.2f}" if ratio is not None else "—",
            _n(raw["eps"]),
            "",
            None,
        )
    for label, cont in (r.get("continuity") or {}).items():
        at = "first prompt, " if cont.get("stage") == "prompt" else ""
        row(
            f"continuity, {at}{cont['sessions']:,} completed sessions, p50 / p95 / p99",
            f"{_n(cont['p50_ms'], 1)} / {_n(cont['p95_ms'], 1)} / {_n(cont['p99_ms'], 1)} ms",
            f"{cont['in_lookback']:,} in lookback, {cont['candidates_scored']:.0f} scored",
            "p99 ≤ 25 ms" if label == "big" else "",
            (cont["p99_ms"] <= TARGETS["continuity_p99_ms"] and not cont["failures"])
            if label == "big"
            else None,
        )
    mcp = r.get("mcp")
    if mcp:
        for label, title, target in (
            ("tools_list", "MCP tools/list, the framework's own cost per call", None),
            ("search", "MCP search_memory", TARGETS["mcp_search_p99_ms"]),
            ("get_session", "MCP get_session of one session found", None),
        ):
            found = mcp.get(label)
            if not found:
                continue
            detail = f"{found['requests']} calls"
            if found["answer_chars"]:
                detail += f", answer {found['answer_chars']:.0f} chars"
            if label == "search":
                detail += f", {found['hits']:.0f} hits"
            row(
                f"{title}, {mcp['sessions']:,} sessions in the team, p50 / p95 / p99",
                f"{_n(found['p50_ms'], 1)} / {_n(found['p95_ms'], 1)} / "
                f"{_n(found['p99_ms'], 1)} ms",
                detail,
                f"p99 ≤ {target:g} ms" if target else "",
                (found["p99_ms"] <= target and not found["failures"]) if target else None,
            )
    summary = r.get("summary")
    if summary:
        row(
            "session_end accepted → summary stored, under the fixed load, p50 / p95",
            f"{_n(summary['p50_s'], 2)} / {_n(summary['p95_s'], 2)} s",
            f"{summary['measured']} of {summary['sessions']} sessions"
            + (f", {summary['never']} never" if summary["never"] else ""),
            "p95 ≤ 2 s",
            summary["measured"] > 0
            and not summary["never"]
            and summary["p95_s"] <= TARGETS["summary_p95_s"],
        )
    if peer:
        lines.append("")
        lines.append(
            f"peer detail: claude-mem {_n(peer['rps'])} req/s (p50 {_n(peer['p50_ms'], 1)} ms, p99 "
            f"{_n(peer['p99_ms'], 1)} ms); SessionHub rounds "
            + ", ".join(_n(x) for x in single["rounds"])
            + "; claude-mem rounds "
            + ", ".join(_n(x) for x in peer["rounds"])
        )
    if single and single.get("cpu_ms"):
        lines.append("")
        lines.append("CPU ms per single-event request (median of rounds, all processes of a kind):")
        lines.append("  SessionHub: " + _cpu_text(single["cpu_ms"]))
        if peer and peer.get("cpu_ms"):
            lines.append("  claude-mem: " + _cpu_text(peer["cpu_ms"]))
    if batch and batch.get("cpu_ms"):
        lines.append("CPU ms per batch request of 100 (the worker's share: what it did meanwhile):")
        lines.append("  SessionHub: " + _cpu_text(batch["cpu_ms"]))
        raw = r.get("raw")
        if raw and raw.get("cpu_ms"):
            lines.append("  raw psycopg, per 100 rows: " + _cpu_text(raw["cpu_ms"]))
    if r.get("continuity_spread_days"):
        lines.append(
            f"continuity seed: one agent, ended_at spread evenly over the last "
            f"{r['continuity_spread_days']} days"
        )
    rounds = r.get("rounds") or []
    if len(rounds) > 1:
        lines.append("")
        lines.append(
            f"each figure above is the worst of {len(rounds)} rounds of the plan; every round:"
        )
        lines.extend(rounds_text(rounds))
    for note in r.get("notes", []):
        lines.append(f"note: {note}")
    return "\n".join(lines)


def main() -> int:
    global DB_NAME, REDIS_URL
    args = parse_args()
    DB_NAME = args.database
    REDIS_URL = f"{REDIS_URL.rsplit('/', 1)[0]}/{args.redis_db}"
    return Bench(args).run()


if __name__ == "__main__":
    sys.exit(main())
