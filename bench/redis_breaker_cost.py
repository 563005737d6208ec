"""What a request pays for Redis once its circuit breaker is open, measured in-process:
the rate limiter's count and the broker publish after commit, each called many times
with Redis away (a port nobody listens on). Prints microseconds per call.

    .venv/bin/python bench/redis_breaker_cost.py [--calls 20000]
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    args = parser.parse_args()
    away = f"redis://127.0.0.1:{free_port()}/0"
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "sessionhub.settings",
            "DEBUG": "0",
            "SECRET_KEY": "bench-" + "k" * 50,
            "REDIS_URL": away,
            "DATABASE_URL": "sqlite:///:memory:",
            "LOG_LEVEL": "ERROR",
        }
    )
    import django

    django.setup()
    from lifecycle.ingest.outbox import enqueue_session_work
    from sessionhub.throttling import TokenRateThrottle

    throttle = TokenRateThrottle()
    started = time.perf_counter()
    throttle._count("throttle:token:bench:0", 0)  # the first failure opens the breaker
    first_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    for _ in range(args.calls):
        throttle._count("throttle:token:bench:0", 0)
    limiter_us = (time.perf_counter() - started) / args.calls * 1e6
    started = time.perf_counter()
    for _ in range(args.calls):
        enqueue_session_work(["00000000-0000-0000-0000-000000000000"])
    publish_us = (time.perf_counter() - started) / args.calls * 1e6
    print(f"first failure (connection refused): {first_ms:.2f} ms")
    print(f"rate-limit count with the breaker open: {limiter_us:.2f} µs per call")
    print(f"publish after commit with the breaker open: {publish_us:.2f} µs per call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
