"""Slow and stalled clients: /healthz and single-event ingest latency with and without
200 stalled uploads, through nginx (deploy/nginx.conf) and, as the control, against
the web server directly.

    .venv/bin/python bench/slow_clients.py [--stalled 200] [--requests 300] [--json FILE]

Both set-ups run the web server as deployed (2 processes x 4 threads) on a fresh
PostgreSQL database and a private redis-server. Each measurement is one client sending
requests one after the other on a keep-alive connection; "stalled" uploads announce a
4,000-byte body and send 400 bytes of it. Against the web server directly each request
may wait at most --timeout seconds.
"""

from __future__ import annotations

import argparse
import socket
import time
from typing import Any

from stack import (
    Client,
    Nginx,
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


def stall(port: int, token: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(
        b"POST /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + f"Authorization: Bearer {token}\r\nContent-Length: 4000\r\n\r\n".encode()
        + b'{"event_id": "'
        + b"x" * 386
    )
    return sock


def measure(port: int, token: str, count: int, timeout: float) -> dict[str, Any]:
    client = Client(port, timeout=timeout)
    health: list[float] = []
    ingest: list[float] = []
    failed = {"healthz": 0, "ingest": 0}
    for _ in range(count):
        answer = client.request("GET", "/healthz")
        if answer.status == 200:
            health.append(answer.ms)
        else:
            failed["healthz"] += 1
        answer = client.request("POST", "/api/v1/events", event(), token)
        if answer.status == 200:
            ingest.append(answer.ms)
        else:
            failed["ingest"] += 1
        if sum(failed.values()) >= 4:  # stalled: do not wait out every request
            break
    client.close()
    return {"healthz": figures(health), "ingest": figures(ingest), "failed": failed}


def run_setup(name: str, port: int, token: str, args: argparse.Namespace) -> dict[str, Any]:
    log(f"{name}: baseline")
    measure(port, token, 30, args.timeout)  # warm-up
    baseline = measure(port, token, args.requests, args.timeout)
    log(f"{name}: {args.stalled} stalled uploads")
    stalled = [stall(port, token) for _ in range(args.stalled)]
    time.sleep(0.5)
    during = measure(port, token, args.requests, args.timeout)
    for sock in stalled:
        sock.close()
    time.sleep(1)
    return {"baseline": baseline, "with_stalled_uploads": during}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stalled", type=int, default=200)
    parser.add_argument("--requests", type=int, default=300, help="of each kind per phase")
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--postgres", default=default_admin_dsn())
    parser.add_argument("--json")
    args = parser.parse_args()

    result: dict[str, Any] = {"stalled": args.stalled, "requests": args.requests}
    logs = workdir("sessionhub-bench-slow-")
    redis = RedisServer()
    redis.start()
    try:
        with database(args.postgres, "sessionhub_bench_slow") as url:
            env = environment(url, redis.url)
            manage(env, "migrate", "--noinput")
            token = tokens(env, 1)[0]
            web, web_port = web_as_deployed(env, logs / "web.log", workers=2)
            front = Nginx(web_port, logs / "nginx.log")
            try:
                front.start()
                result["nginx"] = run_setup("nginx -> web", front.port, token, args)
                result["web_direct"] = run_setup("web direct", web_port, token, args)
            finally:
                front.close()
                stop_process(web)
    finally:
        redis.close()
    dump(result, args.json)
    print(f"logs in {logs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
