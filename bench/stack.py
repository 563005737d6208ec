"""The production processes for bench/slow_clients.py and bench/redis_trouble.py:
a fresh PostgreSQL database, a private redis-server, the web server as deployed and
nginx with deploy/nginx.conf (started the way tests/reliability starts them), plus a
latency-measuring HTTP client. Nothing here imports Django settings."""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.reliability.helpers import (  # noqa: E402
    Nginx,
    RedisServer,
    service_env,
    stop_process,
    web_as_deployed,
)

__all__ = ["Nginx", "RedisServer", "stop_process", "web_as_deployed"]


def log(message: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def figures(ms: list[float]) -> dict[str, float]:
    return {
        "n": len(ms),
        "p50": round(percentile(ms, 50), 2),
        "p99": round(percentile(ms, 99), 2),
        "max": round(max(ms), 2) if ms else math.nan,
    }


@contextlib.contextmanager
def database(admin_dsn: str, name: str) -> Iterator[str]:
    """A fresh database ``name`` (dropped afterwards); yields its URL."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{admin_dsn.rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


def environment(database_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    env = service_env(DATABASE_URL=database_url, REDIS_URL=redis_url, **extra)
    return {k: v for k, v in env.items() if not k.startswith("SESSIONHUB_NPM")}


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


def tokens(env: dict[str, str], count: int, team: str = "bench") -> list[str]:
    """``count`` ingest tokens of one team, made by the project's own command."""
    made = []
    for _ in range(count):
        out = manage(env, "create_api_token", team, "--scopes", "ingest,read", "--create-team")
        made.append(next(line.strip() for line in out.splitlines() if line.startswith("shub_")))
    return made


def workdir(prefix: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    return path


def event() -> bytes:
    return json.dumps(
        {
            "event_id": f"bench-{uuid.uuid4().hex}",
            "kind": "prompt",
            "occurred_at": datetime.now(UTC).isoformat(),
            "agent_id": "bench",
            "session_id": f"bench-{uuid.uuid4().hex[:4]}",
            "text": "a prompt",
        }
    ).encode()


@dataclass
class Answer:
    status: int | None  # None: no answer within the timeout / connection failed
    ms: float


class Client:
    """One keep-alive HTTP/1.1 connection; reconnects after any failure."""

    def __init__(self, port: int, timeout: float = 10) -> None:
        self.port = port
        self.timeout = timeout
        self.conn: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body: bytes | None = None, token: str = "") -> Answer:
        headers = {"Host": "127.0.0.1"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if token:
            headers["Authorization"] = f"Bearer {token}"
        started = time.perf_counter()
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            self.conn.request(method, path, body=body, headers=headers)
            response = self.conn.getresponse()
            response.read()
            status: int | None = response.status
        except (OSError, http.client.HTTPException):
            status = None
            self.close()
        return Answer(status, (time.perf_counter() - started) * 1000)

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(OSError):
                self.conn.close()
        self.conn = None


def admin_dsn() -> str:
    return os.environ.get("BENCH_POSTGRES", "postgres://postgres@127.0.0.1:5432/postgres")


def dump(result: dict[str, Any], path: str | None) -> None:
    text = json.dumps(result, indent=2)
    print(text)
    if path:
        Path(path).write_text(text + "\n")
