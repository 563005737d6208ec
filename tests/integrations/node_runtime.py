"""Node.js packages for the real-gateway tests, installed from the npm registry into a
cache folder of the checkout (``.cache/npm/``), pinned, and reused while their pins hold.

The machine's own Node.js is 20; the gateways' current releases declare Node 22 or 24.
The ``node`` package on the npm registry carries a Node binary, so a pinned Node 24 comes
from the same registry as the gateways themselves, on a fresh machine and in CI alike.

Nothing here skips: a registry that cannot be reached is a failed test with npm's own
words in the message, never a silent pass.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("SESSIONHUB_NPM_CACHE") or REPO / ".cache" / "npm")
NODE_VERSION = "24.21.0"
NPM_TIMEOUT = 900


def npm_prefix(name: str, packages: dict[str, str], *, node: Path | None = None) -> Path:
    """A folder with exactly ``packages`` (name → pinned version) installed, made once.

    The folder is keyed by ``name``; a marker file records what was installed, so a
    second run with the same pins costs nothing and a changed pin reinstalls. With
    ``node``, npm and the packages' install scripts run on that Node binary (packages
    that refuse the machine's older Node at install time).
    """
    if shutil.which("npm") is None:
        pytest.fail("!!! npm is not on PATH: the real-gateway tests need Node.js and npm !!!")
    prefix = CACHE / name
    marker = prefix / ".installed.json"
    wanted = json.dumps(packages, sort_keys=True)
    if marker.exists() and marker.read_text() == wanted:
        return prefix
    if prefix.exists():
        shutil.rmtree(prefix)
    prefix.mkdir(parents=True)
    (prefix / "package.json").write_text(json.dumps({"private": True, "dependencies": {}}))
    specs = [f"{package}@{version}" for package, version in packages.items()]
    env = dict(os.environ)
    if node is not None:
        env["PATH"] = f"{node.parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--no-save", "--prefix", str(prefix), *specs],
        capture_output=True,
        text=True,
        timeout=NPM_TIMEOUT,
        check=False,
        env=env,
    )
    if done.returncode != 0:
        pytest.fail(
            f"!!! npm install {' '.join(specs)} failed (is the npm registry reachable?) !!!\n"
            f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        )
    marker.write_text(wanted)
    return prefix


def node24() -> Path:
    """The path of a pinned Node 24 binary (from the ``node`` package on npm)."""
    prefix = npm_prefix("node24", {"node": NODE_VERSION})
    binary = prefix / "node_modules" / ".bin" / "node"
    done = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    if done.returncode != 0 or not done.stdout.startswith("v24."):
        pytest.fail(f"!!! the node@{NODE_VERSION} package gave no working Node 24: {done!r} !!!")
    return binary.resolve()
