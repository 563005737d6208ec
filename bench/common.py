"""Helpers for bench/run.py: processes, the machine, wrk, load generators and seeding.

Everything here runs either in the harness process or in a load-generator process that
the harness spawns; nothing imports Django, so the load never shares an interpreter with
the server it measures.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import http.client
import json
import math
import os
import platform
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
LUA = BENCH / "hooks.lua"

CWD = "/home/dev/src/bench"  # the project every benchmark session works in
TOOL_OUTPUT = "x" * 2000  # 2 KB of tool output in every PostToolUse body


# The peer: the claude-mem worker, a local memory service for Claude Code, from npm; run
# on Bun with no model and no vector store (the environment of claude_mem_env).
CLAUDE_MEM = "claude-mem@13.25.3"
BUN = "bun@1"


def claude_mem_install(folder: Path) -> tuple[Path, Path]:
    """Install the peer under ``folder`` (kept between runs): (its Bun, its plugin folder).

    Raises ``subprocess.CalledProcessError`` when npm cannot fetch a package."""

    def run(*command: str, cwd: Path = folder) -> str:
        return subprocess.run(command, cwd=cwd, check=True, capture_output=True, text=True).stdout

    folder.mkdir(parents=True, exist_ok=True)
    bun = folder / "node_modules" / ".bin" / "bun"
    if not bun.exists():
        run("npm", "init", "-y")
        run("npm", "install", "--silent", BUN)
    plugin = folder / "pkg" / "package" / "plugin"
    if not plugin.is_dir():
        archive = folder / run("npm", "pack", "--silent", CLAUDE_MEM).strip().splitlines()[-1]
        (folder / "pkg").mkdir(exist_ok=True)
        run("tar", "-xzf", str(archive), "-C", str(folder / "pkg"))
        # The worker imports zod, which the package leaves to its host to provide.
        run("npm", "install", "--silent", "--ignore-scripts", "zod@4", cwd=plugin)
    return bun, plugin


def claude_mem_env(home: Path, port: int) -> dict[str, str]:
    """The peer's environment: its data under ``home``, loopback ``port``, no extras."""
    return {
        **os.environ,
        "HOME": str(home),
        "CLAUDE_MEM_CHROMA_ENABLED": "false",
        "CLAUDE_MEM_TRANSCRIPTS_ENABLED": "false",
        "CLAUDE_MEM_WORKER_PORT": str(port),
    }


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- statistics --------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


# --- processes ---------------------------------------------------------------------------


@dataclass
class Group:
    """A process started in its own process group, so stopping it stops its children."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        # The group is signalled even when its leader is gone: a script that started a
        # server in the background (the peer's) exits and leaves the server in the group.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _group_alive(self.proc.pid):
            time.sleep(0.1)
        # Whatever is still in the group (forked workers, a stuck child) goes now.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Processes:
    """Every process the harness started; ``stop_all`` is called from a ``finally``."""

    logdir: Path
    groups: list[Group] = field(default_factory=list)

    def start(
        self, name: str, cmd: Sequence[str], *, env: dict[str, str], cwd: Path = REPO
    ) -> Group:
        log_path = self.logdir / f"{name}.log"
        handle = log_path.open("ab")
        proc = subprocess.Popen(
            list(cmd),
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        handle.close()
        group = Group(name, proc, log_path)
        self.groups.append(group)
        return group

    def stop_all(self) -> None:
        for group in reversed(self.groups):
            try:
                group.stop()
            except Exception as exc:  # noqa: BLE001 - stopping the rest matters more
                log(f"could not stop {group.name}: {exc}")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(url: str, *, timeout: float, group: Group | None = None) -> None:
    """Wait until ``url`` answers 200 (or the process died)."""
    host, port, path = split_url(url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if group is not None and not group.alive():
            raise RuntimeError(f"{group.name} exited:\n{group.tail()}")
        try:
            conn = http.client.HTTPConnection(host, port, timeout=2)
            conn.request("GET", path)
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout:.0f} s")


def split_url(url: str) -> tuple[str, int, str]:
    match = re.match(r"http://([^:/]+):(\d+)(/.*)?$", url)
    if not match:
        raise ValueError(f"not an http://host:port URL: {url}")
    return match.group(1), int(match.group(2)), match.group(3) or "/"


def post_json(base: str, path: str, body: Any, token: str, timeout: float = 30) -> tuple[int, Any]:
    """One POST with a fresh connection; (status, decoded JSON or text)."""
    host, port, _ = split_url(base)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(
            "POST",
            path,
            body=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        )
        response = conn.getresponse()
        raw = response.read()
    finally:
        conn.close()
    try:
        return response.status, json.loads(raw)
    except ValueError:
        return response.status, raw.decode(errors="replace")


# --- the machine and the versions ----------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_gib = math.nan
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = int(line.split()[1]) / 1024 / 1024
                break
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return {
        "cores": cores,
        "memory_gib": round(mem_gib, 1),
        "cpu": cpu,
        "kernel": platform.release(),
    }


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "?"


def commit() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return head + ("+uncommitted changes" if dirty else "")


def versions(pg_dsn: str, redis_url: str) -> dict[str, str]:
    found = {
        "python": platform.python_version(),
        # Which build: an interpreter compiled without profile-guided optimisation runs
        # every Python process of the run slower (the Makefile's PYTHON).
        "python_executable": os.path.realpath(sys.executable),
        "django": _version("Django"),
        "djangorestframework": _version("djangorestframework"),
        "granian": _version("granian"),
        "gunicorn": _version("gunicorn"),
        "celery": _version("celery"),
        "psycopg": _version("psycopg"),
        "commit": commit(),
    }
    try:
        with psycopg.connect(pg_dsn, connect_timeout=3) as conn:
            found["postgresql"] = conn.execute("SHOW server_version").fetchone()[0]
    except psycopg.Error:
        found["postgresql"] = "?"
    try:
        import redis

        found["redis"] = redis.Redis.from_url(redis_url).info("server")["redis_version"]
    except Exception:  # noqa: BLE001
        found["redis"] = "?"
    wrk = shutil.which("wrk")
    if wrk:
        out = subprocess.run([wrk, "--version"], capture_output=True, text=True).stdout
        match = re.search(r"wrk (\S+)", out)
        found["wrk"] = match.group(1) if match else "?"
    return found


# --- wrk -------------------------------------------------------------------------------------


def ensure_wrk() -> str | None:
    """The wrk binary, installed from Debian when missing (the harness runs as root)."""
    return _ensure_binary("wrk", "wrk")


def ensure_nginx() -> str | None:
    """The nginx binary (the front production runs before the web server), installed from Debian
    when missing."""
    return _ensure_binary("nginx", "nginx", "/usr/sbin/nginx")


def _ensure_binary(name: str, package: str, *places: str) -> str | None:
    found = shutil.which(name) or next((p for p in places if Path(p).exists()), None)
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        log(f"{name} is not installed and cannot be installed here (needs root and apt-get)")
        return None
    log(f"installing {name}: apt-get update && apt-get install -y {package}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", package]):
        result = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            log(f"{' '.join(cmd)} failed:\n{result.stderr[-2000:]}")
            return None
    return shutil.which(name) or next((p for p in places if Path(p).exists()), None)


def _port_open(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _apt_install(*packages: str) -> bool:
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return False
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
        if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
            return False
    return True


def ensure_services() -> None:
    """PostgreSQL on 5432 and Redis on 6379 of 127.0.0.1, started (and installed from
    Debian) the way .ci/run does when they are not there."""
    if not _port_open(5432):
        log("PostgreSQL is not running: installing/starting it")
        if not shutil.which("pg_ctlcluster"):
            _apt_install("postgresql")
        versions_dir = Path("/etc/postgresql")
        if versions_dir.is_dir():
            version = sorted(
                versions_dir.iterdir(), key=lambda p: [int(x) for x in p.name.split(".")]
            )[-1].name
            subprocess.run(
                ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "start"],
                capture_output=True,
            )
            for _ in range(30):
                if _port_open(5432):
                    break
                time.sleep(1)
            hba = versions_dir / version / "main" / "pg_hba.conf"
            probe = subprocess.run(
                ["psql", "-h", "127.0.0.1", "-U", "postgres", "-c", "select 1"],
                capture_output=True,
            )
            if probe.returncode != 0 and hba.exists():
                trust = "host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n"
                hba.write_text(trust + hba.read_text())
                subprocess.run(
                    ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "reload"],
                    capture_output=True,
                )
    if not _port_open(6379):
        log("Redis is not running: installing/starting it")
        if not shutil.which("redis-server"):
            _apt_install("redis-server")
        Path("/var/lib/redis").mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                "redis-server",
                "--daemonize",
                "yes",
                "--bind",
                "127.0.0.1",
                "--port",
                "6379",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                "/var/lib/redis",
            ],
            capture_output=True,
        )
        for _ in range(30):
            if _port_open(6379):
                break
            time.sleep(1)
    if not _port_open(5432) or not _port_open(6379):
        raise SystemExit("PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379) are needed")


def ensure_node() -> str:
    """npm for the peer's install script; '' when there, else why it is not."""
    if shutil.which("npm") and shutil.which("node"):
        return ""
    log("npm is not installed: apt-get install -y nodejs npm")
    if _apt_install("nodejs", "npm") and shutil.which("npm"):
        return ""
    return "npm (needed to install the claude-mem worker) is missing and could not be installed"


@dataclass
class WrkResult:
    requests: int
    seconds: float
    rps: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    errors: dict[str, int]

    @property
    def bad(self) -> int:
        return sum(self.errors.values())


def child_pids(pid: int) -> list[int]:
    """The direct children of a process, from each of its threads' ``children`` list;
    none once it has exited (a process may end while its tree is being walked)."""
    found: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return found
    for task in tasks:
        with contextlib.suppress(OSError, ValueError):
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


def cpu_seconds() -> dict[str, float]:
    """CPU seconds (user and system) used so far by each kind of process on this machine:
    ``web`` (``python -m sessionhub.serve`` or gunicorn), ``front`` (nginx), ``worker``
    (Celery), ``postgres``, ``redis``, ``wrk``, ``peer`` (the claude-mem worker: bun or
    node), ``other``. A process that ended counts
    through the parent that waited for it (its children's times, which the kernel adds to
    the parent's): PostgreSQL's backends come and go as the application's connections
    do (``CONN_MAX_AGE``), and a backend that exited during a round would otherwise take
    its whole life's CPU out of the sum, making the round's PostgreSQL share too small or
    leave it out."""
    tick = os.sysconf("SC_CLK_TCK")
    used: dict[str, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        name, rest = stat.split("(", 1)[1].rsplit(")", 1)
        fields = rest.split()
        # utime, stime, then cutime, cstime: the reaped children's, counted once (a dead
        # process is in no other row).
        seconds = sum(int(x) for x in fields[11:15]) / tick
        if name == "postgres" or command.startswith("postgres"):
            kind = "postgres"
        elif "sessionhub.serve" in command or "gunicorn" in command or "granian" in command:
            kind = "web"
        elif "celery" in command:
            kind = "worker"
        elif name == "nginx":
            kind = "front"
        elif name.startswith("redis"):
            kind = "redis"
        elif name == "wrk":
            kind = "wrk"
        elif name in ("bun", "node"):
            kind = "peer"
        else:
            kind = "other"
        used[kind] = used.get(kind, 0.0) + seconds
    return used


def cpu_per_request(
    before: dict[str, float], after: dict[str, float], requests: int
) -> dict[str, float]:
    """Milliseconds of CPU per request by kind of process, between two ``cpu_seconds``."""
    if not requests:
        return {}
    return {
        kind: round((after.get(kind, 0.0) - before.get(kind, 0.0)) * 1000 / requests, 3)
        for kind in ("front", "web", "postgres", "worker", "redis", "peer", "wrk")
        if after.get(kind, 0.0) > before.get(kind, 0.0)
    }


def run_wrk(
    url: str,
    *,
    seconds: float,
    env: dict[str, str],
    threads: int = 2,
    connections: int = 8,
    timeout: float = 10,
) -> WrkResult:
    """wrk with bench/hooks.lua; errors (non-2xx, socket errors) are counted, not hidden."""
    cmd = [
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{max(1, round(seconds))}s",
        f"--timeout={timeout:g}s",
        "-s",
        str(LUA),
        url,
    ]
    run_env = {**os.environ, "NONCE": secrets.token_hex(4), **env}
    result = subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=seconds + 120)
    line = next((x for x in result.stdout.splitlines() if x.startswith("BENCH ")), None)
    if line is None:
        raise RuntimeError(f"wrk gave no result:\n{result.stdout}\n{result.stderr}")
    data = json.loads(line[len("BENCH ") :])
    secs = data["duration_us"] / 1e6
    return WrkResult(
        requests=data["requests"],
        seconds=secs,
        rps=data["requests"] / secs if secs else 0.0,
        p50_ms=data["p50_us"] / 1000,
        p90_ms=data["p90_us"] / 1000,
        p99_ms=data["p99_us"] / 1000,
        errors={k: data[k] for k in ("connect", "read", "write", "status", "timeout") if data[k]},
    )


# --- profiles (py-spy) -------------------------------------------------------------------------


def py_spy() -> str | None:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return found if Path(found).exists() else None


_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^():]*)(?::(?P<line>\d+))?\)$")


def _short(path: str) -> str:
    for marker in ("/site-packages/", "/lib/python3"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path.replace(str(REPO) + "/", "")


_LEAF_KINDS = (
    ("waiting on PostgreSQL (round trips, commits, locks)", ("psycopg/connection.py:",)),
    ("psycopg client work (adapting parameters, sending)", ("psycopg/",)),
    ("Redis (throttle counter, Celery publish)", ("redis/", "kombu/")),
    ("Django ORM (compiling SQL, model instances)", ("django/db/",)),
    ("JSON encode / decode", ("json/",)),
    ("DRF (dispatch, parsing, rendering)", ("rest_framework/",)),
    ("Django request handling (middleware, handlers)", ("django/",)),
    ("SessionHub's own code", ("lifecycle/", "memory/", "sessionhub/")),
    (
        "sockets and server loops (gunicorn, selectors)",
        ("gunicorn/", "socket.py:", "selectors.py:"),
    ),
)

_INCLUSIVE_AREAS = (
    ("lifecycle.ingest.store.events_store", ("lifecycle/ingest/store.py:events_store",)),
    ("session lock (SELECT ... FOR UPDATE)", ("lifecycle/services.py:sessions_resolve",)),
    ("event INSERT", ("lifecycle/services.py:insert_events",)),
    ("transaction commit", ("django/db/transaction.py:Atomic.__exit__",)),
    ("per-session UPDATE (Session.save)", ("django/db/models/base.py:Model.save",)),
    ("throttling (sessionhub/throttling.py)", ("sessionhub/throttling.py:",)),
    ("authentication", ("sessionhub/authentication.py:",)),
    ("gateway adapters", ("lifecycle/adapters/",)),
    ("redaction", ("sessionhub/text/redaction/",)),
    ("queueing Celery tasks", ("celery/app/task.py:",)),
    ("JSON decode of the request", ("sessionhub/parsers.py:",)),
    ("rendering the answer", ("rest_framework/renderers.py:",)),
)


def profile_summary(raw: Path, *, focus: Sequence[str], top: int = 25) -> str:
    """A py-spy raw (collapsed stacks) file summed up, as shares of the samples taken inside
    the work of interest (stacks with a ``focus`` frame: a request, a task); the other
    samples are idle threads and server loops. Wall clock: waiting counts."""
    self_time: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    kinds: dict[str, int] = {}
    areas: dict[str, int] = {}
    total = busy = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        names = []
        for frame in stack.split(";"):
            frame = frame.strip()
            if frame.startswith(("process ", "thread ")):
                continue
            match = _FRAME.match(frame)
            names.append(f"{_short(match.group('file'))}:{match.group('func')}" if match else frame)
        joined = ";".join(names)
        if not names or not any(needle in joined for needle in focus):
            continue
        busy += count
        leaf = names[-1]
        self_time[leaf] = self_time.get(leaf, 0) + count
        kind = next(
            (k for k, needles in _LEAF_KINDS if leaf.startswith(needles)),
            "other (standard library, regex, ...)",
        )
        kinds[kind] = kinds.get(kind, 0) + count
        for name in set(names):
            inclusive[name] = inclusive.get(name, 0) + count
        for area, needles in _INCLUSIVE_AREAS:
            if any(needle in joined for needle in needles):
                areas[area] = areas.get(area, 0) + count
    if not busy:
        return f"{total} samples, none inside {', '.join(focus)}"

    def table(title: str, counts: dict[str, int], only_ours: bool = False) -> list[str]:
        rows = sorted(counts.items(), key=lambda kv: -kv[1])
        if only_ours:
            rows = [kv for kv in rows if kv[0].startswith(("lifecycle/", "memory/", "sessionhub/"))]
        return [title] + [f"  {100 * v / busy:5.1f}%  {k}" for k, v in rows[:top]]

    lines = [f"{busy} of {total} samples inside {' / '.join(focus)}; percentages are of those"]
    lines += table("where the time goes, by the frame running (adds up to 100%):", kinds)
    lines += table("parts of the path, inclusive (they overlap):", areas)
    lines += table("SessionHub functions, inclusive:", inclusive, only_ours=True)
    lines += table("leaf functions (self):", self_time)
    return "\n".join(lines)


# --- payloads --------------------------------------------------------------------------------


def post_tool_use(session_id: str, tool_use_id: str, command: str) -> dict[str, Any]:
    """A Claude Code PostToolUse hook body (2 KB of tool output)."""
    return {
        "session_id": session_id,
        "transcript_path": f"/home/dev/.claude/projects/bench/{session_id}.jsonl",
        "cwd": CWD,
        "permission_mode": "default",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_response": {"stdout": TOOL_OUTPUT, "stderr": ""},
        "tool_use_id": tool_use_id,
    }


def session_ids(nonce: str, count: int = 20) -> list[str]:
    return [f"{nonce}-0000-4000-8000-{i:012d}" for i in range(1, count + 1)]


# --- open-loop load at a fixed rate ------------------------------------------------------------


def _request_bytes(path: str, host: str, token: str, body: bytes) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


async def _open_loop(
    base: str, path: str, token: str, rate: float, seconds: float, nonce: str, ready: Any = None
) -> dict[str, Any]:
    host, port, _ = split_url(base)
    sids = session_ids(nonce)
    total = int(rate * seconds)
    latencies: list[float] = []
    by_second: dict[int, list[float]] = {}
    lags: list[float] = []
    failures: dict[str, int] = {}
    loop = asyncio.get_running_loop()

    async def one(i: int, due: float) -> None:
        body = json.dumps(
            # No underscore after the hex nonce (see hooks.lua).
            post_tool_use(sids[i % len(sids)], f"toolu_{nonce}ol{i}", f"ls -la {i}")
        ).encode()
        lags.append(loop.time() - due)
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 10)
            writer.write(_request_bytes(path, host, token, body))
            await writer.drain()
            raw = await asyncio.wait_for(reader.read(), 30)  # the server closes after one
            writer.close()
        except (OSError, TimeoutError) as exc:
            failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1
            return
        # Latency from when the request was due, not from when it went out: a generator
        # or server that falls behind cannot hide the wait (no coordinated omission).
        latencies.append(loop.time() - due)
        by_second.setdefault(int(due - start), []).append(latencies[-1] * 1000)
        status = raw[9:12]
        if status != b"200":
            key = f"http_{status.decode(errors='replace')}"
            failures[key] = failures.get(key, 0) + 1

    tasks = []
    if ready is not None:
        ready.wait(timeout=120)  # the other measuring processes are up (below)
    # The generator's own collector stays off for the minute: a full collection over
    # the minute's finished requests paused its event loop for 45-63 ms (half-way and
    # at the end), and every request due meanwhile was counted that much slower, in
    # the same seconds of every run. What the minute leaves is collected after it.
    gc.collect()
    gc.disable()
    try:
        start = loop.time() + 0.05
        for i in range(total):
            due = start + i / rate
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.ensure_future(one(i, due)))
        await asyncio.gather(*tasks)
        elapsed = loop.time() - start
    finally:
        gc.enable()
    return {
        "sent": total,
        "ok": len(latencies) - sum(v for k, v in failures.items() if k.startswith("http_")),
        "seconds": elapsed,
        "latencies_ms": [x * 1000 for x in latencies],
        "send_lag_p99_ms": percentile(lags, 99) * 1000,
        "failures": failures,
        # Each second of the run (counted from the first request due) with its slowest
        # request: whether the tail is spread out or comes in bursts.
        "worst_by_second": {second: max(ms) for second, ms in sorted(by_second.items())},
    }


def open_loop_process(
    base: str,
    path: str,
    token: str,
    rate: float,
    seconds: float,
    nonce: str,
    out: Any,
    ready: Any = None,
) -> None:
    """Entry point of the fixed-rate load process; puts its result on the ``out`` queue.

    ``ready`` (a ``multiprocessing.Barrier``), when given, holds the first request back
    until every process that measures alongside has started, so that no process's
    start-up (its interpreter, imports and connections) shares the cores with the server
    inside the measured minute."""
    out.put(asyncio.run(_open_loop(base, path, token, rate, seconds, nonce, ready)))


# --- the summary probe: session_end accepted -> summary stored ------------------------------


def summary_probe_process(
    base: str,
    token: str,
    dsn: str,
    team_id: int,
    seconds: float,
    every: float,
    nonce: str,
    out: Any,
    ready: Any = None,
) -> None:
    """Runs short Claude Code sessions while the load runs; for each, the time from its
    SessionEnd being accepted to its summary row (built after the end) being visible.
    ``ready``: as for :func:`open_loop_process`, waited on once connected. Its poll of
    the database names the sessions by their full key (team, source, id), so it reads
    them by index: by id alone it read every session of the table, 10 ms apart, while
    the load ran (after the continuity seed, 100,000 of them: tens of ms of the
    database's CPU a poll, counted against the server's latency)."""
    pending: dict[str, float] = {}
    done: dict[str, float] = {}
    errors: list[str] = []
    started: dict[str, float] = {}
    serial = 0
    conn = psycopg.connect(dsn, autocommit=True)
    query = (
        "SELECT se.external_id, extract(epoch FROM su.updated_at) FROM lifecycle_session se "
        "JOIN memory_summary su ON su.session_id = se.id "
        "WHERE se.team_id = %s AND se.source = 'claude-code' AND se.external_id = ANY(%s) "
        "AND se.status = 'ended' "
        "AND su.events_seen >= se.event_count"
    )
    if ready is not None:
        ready.wait(timeout=120)
    t0 = time.monotonic()
    next_start = t0
    next_end: list[tuple[float, str]] = []
    try:
        while True:
            now = time.monotonic()
            running = now - t0 < seconds
            if running and now >= next_start:
                serial += 1
                sid = f"{nonce}-5000-4000-8000-{serial:012d}"
                status, answer = _probe_post(base, _probe_body(sid), token)
                if status != 200:
                    errors.append(f"start {status} {str(answer)[:200]}")
                else:
                    started[sid] = now
                    next_end.append((now + 1.0, sid))
                next_start += every
            for due, sid in list(next_end):
                if time.monotonic() >= due:
                    next_end.remove((due, sid))
                    end = _hook(sid, "SessionEnd", reason="prompt_input_exit")
                    status, answer = _probe_post(base, end, token)
                    if status != 200:
                        errors.append(f"end {status} {str(answer)[:200]}")
                    else:
                        pending[sid] = time.monotonic()
            if pending:
                for sid, _updated in conn.execute(query, [team_id, list(pending)]).fetchall():
                    done[sid] = time.monotonic() - pending.pop(sid)
            if not running and not next_end:
                waited = time.monotonic() - t0 - seconds
                if not pending or waited > 30:
                    break
            time.sleep(0.01)
    finally:
        conn.close()
    out.put(
        {
            "sessions": len(started),
            "seconds_to_summary": sorted(done.values()),
            "never": len(pending),
            "errors": errors[:10],
        }
    )


def _probe_post(base: str, body: Any, token: str) -> tuple[int, Any]:
    """A probe request whose failure (a timeout on a saturated server) is a recorded
    error, not the end of the probe."""
    try:
        return post_json(base, "/api/v1/hooks/claude-code", body, token)
    except OSError as exc:
        return 0, f"{type(exc).__name__}: {exc}"


def _hook(sid: str, name: str, **fields: Any) -> dict[str, Any]:
    return {
        "session_id": sid,
        "transcript_path": f"/home/dev/.claude/projects/bench/{sid}.jsonl",
        "cwd": CWD,
        "permission_mode": "default",
        "hook_event_name": name,
        **fields,
    }


def _probe_body(sid: str) -> list[dict[str, Any]]:
    """A short session up to its last turn, posted as one batch: start, a prompt, five
    tool uses, the Stop with the final message."""
    events = [
        _hook(sid, "SessionStart", source="startup", model="claude-sonnet-4-5"),
        _hook(
            sid,
            "UserPromptSubmit",
            prompt="Tune the orders query in billing: it scans the whole table. "
            "TODO: add an index on orders.created_at and check task-17 afterwards.",
        ),
    ]
    for i in range(5):
        events.append(
            {
                **post_tool_use(sid, f"toolu_{sid}_{i}", f"psql -c 'explain select {i}'"),
                "tool_response": {"stdout": "Seq Scan on orders " * 40, "stderr": ""},
            }
        )
    events.append(
        _hook(
            sid,
            "Stop",
            stop_hook_active=False,
            last_assistant_message="Added the index on orders.created_at; the query now "
            "uses it. task-17 is still open: the nightly report needs the same change.",
        )
    )
    return events


# --- PostgreSQL --------------------------------------------------------------------------------


def recreate_database(admin_dsn: str, name: str) -> None:
    """Drop (sessions using it are cut off) and create the benchmark database: empty."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


_ZERO_BY_TYPE = {
    "boolean": False,
    "smallint": 0,
    "integer": 0,
    "bigint": 0,
    "double precision": 0.0,
    "real": 0.0,
    "numeric": 0,
    "text": "",
    "character varying": "",
    "jsonb": Jsonb({}),
    "json": "{}",
}


def copy_rows(conn: psycopg.Connection, table: str, rows: Iterable[dict[str, Any]]) -> int:
    """COPY dicts into a table. Required columns the rows do not name get a zero of their
    type, so a column added to a model later does not break the seeding."""
    iterator = iter(rows)
    try:
        first = next(iterator)
    except StopIteration:
        return 0
    info = conn.execute(
        "SELECT column_name, data_type, is_nullable, column_default, is_identity "
        "FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position",
        [table],
    ).fetchall()
    fill: dict[str, Any] = {}
    for name, data_type, nullable, default, identity in info:
        if name in first or nullable == "YES" or default is not None or identity == "YES":
            continue
        if data_type.startswith("timestamp"):
            fill[name] = datetime.now(UTC)
        elif data_type == "uuid":
            fill[name] = None  # filled per row below
        else:
            fill[name] = _ZERO_BY_TYPE.get(data_type, "")
    columns = list(first) + list(fill)
    count = 0
    with conn.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in _chain(first, iterator):
            values = [row[c] for c in first]
            values += [uuid.uuid4() if v is None else v for v in fill.values()]
            copy.write_row(values)
            count += 1
    return count


def _chain(first: dict[str, Any], rest: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    yield first
    yield from rest


# --- raw inserts: the database's own limit --------------------------------------------------


RAW_TABLE = "bench_raw_event"
RAW_COLUMNS = (
    "team_id",
    "session_id",
    "event_id",
    "kind",
    "source",
    "hook",
    "phase",
    "occurred_at",
    "received_at",
    "facts",
    "payload",
    "redaction_version",
    "orphan_key",
)


def raw_table_create(dsn: str) -> None:
    """A copy of the event table: same columns, defaults, indexes and foreign keys."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {RAW_TABLE}")
        conn.execute(f"CREATE TABLE {RAW_TABLE} (LIKE lifecycle_lifecycleevent INCLUDING ALL)")
        conn.execute(
            f"ALTER TABLE {RAW_TABLE} ADD FOREIGN KEY (team_id) REFERENCES sessionhub_team (id)"
        )
        conn.execute(
            f"ALTER TABLE {RAW_TABLE} ADD FOREIGN KEY (session_id) "
            "REFERENCES lifecycle_session (id)"
        )


def raw_writer_process(
    dsn: str,
    team_id: int,
    session_pks: list[str],
    session_ext: list[str],
    seconds: float,
    batch: int,
    writer: int,
    out: Any,
) -> None:
    """Insert batches of PostToolUse rows straight into the copy table, one transaction per
    batch, the same statement shape as SessionHub's (multi-row VALUES, ON CONFLICT DO
    NOTHING); the row payloads are built and JSON-encoded per batch as a server would."""
    one = "(" + ", ".join(["%s"] * len(RAW_COLUMNS)) + ")"
    sql = (
        f"INSERT INTO {RAW_TABLE} ({', '.join(RAW_COLUMNS)}) VALUES "
        + ", ".join([one] * batch)
        + " ON CONFLICT (team_id, event_id) DO NOTHING"
    )
    nonce = secrets.token_hex(4)
    rows = 0
    batches = 0
    with psycopg.connect(dsn) as conn:
        conn.prepare_threshold = 0
        start = time.monotonic()
        deadline = start + seconds
        while time.monotonic() < deadline:
            k = batches % len(session_pks)
            now = datetime.now(UTC)
            params: list[Any] = []
            for i in range(batch):
                tool_use_id = f"toolu_raw_{nonce}t{writer}_{batches}_{i}"
                body = post_tool_use(session_ext[k], tool_use_id, f"ls -la {batches}_{i}")
                params += [
                    team_id,
                    session_pks[k],
                    f"raw:{writer}:{nonce}:{batches}:{i}",
                    "tool_use",
                    "claude-code",
                    "PostToolUse",
                    "post",
                    now,
                    now,
                    Jsonb({"tool_name": "Bash", "failed": False}),
                    Jsonb(body),
                    1,
                    "",
                ]
            with conn.transaction():
                conn.execute(sql, params)
            rows += batch
            batches += 1
        elapsed = time.monotonic() - start
    out.put({"rows": rows, "seconds": elapsed})


# --- seeding completed sessions for continuity -----------------------------------------------

# What the first prompt of each asking session says (bench/run.py, continuity's prompt stage):
# words of the seeded summaries and topics, and words none of them has.
FIRST_PROMPT = (
    "The nightly billing export to parquet fails after the postgres migration; "
    "check the retries in the celery worker and fix the schema before the release"
)

TOPICS = (
    "orders billing invoices postgres index migration query planner latency cache redis "
    "celery worker retries deploy kubernetes helm terraform dashboard charts auth tokens "
    "oauth webhook stripe refunds reports nightly export csv parquet schema pipeline "
    "alerts grafana logging tracing pagination search elasticsearch typescript react"
).split()


def seed_completed_sessions(
    conn: psycopg.Connection,
    *,
    team_id: int,
    agent_id: str,
    count: int,
    start_serial: int,
    days: float,
    now: datetime,
) -> int:
    """Completed sessions of one agent with features, summaries and a few pins, their
    ``ended_at`` spread evenly over the last ``days`` days; COPY straight into the tables."""
    import random

    rng = random.Random(start_serial)
    sessions: list[dict[str, Any]] = []
    features: list[dict[str, Any]] = []
    summaries: list[dict[str, Any]] = []
    pins: list[dict[str, Any]] = []
    for n in range(start_serial, start_serial + count):
        pk = uuid.uuid4()
        ended = now - timedelta(seconds=rng.uniform(60, days * 86400))
        started = ended - timedelta(minutes=rng.uniform(5, 120))
        events = rng.randint(20, 400)
        sessions.append(
            {
                "id": pk,
                "team_id": team_id,
                "agent_id": agent_id,
                "source": "claude-code",
                "external_id": f"seed-{n:08d}-0000-4000-8000-000000000000",
                "session_key": "",
                "channel": "cli",
                "cwd": CWD,
                "project": CWD,
                "model": "claude-sonnet-4-5",
                "status": "ended",
                "started_at": started,
                "ended_at": ended,
                "first_event_at": started,
                "last_event_at": ended,
                "end_reason": "prompt_input_exit",
                "end_detail": "prompt_input_exit",
                "recovered": False,
                "has_start": True,
                "in_compaction": False,
                "suspend_count": 0,
                "suspended_seconds": 0.0,
                "event_count": events,
                "prompt_count": events // 20 + 1,
                "turn_count": events // 20 + 1,
                "tool_use_count": events - 2 * (events // 20 + 1),
                "compaction_count": 0,
                "previous_external_id": "",
                "successor_external_id": "",
                "memory_cursor": 0,
                "created_at": started,
                "updated_at": ended,
            }
        )
        topics = rng.sample(TOPICS, 20)
        pending = [
            {
                "id": f"task-{rng.randint(1, 999)}",
                "text": f"TODO: follow up on the {topics[j]} change before the release.",
                "source": "final_message",
            }
            for j in range(rng.randint(0, 3))
        ]
        features.append(
            {
                "team_id": team_id,
                "session_id": pk,
                "hot_topics": Jsonb(topics),
                "active_projects": Jsonb([CWD]),
                "pending_tasks": Jsonb(pending),
                "done_tasks": Jsonb([f"task-{rng.randint(1, 999)}"]),
                "updated_at": ended,
            }
        )
        summaries.append(
            {
                "team_id": team_id,
                "session_id": pk,
                "request": f"Look into {topics[0]} and {topics[1]} for the {topics[2]} service.",
                "investigated": f"Read the {topics[3]} code and its tests; ran the checks.",
                "learned": f"The {topics[4]} path does a query per row.",
                "completed": f"Fixed the {topics[0]} handling and added a regression test.",
                "next_steps": f"Roll the {topics[1]} change out and watch {topics[5]}.",
                "final_message": "Done: the change is in and the tests pass.",
                "method": "extractive",
                "fallback_reason": "",
                "llm_tokens": 0,
                "events_seen": events,
                "created_at": ended,
                "updated_at": ended,
                "redaction_version": 1,
            }
        )
        if n % 10 == 0:
            for j in range(2):
                pins.append(
                    {
                        "uid": uuid.uuid4(),
                        "team_id": team_id,
                        "agent_id": agent_id,
                        "label": f"{topics[j]} note {n}",
                        "content": f"Remember: {topics[j]} needs the {topics[j + 2]} flag.",
                        "priority": "critical" if j == 0 and n % 30 == 0 else "normal",
                        "pinned_at": started,
                        "unpinned_at": ended,
                        "origin_session_id": pk,
                        "redaction_version": 1,
                        "updated_at": ended,
                    }
                )
    copy_rows(conn, "lifecycle_session", sessions)
    copy_rows(conn, "memory_sessionfeatures", features)
    copy_rows(conn, "memory_summary", summaries)
    copy_rows(conn, "memory_pin", pins)
    return count


def seed_new_sessions(
    conn: psycopg.Connection, *, team_id: int, agent_id: str, names: list[str], now: datetime
) -> None:
    """Sessions that just started (their SessionStart stored): the ones that ask."""
    copy_rows(
        conn,
        "lifecycle_session",
        (
            {
                "id": uuid.uuid4(),
                "team_id": team_id,
                "agent_id": agent_id,
                "source": "claude-code",
                "external_id": name,
                "channel": "cli",
                "cwd": CWD,
                "project": CWD,
                "status": "active",
                "started_at": now,
                "first_event_at": now,
                "last_event_at": now,
                "has_start": True,
                "event_count": 1,
                "created_at": now,
                "updated_at": now,
            }
            for name in names
        ),
    )


# Questions an agent asks its team's memory, in the benchmark sessions' own words (their
# summaries and topics are drawn from TOPICS): a few words each, as the tool asks for.
MCP_QUERIES = (
    "celery retries for the billing export",
    "postgres index migration planner",
    "stripe webhook refunds",
    "nightly parquet export schema",
    "redis cache latency",
    "oauth tokens auth",
    "kubernetes helm deploy terraform",
    "grafana alerts tracing",
    "elasticsearch search pagination",
    "invoices reports csv",
    "orders dashboard charts",
    "billing",
)
MCP_VERSION = "2026-07-28"


def mcp_call(base: str, token: str, method: str, params: dict[str, Any]) -> tuple[int, Any]:
    """One MCP request in the per-request envelope (what Claude Code sends), on a fresh
    connection; (status, decoded JSON)."""
    host, port, _ = split_url(base)
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {token}",
        "MCP-Protocol-Version": MCP_VERSION,
        "Mcp-Method": method,
    }
    if method == "tools/call":
        headers["Mcp-Name"] = params["name"]
    meta = {
        "io.modelcontextprotocol/protocolVersion": MCP_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "sessionhub-bench", "version": "1"},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request("POST", "/api/v1/mcp", body=json.dumps(body).encode(), headers=headers)
        response = conn.getresponse()
        raw = response.read()
    finally:
        conn.close()
    try:
        return response.status, json.loads(raw)
    except ValueError:
        return response.status, raw.decode(errors="replace")


def mcp_process(base: str, token: str, calls: list[tuple[str, dict[str, Any]]], out: Any) -> None:
    """Make the MCP calls one at a time; latencies in ms, the size of each answer, and
    the failures (an HTTP error, a JSON-RPC error, a tool error)."""
    latencies: list[float] = []
    sizes: list[int] = []
    hits: list[int] = []
    failures: list[str] = []
    for method, params in calls:
        started = time.perf_counter()
        status, answer = mcp_call(base, token, method, params)
        elapsed = (time.perf_counter() - started) * 1000
        result = answer.get("result") if isinstance(answer, dict) else None
        if status != 200 or not isinstance(result, dict) or result.get("isError"):
            failures.append(f"{status} {str(answer)[:200]}")
            continue
        latencies.append(elapsed)
        if method == "tools/call":
            text = result["content"][0]["text"]
            sizes.append(len(text))
            hits.append(len(json.loads(text).get("hits", [])))
    out.put({"latencies_ms": latencies, "sizes": sizes, "hits": hits, "failures": failures[:10]})


def continuity_process(
    base: str, token: str, names: list[str], ask: dict[str, Any], seconds: float, out: Any
) -> None:
    """Ask continuity once per new session, one request at a time, with ``ask`` in the
    body (``keywords`` at the start, ``prompt`` at the first prompt); latencies in ms.
    With ``seconds`` > 0, stop when that time is up."""
    latencies: list[float] = []
    failures: list[str] = []
    scored: list[int] = []
    deadline = time.monotonic() + seconds if seconds > 0 else math.inf
    for name in names:
        if time.monotonic() > deadline:
            break
        body = {"source": "claude-code", "session_id": name, **ask}
        started = time.perf_counter()
        status, answer = post_json(base, "/api/v1/continuity", body, token)
        elapsed = (time.perf_counter() - started) * 1000
        if status != 200:
            failures.append(f"{status} {str(answer)[:200]}")
            continue
        latencies.append(elapsed)
        scored.append(int(answer.get("candidates_scored", 0)))
    out.put({"latencies_ms": latencies, "failures": failures[:10], "scored": scored})
