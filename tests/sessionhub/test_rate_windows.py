"""The rate limiter's per-process counting between round trips to the shared counter."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from sessionhub import throttling
from sessionhub.throttling import SyncedWindows


class SharedCounter:
    """Redis's INCRBY, as the processes' ``add`` callables see it."""

    def __init__(self) -> None:
        self.value = 0
        self.round_trips = 0

    def adder(self) -> Any:
        def add(step: int) -> int:
            self.round_trips += 1
            self.value += step
            return self.value

        return add


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(throttling.time, "monotonic", lambda: now[0])
    return now


def test_a_small_limit_is_counted_in_the_shared_counter_at_every_request(clock: Any) -> None:
    shared = SharedCounter()
    windows = SyncedWindows()
    counts = [windows.count("k", 1, 5, shared.adder()) for _ in range(7)]
    assert counts == [1, 2, 3, 4, 5, 6, 7]
    assert shared.round_trips == 7


def test_far_from_a_large_limit_requests_are_added_in_steps(clock: Any) -> None:
    shared = SharedCounter()
    windows = SyncedWindows()
    for _ in range(100):
        windows.count("k", 1, 6000, shared.adder())
    assert shared.round_trips == 0  # all within SYNC_SECONDS and far from the limit
    clock[0] += throttling.SYNC_SECONDS
    assert windows.count("k", 1, 6000, shared.adder()) == 101
    assert (shared.value, shared.round_trips) == (101, 1)


def test_a_new_window_starts_from_nothing(clock: Any) -> None:
    shared = SharedCounter()
    windows = SyncedWindows()
    for _ in range(3):
        windows.count("k", 1, 6000, shared.adder())
    assert windows.count("k", 2, 6000, shared.adder()) == 1


@pytest.mark.parametrize("processes", [1, 3, 8])
def test_several_processes_stay_within_the_limit_near_it(clock: Any, processes: int) -> None:
    """Requests spread over processes, all in one window: what they let through exceeds
    the limit by little, and once the shared count is past it every process refuses."""
    limit = 600
    shared = SharedCounter()
    windows = [SyncedWindows() for _ in range(processes)]
    allowed = 0
    for n, process in zip(range(3 * limit), itertools.cycle(windows), strict=False):
        if n % 50 == 0:
            clock[0] += 0.01
        if process.count("k", 1, limit, shared.adder()) <= limit:
            allowed += 1
    assert limit <= allowed <= limit + processes * 2, allowed
    assert shared.round_trips < 3 * limit
