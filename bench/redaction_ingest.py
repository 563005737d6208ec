#!/usr/bin/env python3
"""What redaction costs on the ingest path, printed beside what the database write costs.

Every payload of tests/fixtures (each Claude Code hook line, each OpenClaw hook call,
each text of ``secrets.jsonl``) goes through ``sessionhub.text.redaction.redact_value``, the call
ingestion makes on every event, over and over for a few seconds: that gives strings
redacted per second. Then the same redacted payloads are written as JSONB rows into a
scratch table of a scratch PostgreSQL database (``sessionhub_bench``, created if missing)
with psycopg, 100 rows per transaction: that gives rows, and so strings, stored per
second. The ratio says how much redaction adds to the write it precedes.

    .venv/bin/python bench/redaction_ingest.py
    .venv/bin/python bench/redaction_ingest.py --seconds 5 --rows 20000
    .venv/bin/python bench/redaction_ingest.py --dsn postgresql://postgres@db:5432/postgres

The server's DSN comes from ``--dsn``, else ``DATABASE_URL``, else the local default; only
the database name is replaced. Nothing but the scratch table is touched.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sessionhub.text import redaction  # noqa: E402
from sessionhub.text.redaction import RULES_VERSION, redact_value  # noqa: E402  (pure Python, no Django)

# The same strings are redacted over and over here; the cache of short clean strings
# would answer the repeats and flatter the figures, so it is off for the measurement.
redaction._CLEAN_MAX_LENGTH = -1

BENCH_DB = "sessionhub_bench"
TABLE = "redaction_ingest_rows"
BATCH = 100
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"


# --- the corpus ------------------------------------------------------------------------------


def fixtures_dir() -> Path:
    return REPO / "tests" / "fixtures"


def read_jsonl(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def corpus(fixtures: Path) -> list[dict[str, Any]]:
    """Every payload a gateway would post, as in the fixtures."""
    payloads: list[dict[str, Any]] = []
    for path in sorted(fixtures.glob("claude-code/*/hooks.jsonl")):
        payloads += read_jsonl(path)
    for path in sorted(fixtures.glob("openclaw/*.jsonl")):
        payloads += read_jsonl(path)
    payloads += [{"text": case["text"]} for case in read_jsonl(fixtures / "secrets.jsonl")]
    return payloads


def strings_of(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_of(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_of(item)


# --- redaction -------------------------------------------------------------------------------


def time_redaction(payloads: list[dict[str, Any]], seconds: float) -> list[float]:
    """Seconds per pass over the whole corpus, for as many passes as fit in ``seconds``
    (at least five)."""
    for payload in payloads:  # warm up: compiled patterns, caches
        redact_value(payload)
    passes: list[float] = []
    deadline = time.perf_counter() + seconds
    while len(passes) < 5 or time.perf_counter() < deadline:
        started = time.perf_counter()
        for payload in payloads:
            redact_value(payload)
        passes.append(time.perf_counter() - started)
    return passes


# --- the database ----------------------------------------------------------------------------


def with_database(dsn: str, name: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{name}"))


def ensure_database(psycopg: Any, dsn: str) -> None:
    with psycopg.connect(with_database(dsn, "postgres"), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [BENCH_DB]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{BENCH_DB}"')


def time_inserts(dsn: str, payloads: list[dict[str, Any]], rows: int) -> tuple[float, int, str]:
    """(seconds, rows written, server version) for ``rows`` rows cycled from the payloads,
    ``BATCH`` rows per transaction."""
    import psycopg
    from psycopg.types.json import Jsonb

    ensure_database(psycopg, dsn)
    with psycopg.connect(with_database(dsn, BENCH_DB)) as conn:
        version = conn.execute("SHOW server_version").fetchone()[0]
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {TABLE} ("
            " id bigserial PRIMARY KEY, event_id text NOT NULL, payload jsonb NOT NULL,"
            " redaction_version smallint NOT NULL, received_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.execute(f"TRUNCATE {TABLE}")
        conn.commit()
        values = [
            (f"bench-{i}", Jsonb(payloads[i % len(payloads)]), RULES_VERSION) for i in range(rows)
        ]
        insert = f"INSERT INTO {TABLE} (event_id, payload, redaction_version) VALUES (%s, %s, %s)"
        started = time.perf_counter()
        with conn.cursor() as cursor:
            for start in range(0, rows, BATCH):
                with conn.transaction():
                    cursor.executemany(insert, values[start : start + BATCH])
        elapsed = time.perf_counter() - started
        stored = conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0]
        conn.execute(f"TRUNCATE {TABLE}")
        conn.commit()
    return elapsed, stored, version


# --- report ----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time spent redacting")
    parser.add_argument("--rows", type=int, default=10_000, help="rows inserted")
    parser.add_argument("--dsn", default=os.environ.get("DATABASE_URL") or DEFAULT_DSN)
    parser.add_argument("--no-db", action="store_true", help="redaction only")
    args = parser.parse_args()

    fixtures = fixtures_dir()
    payloads = corpus(fixtures)
    strings = [s for p in payloads for s in strings_of(p)]
    per_payload = len(strings) / len(payloads)
    size = sum(len(s.encode()) for s in strings)
    redacted = [redact_value(p) for p in payloads]
    changed = sum(1 for a, b in zip(payloads, redacted, strict=True) if a != b)

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, redaction rules v{RULES_VERSION}"
    )
    print(
        f"corpus:  {len(payloads)} payloads from {fixtures}, {len(strings)} strings "
        f"({per_payload:.1f} per payload, {size / 1024:.0f} KiB); {changed} payloads hold a secret"
    )

    passes = time_redaction(payloads, args.seconds)
    best, median = min(passes), statistics.median(passes)
    redact_sps = len(strings) / median
    redact_row_us = median / len(payloads) * 1e6
    print()
    print(f"redaction, redact_value per payload ({len(passes)} passes over the corpus)")
    print(f"  {redact_sps:>12,.0f} strings/s   median  ({len(strings) / best:,.0f} best)")
    print(f"  {len(payloads) / median:>12,.0f} payloads/s")
    print(
        f"  {median / len(strings) * 1e6:>12.2f} µs per string, {redact_row_us:.1f} µs per payload,"
        f" {size / median / 1e6:.1f} MB/s"
    )

    if args.no_db:
        return
    try:
        elapsed, stored, version = time_inserts(args.dsn, redacted, args.rows)
    except Exception as exc:  # noqa: BLE001 - say why the second half could not run
        print(f"\nPostgreSQL insert skipped: {exc.__class__.__name__}: {exc}")
        return
    assert stored == args.rows, (stored, args.rows)
    insert_row_us = elapsed / args.rows * 1e6
    print()
    print(
        f"PostgreSQL {version} insert into {BENCH_DB}.{TABLE}, jsonb rows, "
        f"{BATCH} per transaction ({args.rows:,} rows)"
    )
    print(f"  {args.rows / elapsed:>12,.0f} rows/s")
    print(f"  {args.rows * per_payload / elapsed:>12,.0f} strings/s   (same payloads)")
    print(f"  {insert_row_us:>12.1f} µs per row")
    print()
    ratio = redact_row_us / insert_row_us
    print(
        f"redaction / insert, per row: {ratio:.2f}  — redacting a payload costs {ratio:.0%} "
        f"of writing it;\n  redaction alone would keep up with "
        f"{redact_sps / (args.rows * per_payload / elapsed):.1f}x this write rate on one core"
    )


if __name__ == "__main__":
    main()
