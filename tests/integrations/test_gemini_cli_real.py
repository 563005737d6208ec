"""The real Gemini CLI, installed from npm (pinned), against a local mock of the Gemini API
(``mock_gemini.py``, reached through ``GOOGLE_GEMINI_BASE_URL`` with an API key) and a
live SessionHub, with the hook client installed as docs/integrations.md tells users
(``install --gemini-cli``).

Gemini CLI is JavaScript for Node 20 or later: it runs on the machine's Node. Each run is
``gemini -p`` (one turn) with a model named, so the CLI routes no request of its own;
``--resume <session id>`` continues a session. The mock reports a nearly full context in
the middle of a resumed turn, which makes the CLI compress the history before its next
call; every other model call fires PreCompress too, and compresses nothing. Beside
SessionHub's hooks a recorder hook keeps every payload the CLI fired: the events stored
must be exactly those, per session and hook, nothing lost or doubled, across an outage too.

If the npm registry cannot be reached the tests fail, loudly.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lifecycle.models import Agent, EventKind, LifecycleEvent, Session, SessionStatus, Source
from memory.models import ContinuityRecord, Observation, StreamTail, Summary
from tests.integrations.cli_rig import PROJECT, CliRig, dev_server, wait_for
from tests.integrations.mock_gemini import (
    GEMINI_CLI_VERSION,
    MODEL,
    SNAPSHOT,
    THOUGHT,
    MockGemini,
)
from tests.integrations.node_runtime import npm_prefix
from tests.integrations.test_hook_client_e2e import DevServer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SECRET = "AKIAYS7BUZSBKMUIV3NR"
INSTALLED = {
    "SessionStart",
    "BeforeAgent",
    "BeforeTool",
    "AfterTool",
    "Notification",
    "PreCompress",
    "AfterAgent",
    "SessionEnd",
}


@pytest.fixture(scope="module")
def gemini() -> Path:
    prefix = npm_prefix("gemini-cli", {"@google/gemini-cli": GEMINI_CLI_VERSION})
    binary = prefix / "node_modules" / ".bin" / "gemini"
    done = subprocess.run(
        [binary, "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0 or GEMINI_CLI_VERSION not in done.stdout:
        pytest.fail(
            f"!!! @google/gemini-cli {GEMINI_CLI_VERSION} from npm does not run: {done!r} !!!"
        )
    return binary


@pytest.fixture(scope="module")
def mock() -> Iterator[MockGemini]:
    with MockGemini() as server:
        yield server


@pytest.fixture(scope="module")
def server(django_db_setup: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    dev = dev_server(tmp_path_factory.mktemp("gemini-server"))
    try:
        yield dev
    finally:
        if dev.proc is not None:
            dev.proc.kill()
            dev.proc.wait(timeout=30)


class GeminiRig(CliRig):
    def __init__(self, root: Path, gemini: Path, server: DevServer, mock: MockGemini):
        super().__init__(
            root,
            server,
            "gemini-cli",
            {
                "GEMINI_API_KEY": "mock-key-not-a-key",
                "GOOGLE_GEMINI_BASE_URL": mock.url,
                # The user trusted the folder (headless: the documented variable).
                "GEMINI_CLI_TRUST_WORKSPACE": "true",
            },
        )
        self.gemini, self.mock = gemini, mock
        self.settings_file = self.home / ".gemini" / "settings.json"
        self.settings_file.parent.mkdir()
        # The user's own settings: an API key login. install keeps them.
        self.settings_file.write_text(
            json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}})
        )

    def run(self, prompt: str, *resume: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [
                str(self.gemini),
                "--yolo",
                "-m",
                MODEL,
                *(["--resume", *resume] if resume else []),
                "-p",
                prompt,
            ],
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        assert done.returncode == 0, (done.stdout, done.stderr[-3000:])
        return done

    def turns_with(self, text: str) -> list[dict[str, Any]]:
        """The agent's model calls whose conversation holds ``text``."""
        return [b for b in self.mock.turns() if text in self.mock.shown(b)]


@pytest.fixture
def rig(tmp_path: Path, gemini: Path, server: DevServer, mock: MockGemini, token: str) -> GeminiRig:
    if server.proc is None or server.proc.poll() is not None:
        server.start()  # a test before this one took it down
    rig = GeminiRig(tmp_path, gemini, server, mock)
    rig.install(token)
    rig.add_recorder(rig.settings_file, name="recorder", timeout=10000)
    return rig


def summary_of(session: Session) -> Summary:
    return wait_for(
        f"a summary of {session.external_id}",
        lambda: Summary.objects.filter(session=session, events_seen=session.event_count).first(),
    )


def test_installed_as_documented(rig: GeminiRig, token: str) -> None:
    settings = json.loads(rig.settings_file.read_text())
    assert settings["security"] == {"auth": {"selectedType": "gemini-api-key"}}  # kept
    ours = {
        event: [h for g in groups for h in g["hooks"] if "sessionhub_hook" in h["command"]]
        for event, groups in settings["hooks"].items()
    }
    assert set(ours) == INSTALLED
    for event, [entry] in ours.items():
        assert entry["command"].startswith("/")  # no PATH lookup
        assert entry["command"].endswith("--gateway gemini-cli"), entry
        assert entry["timeout"] == 10_000  # milliseconds
        queued = event in {"BeforeTool", "AfterTool", "Notification"}
        assert ("sessionhub_hook_queue.py" in entry["command"]) == queued
        assert ("--detach" in entry["command"]) == (event in {"PreCompress", "SessionEnd"})
    for _ in range(2):
        said = rig.install(token)
    assert f"unchanged: {rig.settings_file}" in said
    assert len(json.loads(rig.settings_file.read_text())["hooks"]["SessionStart"]) == 2


def test_sessions_tools_preamble_resume_and_compression(rig: GeminiRig) -> None:
    rig.run(
        "Check the build and note what is left.\n"
        '@tool run_shell_command {"command": "echo built-ok"}\n'
        '@tool write_file {"file_path": "notes.md", "content": "TODO: task-777 follow up"}'
    )
    rig.settle()
    [first] = rig.session_ids()
    session = Session.objects.get(external_id=first)
    assert (session.source, session.status, session.end_reason) == (
        Source.GEMINI_CLI,
        SessionStatus.ENDED,
        "exit",
    )
    assert (session.prompt_count, session.tool_use_count, session.turn_count) == (1, 2, 1)
    assert session.compaction_count == 0  # PreCompress fired before each call, compressing nothing
    checks = LifecycleEvent.objects.filter(session=session, hook="PreCompress")
    assert checks.count() == 3 and all(e.kind == EventKind.OTHER for e in checks)
    assert session.model == MODEL  # named by no hook: from the chat recording
    assert session.project == PROJECT
    agent = Agent.objects.get()
    assert (agent.source, agent.name) == (Source.GEMINI_CLI, "billing-api")
    assert agent.developer  # the OS user@host the hook client reports
    assert "task-777" in (rig.project / "notes.md").read_text()  # the tools really ran
    shell = Observation.objects.get(session=session, tool_name="run_shell_command")
    assert shell.output_digest.startswith("built-ok")
    turn = LifecycleEvent.objects.get(session=session, kind=EventKind.TURN_END)
    assert turn.facts["final_message"].startswith("DONE Check the build")
    assert THOUGHT in turn.facts["reasoning"]  # the thoughts, from the chat recording
    tail = StreamTail.objects.filter(session=session).first()
    assert tail is not None and tail.final_message.startswith("DONE Check the build")
    assert summary_of(session).request.startswith("Check the build")

    # A second session: the preamble reaches the model, and is not the user's prompt.
    rig.run("What next?")
    rig.settle()
    second = rig.session_ids()[1]
    record = wait_for(
        "the continuity record",
        lambda: ContinuityRecord.objects.filter(
            session__external_id=second, stage=ContinuityRecord.Stage.START
        ).first(),
    )
    assert record.preamble and "task-777" in record.preamble
    [turn_call] = rig.turns_with("What next?")
    # The CLI escapes the context a hook returns (no tags of its own in it).
    shown = record.preamble.replace("<", "&lt;").replace(">", "&gt;")
    assert json.dumps(f"<hook_context>{shown}</hook_context>")[1:-1] in rig.mock.shown(turn_call)
    prompt = LifecycleEvent.objects.get(session__external_id=second, kind=EventKind.PROMPT)
    assert prompt.facts["text"] == "What next?"
    assert "hook_context" in prompt.payload["prompt"]  # as the CLI wrote it

    # Resume the first; its context fills up mid-turn and the CLI compresses.
    rig.run(
        "Resume the build check.\n@big\n"
        + '@tool run_shell_command {"command": "echo after-compression"}',
        first,
    )
    rig.settle()
    assert rig.session_ids() == [first, second]
    session.refresh_from_db()
    assert (session.status, session.suspend_count, session.prompt_count) == (
        SessionStatus.ENDED,
        1,
        2,
    )
    assert session.suspended_seconds > 0
    assert (session.tool_use_count, session.turn_count) == (4, 2)
    assert session.compaction_count == 1
    [compaction] = LifecycleEvent.objects.filter(session=session, kind=EventKind.COMPACTION_BEFORE)
    assert compaction.hook == "PreCompress"
    assert compaction.facts["compact_summary"] == SNAPSHOT
    assert len(rig.mock.side_requests()) >= 2  # the summary and its check: it did compress
    last = LifecycleEvent.objects.filter(session=session, kind=EventKind.TURN_END).latest(
        "occurred_at"
    )
    assert last.facts["final_message"].startswith("DONE Resume the build check")


def test_an_outage_and_a_secret_in_a_prompt(rig: GeminiRig) -> None:
    rig.run('Start.\n@tool run_shell_command {"command": "echo up"}')
    rig.settle()
    [sid] = rig.session_ids()
    before = sum(rig.stored().values())

    rig.server.kill()
    rig.run(
        f"While it is down, use the key {SECRET}.\n"
        + '@tool run_shell_command {"command": "echo down"}',
        sid,
    )
    waiting = sum(rig.expected().values()) - before
    spool = rig.home / ".sessionhub" / "spool.jsonl"
    wait_for(
        "every event of the run spooled",
        lambda: spool.exists() and len(spool.read_text().splitlines()) == waiting,
    )
    rig.server.start()
    rig.run("It is back.", sid)
    rig.settle()
    session = Session.objects.get(external_id=sid)
    assert (session.prompt_count, session.tool_use_count, session.turn_count) == (3, 2, 3)
    assert "sent" in rig.status().split("last log line:")[-1]

    # Redaction before storage: the secret is nowhere in what SessionHub keeps.
    stored = json.dumps(
        [
            list(LifecycleEvent.objects.values_list("payload", "facts")),
            list(StreamTail.objects.values_list("text", "final_message")),
            [getattr(s, f) for s in Summary.objects.all() for f in Summary.SECTIONS],
        ]
    )
    assert SECRET not in stored
    assert "[REDACTED:" in stored
