"""Redis hung and Redis down under load: what each request pays, whether the rate limit
holds, and how much is logged.

    .venv/bin/python bench/redis_trouble.py [--seconds 15] [--clients 4] [--json FILE]

The web server as deployed (2 processes x 4 threads) on a fresh PostgreSQL database
and a private redis-server, ``API_RATE_LIMIT=600/min``. ``--clients`` closed-loop clients
post single events (spread over 60 tokens, each far below its limit) through four phases
of ``--seconds`` each: Redis answering, Redis hung (SIGSTOP), Redis down (killed), Redis
back (started again, empty). In the hung and down phases one more token sends 1,500
events as fast as it can: with the limit enforced per process, at most 2 x 600 (two
processes) may pass per minute window. Log lines of ``sessionhub.redis`` are counted per
cause over the whole run.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import threading
import time
from collections import Counter
from typing import Any

from stack import (
    Client,
    RedisServer,
    database,
    dump,
    environment,
    event,
    figures,
    log,
    manage,
    stop_process,
    tokens,
    web_as_deployed,
    workdir,
)
from stack import admin_dsn as default_admin_dsn

LIMIT = 600
CAUSES = {
    "breaker opened": re.compile(r"unavailable \(\w+\); skipping it"),
    "breaker closed": re.compile(r"answers again after"),
    "rate limiter per process": re.compile(r"rate limiter: Redis at"),
    "publish skipped/failed": re.compile(r"broker at .* unavailable|could not queue work"),
    "cache misses": re.compile(r"cache unavailable"),
}


def load(port: int, pool: list[str], seconds: float, clients: int) -> dict[str, Any]:
    latencies: list[float] = []
    statuses: Counter[Any] = Counter()
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def run(offset: int) -> None:
        client = Client(port, timeout=30)
        n = offset
        while time.monotonic() < deadline:
            answer = client.request("POST", "/api/v1/events", event(), pool[n % len(pool)])
            n += clients
            with lock:
                statuses[answer.status] += 1
                if answer.status == 200:
                    latencies.append(answer.ms)
        client.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {**figures(latencies), "statuses": {str(k): v for k, v in statuses.items()}}


def limit_check(port: int, token: str, count: int = 1500) -> dict[str, int]:
    client = Client(port, timeout=30)
    statuses: Counter[Any] = Counter()
    for _ in range(count):
        statuses[client.request("POST", "/api/v1/events", event(), token).status] += 1
    client.close()
    return {str(k): v for k, v in statuses.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--postgres", default=default_admin_dsn())
    parser.add_argument("--json")
    args = parser.parse_args()

    logs = workdir("sessionhub-bench-redis-")
    redis = RedisServer()
    redis.start()
    result: dict[str, Any] = {"seconds_per_phase": args.seconds, "clients": args.clients}
    try:
        with database(args.postgres, "sessionhub_bench_redis") as url:
            env = environment(
                url, redis.url, API_RATE_LIMIT=f"{LIMIT}/min", GUNICORN_MAX_REQUESTS="0"
            )
            manage(env, "migrate", "--noinput")
            log("making tokens")
            pool = tokens(env, 60)
            limited = tokens(env, 2)
            web, port = web_as_deployed(env, logs / "web.log", workers=2)
            started = time.monotonic()
            try:
                load(port, pool, 3, args.clients)  # warm-up
                log("Redis answering")
                result["up"] = load(port, pool, args.seconds, args.clients)
                log("Redis hung (SIGSTOP)")
                assert redis.process is not None
                os.kill(redis.process.pid, signal.SIGSTOP)
                result["hung"] = load(port, pool, args.seconds, args.clients)
                result["hung"]["limit_check"] = limit_check(port, limited[0])
                log("Redis down (killed)")
                os.kill(redis.process.pid, signal.SIGCONT)
                redis.stop()
                result["down"] = load(port, pool, args.seconds, args.clients)
                result["down"]["limit_check"] = limit_check(port, limited[1])
                log("Redis back (empty)")
                redis.start()
                result["back"] = load(port, pool, args.seconds, args.clients)
            finally:
                elapsed = time.monotonic() - started
                stop_process(web)
    finally:
        redis.close()

    for phase in ("hung", "down", "back"):
        result[phase]["p99_added_ms"] = round(result[phase]["p99"] - result["up"]["p99"], 2)
    lines = [
        line
        for line in (logs / "web.log").read_text(errors="replace").splitlines()
        if "sessionhub.redis" in line
    ]
    counts = {cause: sum(bool(p.search(line)) for line in lines) for cause, p in CAUSES.items()}
    result["log"] = {
        "seconds": round(elapsed, 1),
        "processes": 2,
        "lines_by_cause": counts,
        "lines_per_10s_per_cause_per_process_max": round(
            max(counts.values()) / 2 / max(1.0, elapsed / 10), 2
        ),
        "tracebacks": (logs / "web.log").read_text(errors="replace").count("Traceback"),
    }
    dump(result, args.json)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
