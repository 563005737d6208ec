#!/usr/bin/env python3
"""How fast ``sessionhub.text.redaction.redact_text`` is on the strings gateways actually send,
and how well it does on the secrets corpus, kind by kind.

The corpus is every string value in tests/fixtures: each Claude Code hook line and
transcript line, each OpenClaw hook call, and each text of ``secrets.jsonl``. The corpus
is redacted over and over for a few seconds to get strings/s and MB/s; then each string
is timed on its own (over a batch of calls, so the clock's own cost washes out; best of
three passes) to get per-string latency percentiles. Both are reported for the whole
corpus and for the secret-free strings alone, which are what nearly every real string is.

    .venv/bin/python bench/redaction.py
    .venv/bin/python bench/redaction.py --seconds 10 --json

``measure(seconds)`` returns the same figures as a dict for other scripts to build on.

Quality per kind of ``secrets.jsonl`` row (``quality()``): recall is the share of secrets
of which nothing is left (neither the whole nor any 12-character piece, in any letter
case); for rows that must be kept (kinds ``keep_*``), the false-positive rate is the share
of rows that redaction changed at all; for secret rows, "kept lost" is the share whose
surrounding text (their ``keep`` fragments) did not survive.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from sessionhub.text import redaction  # noqa: E402
from sessionhub.text.redaction import (  # noqa: E402  (pure Python)
    RULES_VERSION,
    redact_identifier,
    redact_text,
)

# The same strings are redacted over and over here; the cache of short clean strings
# would answer the repeats and flatter the figures, so it is off for the measurement.
redaction._CLEAN_MAX_LENGTH = -1

# Calls per string when timing strings one by one: enough to dwarf perf_counter's own
# cost (tens of ns) against sub-microsecond calls.
_CALLS_PER_SAMPLE = 50


def fixtures_dir() -> Path:
    """The gateway fixtures of the test suite (tests/fixtures/)."""
    return REPO / "tests" / "fixtures"


def _strings_in(value: Any) -> Iterator[str]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def load_corpus(fixtures: Path | None = None) -> list[str]:
    """Every string value of every fixture file, in file order, duplicates included."""
    fixtures = fixtures or fixtures_dir()
    strings: list[str] = []
    for path in sorted(fixtures.rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            if path.name == "secrets.jsonl":
                strings.append(record["text"])
            else:
                strings.extend(_strings_in(record))
    return strings


_PIECE = 12


def _leaks(secret: str, redacted: str) -> bool:
    lowered, text = secret.lower(), redacted.lower()
    if lowered in text:
        return True
    return any(lowered[i : i + _PIECE] in text for i in range(len(lowered) - _PIECE + 1))


def quality(fixtures: Path | None = None) -> dict[str, dict[str, float]]:
    """Per kind of corpus row: rows, secrets, recall, false positives, keep fragments lost."""
    fixtures = fixtures or fixtures_dir()
    kinds: dict[str, dict[str, float]] = {}
    for line in (fixtures / "secrets.jsonl").read_text().splitlines():
        record = json.loads(line)
        kind = kinds.setdefault(
            record.get("kind", "format"),
            {"rows": 0, "secrets": 0, "caught": 0, "changed": 0, "keep_lost": 0},
        )
        # Identifier rows are redacted as identifiers are (session ids, paths, JSON keys).
        is_identifier = record.get("kind", "").endswith("identifier")
        redacted = (redact_identifier if is_identifier else redact_text)(record["text"])
        kind["rows"] += 1
        kind["secrets"] += len(record["secrets"])
        kind["caught"] += sum(not _leaks(s, redacted) for s in record["secrets"])
        kind["changed"] += redacted != record["text"]
        kind["keep_lost"] += any(k not in redacted for k in record["keep"])
    for kind in kinds.values():
        if kind["secrets"]:
            kind["recall"] = kind["caught"] / kind["secrets"]
        else:
            kind["false_positive_rate"] = kind["changed"] / kind["rows"]
        kind["keep_lost_rate"] = kind["keep_lost"] / kind["rows"]
    return kinds


def _throughput(strings: list[str], seconds: float) -> dict[str, float]:
    size = sum(len(s.encode()) for s in strings)
    rounds = 0
    start = time.perf_counter()
    while True:
        for text in strings:
            redact_text(text)
        rounds += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            break
    return {
        "strings_per_s": rounds * len(strings) / elapsed,
        "mb_per_s": rounds * size / elapsed / 1e6,
        "rounds": rounds,
    }


def _latencies_us(strings: list[str], passes: int = 3) -> list[float]:
    """Per-string cost, best of ``passes``: other processes only ever add time."""
    clock = time.perf_counter
    best = [float("inf")] * len(strings)
    for _ in range(passes):
        for index, text in enumerate(strings):
            start = clock()
            for _ in range(_CALLS_PER_SAMPLE):
                redact_text(text)
            best[index] = min(best[index], (clock() - start) / _CALLS_PER_SAMPLE * 1e6)
    return best


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def _figures(strings: list[str], seconds: float) -> dict[str, Any]:
    if not strings:
        return {"strings": 0}
    latencies = _latencies_us(strings)
    return {
        "strings": len(strings),
        "bytes": sum(len(s.encode()) for s in strings),
        "mean_chars": statistics.fmean(len(s) for s in strings),
        **_throughput(strings, seconds),
        "us_p50": _percentile(latencies, 0.50),
        "us_p90": _percentile(latencies, 0.90),
        "us_p99": _percentile(latencies, 0.99),
        "us_max": max(latencies),
        "us_mean": statistics.fmean(latencies),
    }


def measure(seconds: float = 3.0) -> dict[str, Any]:
    """Redact the fixture corpus for about ``seconds`` and return throughput and latency."""
    corpus = load_corpus()
    for text in corpus:  # warm up: compile caches, first-call costs
        redact_text(text)
    secret_free = [text for text in corpus if redact_text(text) == text]
    with_secrets = [text for text in corpus if redact_text(text) != text]
    return {
        "rules_version": RULES_VERSION,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "seconds": seconds,
        "corpus": _figures(corpus, seconds / 2),
        "secret_free": _figures(secret_free, seconds / 2),
        "with_secrets": {"strings": len(with_secrets)},
        "quality": quality(),
    }


def _report(result: dict[str, Any]) -> str:
    lines = [
        f"redaction rules v{result['rules_version']}, Python {result['python']} "
        f"({result['machine']}), ~{result['seconds']:g}s",
        f"{'':14}{'strings':>8} {'mean len':>9} {'strings/s':>11} {'MB/s':>7} "
        f"{'p50 µs':>8} {'p90 µs':>8} {'p99 µs':>8} {'max µs':>8}",
    ]
    for name in ("corpus", "secret_free"):
        f = result[name]
        if not f.get("strings"):
            lines.append(f"{name:14}{0:>8}")
            continue
        lines.append(
            f"{name:14}{f['strings']:>8} {f['mean_chars']:>9.0f} {f['strings_per_s']:>11,.0f} "
            f"{f['mb_per_s']:>7.1f} {f['us_p50']:>8.2f} {f['us_p90']:>8.2f} "
            f"{f['us_p99']:>8.2f} {f['us_max']:>8.1f}"
        )
    lines.append(f"strings containing a secret: {result['with_secrets']['strings']}")
    lines.append("")
    lines.append(
        f"{'kind':18}{'rows':>6}{'secrets':>9}{'recall':>9}{'false pos':>11}{'kept lost':>11}"
    )
    for name, k in sorted(result["quality"].items()):
        recall = f"{k['recall']:.3f}" if "recall" in k else "-"
        false_pos = f"{k['false_positive_rate']:.3f}" if "false_positive_rate" in k else "-"
        lines.append(
            f"{name:18}{k['rows']:>6}{k['secrets']:>9}{recall:>9}{false_pos:>11}"
            f"{k['keep_lost_rate']:>11.3f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time budget (default 3)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    result = measure(args.seconds)
    print(json.dumps(result, indent=2) if args.json else _report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
