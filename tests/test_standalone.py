"""The repository stands alone: its fixtures are its own and up to date, nothing in it
reads a folder beside the checkout, and ``pip install .`` gives a SessionHub that runs.

- The files tests/fixtures/build.py owns are exactly what it writes.
- No file of the repository names a path outside it.
- The wheel (``pip wheel``, as a user or an index would build it) carries every app, every
  template and every static file, and the two console scripts.
- That wheel installed into a fresh virtual environment: ``sessionhub`` migrates a new
  SQLite database in the user's data folder, prints a first API token, and serves it
  (health, a template, a static file, an ingest request with that token);
  ``sessionhub <command>`` runs a management command on the same data, and
  ``python -m sessionhub`` is the same program.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
APPS = ("sessionhub", "lifecycle", "memory", "dashboard")


def repository_files() -> list[str]:
    """The repository's files as a clone has them: tracked, or new and not ignored."""
    try:
        done = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.fail(f"these checks read the checkout's file list with git: {exc}")
    return [name for name in done.stdout.decode().split("\0") if (REPO / name).is_file()]


# --- fixtures -------------------------------------------------------------------------------


def test_the_fixtures_are_what_their_generator_writes() -> None:
    spec = importlib.util.spec_from_file_location("fixtures_build", FIXTURES / "build.py")
    assert spec is not None and spec.loader is not None
    build = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = build  # its dataclasses look their module up while made
    spec.loader.exec_module(build)

    written = build.outputs()
    # What it owns; codex/ and gemini-cli/ hold what those CLIs fired (see the README).
    on_disk = {*FIXTURES.glob("claude-code/*/*.jsonl"), *FIXTURES.glob("openclaw/*.jsonl")}
    assert set(written) == on_disk | {FIXTURES / "secrets.jsonl"}
    stale = [str(p.relative_to(REPO)) for p, text in written.items() if p.read_text() != text]
    assert stale == [], "run: python tests/fixtures/build.py"
    assert len(written) == 5 * 2 + 5 + 1  # claude-code hooks+transcript, openclaw, secrets


def test_no_file_names_a_folder_beside_the_checkout() -> None:
    sibling = "shared"
    needles = [
        "../" + sibling,
        "/work/" + sibling,
        f'"{sibling}" / "fixtures"',
        f'parent / "{sibling}"',
        f'"..", "{sibling}"',
    ]
    found = []
    for name in repository_files():
        try:
            text = (REPO / name).read_text()
        except (UnicodeDecodeError, OSError):
            continue  # binary
        found += [f"{name}: {needle}" for needle in needles if needle in text]
    assert found == []


# --- the wheel ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the checkout's files (no build/ left from before)."""
    source = tmp_path_factory.mktemp("source")
    for name in repository_files():
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)  # follows the link sessionhub_hook.py is
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"pip wheel failed:\n{done.stdout}\n{done.stderr}"
    [built] = out.glob("sessionhub-*.whl")
    return built


def test_the_wheel_carries_every_app_template_and_static_file(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = archive.read(entry_points).decode()
    files = repository_files()
    code = [
        f for f in files if f.startswith(tuple(f"{app}/" for app in APPS)) and f.endswith(".py")
    ]
    pages = [f for f in files if f.startswith("templates/") and f.endswith(".html")]
    assets = [f for f in files if f.startswith("static/") and not Path(f).name.startswith(".")]
    assert {"dashboard/views.py", "dashboard/templatetags/dashboard_tags.py"} <= set(code)
    assert "templates/dashboard/session_detail.html" in pages
    assert "static/dashboard/dashboard.css" in assets
    missing = [f for f in [*code, *pages, *assets] if f not in names]
    assert missing == []
    assert "sessionhub_hook.py" in names
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {*APPS, "templates", "static", "sessionhub_hook.py"}
    assert "sessionhub = sessionhub.cli:main" in scripts
    assert "sessionhub-hook = sessionhub_hook:main" in scripts


# --- the installed program -----------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed; its bin folder.

    Its dependencies come from this environment's site-packages (a .pth file names it),
    so nothing is downloaded; the project itself is only the installed copy: the
    checkout's editable install is a .pth of that folder, which Python does not follow.
    """
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = subprocess.run(
        [
            sys.executable,
            *("-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index"),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"pip install failed:\n{done.stdout}\n{done.stderr}"
    return venv / "bin"


def user_environment(home: Path) -> dict[str, str]:
    """A user's shell: a home folder, none of this test run's settings."""
    kept = {
        k: v
        for k, v in os.environ.items()
        if k in ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")
    }
    return kept | {"HOME": str(home)}


@pytest.fixture
def served(installed: Path, tmp_path: Path) -> Iterator[dict[str, Any]]:
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    log_path = tmp_path / "sessionhub.log"
    env = user_environment(home)
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(installed / "sessionhub"), "serve", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if process.poll() is not None:
                pytest.fail(f"sessionhub exited {process.returncode}:\n{log_path.read_text()}")
            try:
                if requests.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, f"not serving:\n{log_path.read_text()}"
            time.sleep(0.2)
        yield {"url": url, "log": log_path, "home": home, "env": env, "bin": installed}
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


WHERE_AND_HOW_MANY = (
    "import sessionhub; from lifecycle.models import Session; "
    "print(sessionhub.__file__); print(Session.objects.count())"
)


def test_sessionhub_migrates_makes_a_token_and_serves(served: dict[str, Any]) -> None:
    url, bin_dir, env = served["url"], served["bin"], served["env"]
    health = requests.get(f"{url}/healthz", timeout=10).json()
    assert health["status"] == "ok"
    assert health["checks"]["database"]["vendor"] == "sqlite"

    # The data folder is the user's: the database and a secret key only its owner reads.
    data = served["home"] / ".local" / "share" / "sessionhub"
    assert (data / "sessionhub.sqlite3").is_file()
    assert (data / "secret_key").stat().st_mode & 0o777 == 0o600
    assert data.stat().st_mode & 0o777 == 0o700

    # Templates and static files come from the installed package.
    login = requests.get(f"{url}/accounts/login/", timeout=10)
    assert login.status_code == 200 and 'name="password"' in login.text
    css = requests.get(f"{url}/static/dashboard/dashboard.css", timeout=10)
    assert css.status_code == 200 and css.text.strip()

    # The first token, printed once, is accepted for ingest.
    [token] = re.findall(r"shub_[A-Za-z0-9_-]+", served["log"].read_text())
    line = json.loads(
        (FIXTURES / "claude-code" / "basic" / "hooks.jsonl").read_text().split("\n")[0]
    )
    answer = requests.post(
        f"{url}/api/v1/hooks/claude-code",
        json=line,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["accepted"] == 1

    # A management command runs on the same data, and `python -m sessionhub` is the same.
    made = subprocess.run(
        [str(bin_dir / "sessionhub"), "create_api_token", "default", "--scopes", "read"],
        cwd=served["home"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    assert re.search(r"shub_[A-Za-z0-9_-]+", made.stdout)
    where = subprocess.run(
        [str(bin_dir / "python"), "-m", "sessionhub", "shell", "-c", WHERE_AND_HOW_MANY],
        cwd=served["home"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert where.returncode == 0, where.stderr
    module, sessions = where.stdout.strip().splitlines()[-2:]
    assert Path(module).is_relative_to(bin_dir.parent)  # the installed copy, not the checkout
    assert sessions == "1"
