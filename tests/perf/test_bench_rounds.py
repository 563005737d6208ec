"""``make bench`` reports each figure as the worst of its rounds (``bench/run.py``)."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.perf.bench_loader import bench_module


@pytest.fixture(scope="module")
def run() -> ModuleType:
    return bench_module("run")


def latency(p99: float) -> dict[str, float]:
    """A latency figure as the continuity and MCP parts record it."""
    return {
        "p50_ms": p99 / 2,
        "p95_ms": p99 * 0.8,
        "p99_ms": p99,
        "failures": 0,
        "sessions": 100_000,
        "in_lookback": 23_000,
        "candidates_scored": 200,
        "stage": "start",
        "requests": 500,
        "answer_chars": 2000,
        "hits": 5,
    }


ROUNDS = [
    {
        "single": {"rps": 1000.0},
        "peer": {"rps": 800.0},  # 1.25
        "fixed": {"p99_ms": 9.0},
        "summary": {"p95_s": 0.1},
        "batch": {"eps": 12000.0, "errors": 0},
        "raw": {"eps": 20000.0, "writers": 2},  # 0.60
        "continuity": {"big": latency(14.0), "big_prompt": latency(30.0), "small": latency(5)},
        "mcp": {"sessions": 101060, "search": latency(20.0)},
    },
    {
        "single": {"rps": 900.0},
        "peer": {"rps": 850.0},  # 1.06: the worst ratio
        "fixed": {"p99_ms": 16.0},
        "summary": {"p95_s": 0.3},
        "batch": {"eps": 11000.0, "errors": 0},
        "raw": {"eps": 22000.0, "writers": 2},  # 0.50: the worst ratio
        "continuity": {"big": latency(26.0), "big_prompt": latency(20.0)},
        "mcp": {"sessions": 101060, "search": latency(18.0)},
    },
    {
        "single": {"rps": 950.0},
        "peer": {"rps": 700.0},
        "fixed": {"p99_ms": 8.0},
        "summary": {"p95_s": 0.2},
        "batch": {"eps": 10500.0, "errors": 0},
        "raw": {"eps": 18000.0, "writers": 2},  # 0.58
        "continuity": {"big": latency(12.0), "big_prompt": latency(22.0)},
        "mcp": {"sessions": 101060, "search": latency(24.0)},
    },
]


def test_each_figure_is_its_worst_round(run: ModuleType) -> None:
    worst = run.worst_of_rounds(ROUNDS)
    assert worst["single"]["rps"] == 900.0 and worst["peer"]["rps"] == 850.0
    assert worst["fixed"]["p99_ms"] == 16.0
    assert worst["summary"]["p95_s"] == 0.3
    assert worst["batch"]["eps"] == 11000.0 and worst["raw"]["eps"] == 22000.0
    # Each continuity stage and MCP call on its own: the worst start and the worst first
    # prompt come from different rounds; the small seed is measured in one round only.
    assert worst["continuity"]["big"]["p99_ms"] == 26.0
    assert worst["continuity"]["big_prompt"]["p99_ms"] == 30.0
    assert worst["continuity"]["small"]["p99_ms"] == 5
    assert worst["mcp"]["search"]["p99_ms"] == 24.0
    assert worst["mcp"]["sessions"] == 101060


# What the table is tested on: the parts whose rows the tests above do not fill in full.
SHOWN = [{k: v for k, v in r.items() if k in ("batch", "raw", "continuity", "mcp")} for r in ROUNDS]


def test_a_target_counts_only_when_every_round_meets_it(run: ModuleType) -> None:
    table = run.render({**run.worst_of_rounds(SHOWN), "rounds": SHOWN})
    line = next(x for x in table.splitlines() if x.startswith("| continuity, 100,000"))
    assert line.endswith("| NOT MET |")  # 14 and 12 ms met it, 26 did not
    line = next(x for x in table.splitlines() if x.startswith("| MCP search_memory"))
    assert line.endswith("| met |")  # 20, 18 and 24 ms
    assert "worst of 3 rounds" in table
    assert "  continuity big, p99: 14.0, 26.0, 12.0 ms" in table
    assert "  batch: 12,000, 11,000, 10,500 events/s (÷ raw 0.60, 0.50, 0.58)" in table


def test_the_batch_round_with_the_lowest_share_of_raw_is_the_worst(run: ModuleType) -> None:
    rounds = [
        {"batch": {"eps": 9_000.0, "errors": 0}, "raw": {"eps": 12_000.0, "writers": 2}},
        {"batch": {"eps": 10_500.0, "errors": 0}, "raw": {"eps": 40_000.0, "writers": 2}},
    ]
    # The second stored more events a second but took a smaller share of its round's raw
    # database (0.26 against 0.75): the target is the share, so it is the worst.
    worst = run.worst_of_rounds(rounds)
    assert worst["batch"]["eps"] == 10_500.0
    line = next(
        x
        for x in run.render({**worst, "rounds": rounds}).splitlines()
        if x.startswith("| batch ingest")
    )
    assert line.endswith("| NOT MET |")


def test_cpu_per_event_is_the_rounds_highest_share_of_the_peers(run: ModuleType) -> None:
    speed = {"p50_ms": 5.0, "p99_ms": 20.0, "errors": 0}

    def round_(ours: dict[str, float], peer: float) -> dict[str, object]:
        return {
            "single": {"rps": 900.0, "cpu_ms": ours, "rounds": [900.0], **speed},
            # SessionHub's idle worker sampled during the peer's round is not the peer's.
            "peer": {"rps": 800.0, "cpu_ms": {"worker": 0.3, "peer": peer}, "rounds": [800.0]}
            | speed,
        }

    rounds = [
        round_({"web": 0.6, "postgres": 0.3}, 1.0),  # 0.90
        round_({"web": 0.9, "postgres": 0.4, "front": 0.1}, 1.2),  # 1.17: the worst
        round_({"web": 0.5, "postgres": 0.3}, 1.0),  # 0.80
    ]
    worst = run.worst_of_rounds(rounds)
    assert worst["cpu"]["ratio"] == pytest.approx(1.4 / 1.2)
    table = run.render({**worst, "rounds": rounds})
    line = next(x for x in table.splitlines() if x.startswith("| CPU per single-event"))
    assert "claude-mem 1.20; ratio 1.17" in line and line.endswith("| NOT MET |")
    assert "  CPU per single event ÷ peer: 0.90, 1.17, 0.80" in table
    met = run.worst_of_rounds([rounds[0], rounds[2]])
    assert run.render({**met, "rounds": [rounds[0], rounds[2]]}).count("| met |") >= 1


def test_one_round_reports_that_round(run: ModuleType) -> None:
    worst = run.worst_of_rounds(SHOWN[:1])
    assert worst["continuity"]["big_prompt"]["p99_ms"] == 30.0
    assert "rounds of the plan" not in run.render({**worst, "rounds": SHOWN[:1]})
