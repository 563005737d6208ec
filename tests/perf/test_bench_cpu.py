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


def test_a_process_tree_is_walked_while_its_processes_exit(common: ModuleType) -> None:
    """The peer's tree is read while the peer starts and ends helpers: a child that is
    running is found, and one that has exited has no children rather than an error."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        import os

        assert child.pid in common.child_pids(os.getpid())
    finally:
        child.kill()
        child.wait()
    assert common.child_pids(child.pid) == []
