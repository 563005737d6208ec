"""``make help`` names the variables, and ``make superuser`` never "succeeds" without
making anyone: with no terminal it reads the usual environment variables or fails loudly."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


@pytest.fixture(autouse=True)
def _leave_no_env_file() -> Iterator[None]:
    """``make superuser`` writes a development ``.env`` into the checkout when it has none;
    one left behind would turn DEBUG on for every later test that runs ``manage.py``."""
    dotenv = REPO / ".env"
    had = dotenv.exists()
    yield
    if not had:
        dotenv.unlink(missing_ok=True)


def make(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "-s", *args],
        cwd=REPO,
        stdin=subprocess.DEVNULL,  # no terminal, as in a script or CI
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
        check=False,
    )


def test_help_names_host_and_port() -> None:
    out = make("help").stdout
    assert "HOST" in out and "PORT" in out
    assert "make run HOST=0.0.0.0 PORT=9000" in out


def test_superuser_without_a_terminal_fails_loudly() -> None:
    env = {"DJANGO_SUPERUSER_USERNAME": "", "DJANGO_SUPERUSER_PASSWORD": ""}
    done = make("superuser", env=env)
    assert done.returncode != 0
    assert "no terminal" in done.stderr
    assert "DJANGO_SUPERUSER_USERNAME" in done.stderr


def test_superuser_without_a_terminal_reads_the_environment(tmp_path: Path) -> None:
    database = tmp_path / "db.sqlite3"
    env = {"DATABASE_URL": f"sqlite:///{database}", "REDIS_URL": ""}
    migrate = subprocess.run(
        [str(REPO / ".venv" / "bin" / "python"), "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert migrate.returncode == 0, migrate.stderr
    done = make(
        "superuser",
        env={
            **env,
            "DJANGO_SUPERUSER_USERNAME": "lead",
            "DJANGO_SUPERUSER_PASSWORD": "pw-lead-9f3k2",
        },
    )
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(database) as conn:
        rows = conn.execute("SELECT username, email, is_superuser FROM auth_user").fetchall()
    assert rows == [("lead", "lead@localhost", 1)]
