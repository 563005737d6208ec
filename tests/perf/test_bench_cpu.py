"""``make bench`` counts the CPU of processes that ended during a round (bench/common.py)."""

from __future__ import annotations

import subprocess
import sys
from types import ModuleType

import pytest

from tests.perf.bench_loader import bench_module


@pytest.fixture(scope="module")
def common() -> ModuleType:
    return bench_module("common")


def test_a_process_that_ended_still_counts_through_its_parent(common: ModuleType) -> None:
    before = common.cpu_seconds()
    # A child of this process (kind "other") that spends CPU and exits before the reading.
    burn = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", burn], check=True)
    after = common.cpu_seconds()
    assert after["other"] - before["other"] >= 0.35
