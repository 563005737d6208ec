"""``make bench`` counts the CPU of processes that ended during a round (bench/common.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def common() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("bench_common", BENCH / "common.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["bench_common"] = module  # its dataclasses look their module up
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def test_a_process_that_ended_still_counts_through_its_parent(common: ModuleType) -> None:
    before = common.cpu_seconds()
    # A child of this process (kind "other") that spends CPU and exits before the reading.
    burn = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", burn], check=True)
    after = common.cpu_seconds()
    assert after["other"] - before["other"] >= 0.35
