"""What the real Codex CLI and Gemini CLI tests share: a throwaway HOME with the hook
client installed as docs/integrations.md says (the copy-the-file path), a git project, a
recorder hook beside SessionHub's on every event it takes, and the checks that every
payload the CLI fired was stored exactly once.

The recorder is a one-line ``cat`` that keeps each payload as the CLI wrote it: after
each run the events stored must be exactly those, per session and hook, whatever the
queued and detached hooks were doing when the CLI exited.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from lifecycle.models import LifecycleEvent
from tests.integrations.test_hook_client_e2e import DevServer, free_port

REPO = Path(__file__).resolve().parents[2]
CLIENT = REPO / "integrations" / "claude-code" / "sessionhub_hook.py"
SETTLE_SECONDS = 90
REMOTE = "https://git.example.com/acme/billing-api.git"
PROJECT = "git.example.com/acme/billing-api"
RECORD = 'cat > "$RECORD_DIR/$(date +%s%N)-$$.json"'


def dev_server(root: Path) -> DevServer:
    if connection.vendor != "postgresql":
        pytest.fail(
            "!!! the real-CLI tests run a server process on the test database: PostgreSQL !!!"
        )
    dev = DevServer(free_port(), root / "server.log")
    dev.start()
    return dev


class CliRig:
    """A HOME, a project with a git remote, the client copied and installed for one CLI."""

    def __init__(self, root: Path, server: DevServer, gateway: str, env: dict[str, str]):
        self.server, self.gateway = server, gateway
        self.home = root / "home"
        self.project = self.home / "src" / "billing-api"
        self.project.mkdir(parents=True)
        self.records = root / "recorded"
        self.records.mkdir()
        git = shutil.which("git")
        assert git, "git is needed for the project's remote"
        subprocess.run([git, "init", "-q", str(self.project)], check=True)
        subprocess.run(
            [git, "-C", str(self.project), "remote", "add", "origin", REMOTE], check=True
        )
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "RECORD_DIR": str(self.records),
            **env,
        }
        self.client = self.home / ".sessionhub" / "sessionhub_hook.py"

    def install(self, token: str, *extra: str) -> str:
        """docs/integrations.md, "To install nothing at all": copy the file, run install."""
        subprocess.run(["install", "-D", "-m", "0755", str(CLIENT), str(self.client)], check=True)
        done = subprocess.run(
            [
                "python3",
                str(self.client),
                "install",
                f"--{self.gateway}",
                "--user",
                "--url",
                self.server.url,
                "--token",
                "-",
                *extra,
            ],
            input=token + "\n",
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.home,
            check=True,
        )
        assert "config written" in done.stdout, done.stdout
        return done.stdout

    def add_recorder(self, settings_file: Path, **fields: Any) -> None:
        """The user's own hook next to SessionHub's, for every event SessionHub takes."""
        settings = json.loads(settings_file.read_text())
        for groups in settings["hooks"].values():
            groups.append({"hooks": [{"type": "command", "command": RECORD, **fields}]})
        settings_file.write_text(json.dumps(settings, indent=2))

    def recorded(self) -> list[dict[str, Any]]:
        out = []
        for path in sorted(self.records.iterdir()):
            text = path.read_text()
            if text.strip():
                out.append(json.loads(text))
        return out

    def expected(self) -> Counter[tuple[str, str]]:
        return Counter((r["session_id"], r["hook_event_name"]) for r in self.recorded())

    @staticmethod
    def stored() -> Counter[tuple[str, str]]:
        return Counter(LifecycleEvent.objects.values_list("session__external_id", "hook"))

    def settle(self) -> None:
        """Wait until every payload the CLI fired is stored (queued and detached hooks end
        after the CLI), then check nothing is missing or doubled and nothing waits."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while time.monotonic() < deadline and self.stored() != self.expected():
            time.sleep(0.2)
        assert self.stored() == self.expected(), (
            self.stored(),
            self.expected(),
            self.log(),
            self.server.log_path.read_text()[-3000:],
        )
        spool = self.home / ".sessionhub" / "spool.jsonl"
        assert not spool.exists() or not spool.read_text().strip(), spool.read_text()
        assert not list((self.home / ".sessionhub" / "queue").glob("*.hook"))

    def session_ids(self) -> list[str]:
        """Session ids in the order the CLI first fired a hook for them."""
        seen: list[str] = []
        for record in self.recorded():
            if record["session_id"] not in seen:
                seen.append(record["session_id"])
        return seen

    def log(self) -> str:
        path = self.home / ".sessionhub" / "hook.log"
        return path.read_text() if path.exists() else ""

    def status(self) -> str:
        return subprocess.run(
            ["python3", str(self.client), "status"],
            capture_output=True,
            text=True,
            env=self.env,
            check=True,
        ).stdout


def wait_for(what: str, check: Any, seconds: float = SETTLE_SECONDS) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"never happened: {what}")
