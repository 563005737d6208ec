"""The real Claude Code CLI, installed from npm (pinned), against a local mock of the
Anthropic Messages API (``mock_anthropic.py``) and a live SessionHub, with the hook client
installed exactly as docs/integrations.md tells users (the copy-the-file path).

Claude Code 2.1.330 declares Node >= 22, but its npm package only carries a postinstall
that copies the native binary of the platform package over ``bin/claude.exe``: a pinned
``npm install`` with the machine's Node 20 (an engines warning) gives a binary that needs
no Node at all. That is what runs here, on a fresh machine and in CI alike.

Each run is headless (``claude -p``); ``/compact`` works there too (``-p --continue
/compact``), so no terminal is driven. Besides SessionHub's own hooks, a recorder hook
(a one-line ``cat``) keeps every payload Claude Code fired: after each run the events
stored must be exactly those, per session and hook (nothing lost, nothing doubled),
whatever the async and detached hooks were doing when the CLI exited.

If the npm registry cannot be reached the tests fail, loudly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from lifecycle.models import Agent, EventKind, LifecycleEvent, Session, SessionStatus
from memory.models import (
    ContinuityRecord,
    McpCall,
    Observation,
    SessionFeatures,
    StreamTail,
    Summary,
)
from sessionhub.models import Team
from tests.factories import AgentFactory, SessionFactory, SummaryFactory
from tests.integrations.mock_anthropic import CLAUDE_CODE_VERSION, MockAnthropic
from tests.integrations.node_runtime import npm_prefix
from tests.integrations.test_hook_client_e2e import DevServer, free_port

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CLIENT = REPO / "integrations" / "claude-code" / "sessionhub_hook.py"
SETTLE_SECONDS = 60
REMOTE = "https://git.example.com/acme/billing-api.git"


@pytest.fixture(scope="module")
def claude() -> Path:
    prefix = npm_prefix("claude-code", {"@anthropic-ai/claude-code": CLAUDE_CODE_VERSION})
    binary = prefix / "node_modules" / ".bin" / "claude"
    done = subprocess.run(
        [binary, "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0 or not done.stdout.startswith(CLAUDE_CODE_VERSION):
        pytest.fail(f"!!! claude-code {CLAUDE_CODE_VERSION} from npm does not run: {done!r} !!!")
    return binary


@pytest.fixture
def server(tmp_path: Path) -> Any:
    if connection.vendor != "postgresql":
        pytest.fail(
            "!!! the real-CLI tests run a server process on the test database: PostgreSQL !!!"
        )
    dev = DevServer(free_port(), tmp_path / "server.log")
    dev.start()
    try:
        yield dev
    finally:
        if dev.proc is not None:
            dev.proc.kill()
            dev.proc.wait(timeout=30)


class Rig:
    """A throwaway HOME with the hook client installed as the docs say, a git project, the
    mock model and the real CLI."""

    def __init__(self, root: Path, claude: Path, server: DevServer, token: str, mock: Any):
        self.claude, self.server, self.mock = claude, server, mock
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
            "IS_SANDBOX": "1",  # --dangerously-skip-permissions is refused to root otherwise
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "ANTHROPIC_BASE_URL": mock.url,
            "ANTHROPIC_API_KEY": "sk-ant-test-not-a-key",
            "RECORD_DIR": str(self.records),
        }
        self._install(token)

    def _install(self, token: str) -> None:
        """docs/integrations.md, "To install nothing at all": copy the file, run install."""
        target = self.home / ".sessionhub" / "sessionhub_hook.py"
        subprocess.run(["install", "-D", "-m", "0755", str(CLIENT), str(target)], check=True)
        done = subprocess.run(
            [
                "python3",
                str(target),
                "install",
                "--user",
                "--url",
                self.server.url,
                "--token",
                "-",
            ],
            input=token + "\n",
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.home,
            check=True,
        )
        assert "config written" in done.stdout, done.stdout
        settings_file = self.home / ".claude" / "settings.json"
        settings = json.loads(settings_file.read_text())
        # The recorder: the user's own hook next to SessionHub's, for every event it takes.
        record = {"type": "command", "command": 'cat > "$RECORD_DIR/$(date +%s%N)-$$.json"'}
        for groups in settings["hooks"].values():
            groups.append({"matcher": "*", "hooks": [record]})
        settings_file.write_text(json.dumps(settings))

    def settings(self) -> dict[str, Any]:
        return json.loads((self.home / ".claude" / "settings.json").read_text())

    def run(self, prompt: str, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.claude), "-p", prompt, "--dangerously-skip-permissions", *args],
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        if ok:
            assert done.returncode == 0, (done.stdout, done.stderr)
        return done

    def recorded(self) -> list[dict[str, Any]]:
        out = []
        for path in sorted(self.records.iterdir()):
            text = path.read_text()
            if text.strip():
                out.append(json.loads(text))
        return out

    def expected(self) -> Counter[tuple[str, str]]:
        return Counter((r["session_id"], r["hook_event_name"]) for r in self.recorded())

    def stored(self) -> Counter[tuple[str, str]]:
        return Counter(LifecycleEvent.objects.values_list("session__external_id", "hook"))

    def complete(self) -> bool:
        """Every fired payload stored exactly once. Claude Code may kill a StopFailure hook
        (the recorder's too) as the CLI exits; the hook client's SessionEnd sends it again
        under the same id, so a StopFailure the recorder missed may be stored, once."""
        stored, expected = self.stored(), self.expected()
        for key in set(stored) | set(expected):
            if key[1] == "StopFailure" and not expected[key]:
                if stored[key] > 1:
                    return False
            elif stored[key] != expected[key]:
                return False
        return True

    def settle(self) -> None:
        """Wait until every payload Claude Code fired is stored (the async and detached
        hooks finish after the CLI), then check nothing is missing or doubled."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while time.monotonic() < deadline and not self.complete():
            time.sleep(0.2)
        assert self.complete(), (
            self.stored(),
            self.expected(),
            self.log(),
            self.server.log_path.read_text()[-3000:],
        )
        spool = self.home / ".sessionhub" / "spool.jsonl"
        assert not spool.exists() or not spool.read_text().strip()

    def session_ids(self) -> list[str]:
        """Session ids in the order Claude Code first fired a hook for them."""
        seen: list[str] = []
        for record in self.recorded():
            if record["session_id"] not in seen:
                seen.append(record["session_id"])
        return seen

    def log(self) -> str:
        path = self.home / ".sessionhub" / "hook.log"
        return path.read_text() if path.exists() else ""

    def requests_of(self, session_id: str) -> list[dict[str, Any]]:
        return [
            b for b in self.mock.messages() if session_id in json.dumps(b.get("metadata") or {})
        ]


def wait_for(what: str, check: Any) -> Any:
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"never happened: {what}")


def summary_of(session: Session) -> Summary:
    return wait_for(
        f"a summary of {session.external_id}",
        lambda: Summary.objects.filter(session=session, events_seen=session.event_count).first(),
    )


@pytest.fixture
def rig(tmp_path: Path, claude: Path, server: DevServer, token: str) -> Any:
    with MockAnthropic() as mock:
        yield Rig(tmp_path, claude, server, token, mock)


def test_installed_as_documented(rig: Rig) -> None:
    hooks = rig.settings()["hooks"]
    ours = {
        event: [h for g in groups for h in g["hooks"] if "sessionhub_hook" in str(h.get("args"))]
        for event, groups in hooks.items()
    }
    assert {e for e, found in ours.items() if found} >= {"StopFailure", "PostCompact"}
    for event, [entry] in ((e, f) for e, f in ours.items() if f):
        assert entry["command"].startswith("/")  # no PATH lookup
        assert entry["args"][0] == "-S"
        assert entry.get("async", False) == (
            event
            in {
                "PreToolUse",
                "PostToolUse",
                "PostToolUseFailure",
                "Notification",
                "SubagentStop",
                "PreCompact",
            }
        )
    folder = rig.home / ".sessionhub"
    assert folder.stat().st_mode & 0o777 == 0o700
    assert (folder / "config.json").stat().st_mode & 0o777 == 0o600


def test_sessions_preamble_resume_continue_and_compaction(rig: Rig) -> None:
    notes = rig.project / "notes.md"
    rig.run(
        "Check the build and note what is left.\n"
        '@tool Bash {"command": "echo built-ok; echo a-warning >&2"}\n'
        f'@tool Write {{"file_path": "{notes}", "content": "TODO: task-777 follow up"}}'
    )
    rig.settle()
    [first] = rig.session_ids()
    session = Session.objects.get(external_id=first)
    first_end = session.ended_at
    model = rig.requests_of(first)[0]["model"]
    assert session.status == SessionStatus.ENDED
    assert (session.prompt_count, session.tool_use_count, session.turn_count) == (1, 2, 1)
    assert session.model == model  # headless: named by no hook, read from the transcript
    assert session.project == "git.example.com/acme/billing-api"
    bash = Observation.objects.get(session=session, tool_name="Bash")
    assert bash.output_digest.startswith("built-ok")
    assert summary_of(session).request.startswith("Check the build")

    # A second session: the preamble reaches the model.
    rig.run("What next?")
    rig.settle()
    second = rig.session_ids()[1]
    record = wait_for(
        "the continuity record",
        # The preamble SessionStart asked for (the first prompt may ask again, by relevance).
        lambda: ContinuityRecord.objects.filter(
            session__external_id=second, stage=ContinuityRecord.Stage.START
        ).first(),
    )
    assert record.preamble and "task-777" in record.preamble
    sent = json.dumps([b.get("messages") for b in rig.requests_of(second)])
    assert json.dumps(record.preamble)[1:-1] in sent

    # --resume the first: it reopens; ended_at moves to the new end.
    rig.run("Resume the build check.", "--resume", first)
    rig.settle()
    session.refresh_from_db()
    assert (session.status, session.suspend_count, session.prompt_count) == (
        SessionStatus.ENDED,
        1,
        2,
    )
    assert session.ended_at > first_end
    assert session.suspended_seconds > 0

    # --continue (the newest session: the first one again), then /compact in it.
    rig.run("Keep going.", "--continue")
    rig.run("/compact", "--continue")
    rig.settle()
    session.refresh_from_db()
    assert rig.session_ids() == [first, second]
    assert session.suspend_count == 3
    assert session.compaction_count == 1  # one /compact, counted once
    assert session.turn_count == 3  # the compaction's own agent is no turn
    post = LifecycleEvent.objects.get(session=session, hook="PostCompact")
    assert "<summary>" in post.facts["compact_summary"]

    # An automatic compaction: the model reports a context nearly full.
    rig.run("Fill it up.\n@big\n" + '@tool Bash {"command": "echo after-compaction"}', "--continue")
    rig.settle()
    session.refresh_from_db()
    assert session.compaction_count == 2
    triggers = list(
        LifecycleEvent.objects.filter(session=session, hook="PreCompact").values_list(
            "facts__trigger", flat=True
        )
    )
    assert sorted(triggers) == ["auto", "manual"]
    assert session.status == SessionStatus.ENDED

    # /clear: the session ends (reason clear) and the new one follows it.
    rig.run("/clear", "--continue")
    rig.settle()
    session.refresh_from_db()
    assert session.end_reason == "clear"
    cleared = Session.objects.get(external_id=rig.session_ids()[2])
    assert cleared.previous_session_id == session.pk
    assert session.compaction_count == 2


def test_background_subagent_and_a_failing_turn(rig: Rig) -> None:
    sub_prompt = 'Look around.\n@tool Bash {"command": "echo from-the-subagent"}'
    agent_input = {
        "description": "list files",
        "prompt": sub_prompt,
        "subagent_type": "general-purpose",
        "run_in_background": True,
    }
    rig.run(f"Delegate the listing.\n@tool Agent {json.dumps(agent_input)}")
    rig.settle()
    [sid] = rig.session_ids()
    session = Session.objects.get(external_id=sid)
    fired = [r["hook_event_name"] for r in rig.recorded()]
    assert fired.count("UserPromptSubmit") == 2  # the user's and the injected notification
    assert session.prompt_count == 1
    note = LifecycleEvent.objects.get(session=session, kind=EventKind.NOTIFICATION)
    assert note.facts["injected"] == "task-notification"  # in the timeline
    sub_tool = LifecycleEvent.objects.get(
        session=session, hook="PostToolUse", facts__tool_name="Bash"
    )
    assert sub_tool.facts["agent_type"] == "general-purpose"
    assert sub_tool.facts["agent_id"]
    parent_tool = LifecycleEvent.objects.get(
        session=session, hook="PostToolUse", facts__tool_name="Agent"
    )
    assert "agent_id" not in parent_tool.facts
    summary = summary_of(session)
    features = SessionFeatures.objects.get(session=session)
    for tag in ("task-notification", "task-id", "tool-use-id", "output-file"):
        assert all(tag not in str(getattr(summary, f)) for f in Summary.SECTIONS), tag
        assert tag not in json.dumps(features.hot_topics), tag

    # A turn that the API fails: StopFailure registered, never "completed".
    rig.run("Now break.\n@fail", ok=False)
    rig.settle()
    failed_id = rig.session_ids()[1]
    failed = Session.objects.get(external_id=failed_id)
    stop = LifecycleEvent.objects.get(session=failed, hook="StopFailure")
    assert stop.facts["failed"] is True
    assert stop.facts["final_message"] == ""
    summary = summary_of(failed)
    assert "API Error" not in summary.completed
    assert "API Error" not in summary.final_message
    assert not StreamTail.objects.filter(session=failed, final_message__contains="API Error")


def test_large_edit_and_a_server_outage(rig: Rig) -> None:
    big = rig.project / "big.py"
    big.write_text("marker-line-1\n" + "x = 1\n" * 1_200_000)  # 7.2 MB
    rig.run(
        "Change the marker.\n"
        f'@tool Read {{"file_path": "{big}", "offset": 1, "limit": 3}}\n'
        f'@tool Edit {{"file_path": "{big}", "old_string": "marker-line-1", '
        '"new_string": "marker-line-2"}'
    )
    rig.settle()
    assert big.read_text().startswith("marker-line-2\n")
    edit = LifecycleEvent.objects.get(hook="PostToolUse", facts__tool_name="Edit")
    cut = edit.facts["client_trimmed"]["tool_response.originalFile"]
    assert cut > 7_000_000
    assert "more characters]" in edit.payload["tool_response"]["originalFile"]
    assert "cut" in rig.log() and "not accepted" not in rig.log()

    # The server goes away mid-session: everything is spooled, then delivered.
    [sid] = rig.session_ids()
    before = sum(rig.stored().values())
    rig.server.kill()
    rig.run('While it is down.\n@tool Bash {"command": "echo down"}', "--continue")
    waiting = sum(rig.expected().values()) - before
    spool = rig.home / ".sessionhub" / "spool.jsonl"
    wait_for(
        "every event of the run spooled",
        lambda: spool.exists() and len(spool.read_text().splitlines()) == waiting,
    )
    rig.server.start()
    rig.run("It is back.", "--continue")
    rig.settle()
    session = Session.objects.get(external_id=sid)
    assert session.prompt_count == 3
    assert (
        "sent"
        in subprocess.run(
            [sys.executable, str(rig.home / ".sessionhub" / "sessionhub_hook.py"), "status"],
            capture_output=True,
            text=True,
            env=rig.env,
            check=True,
        ).stdout.split("last log line:")[-1]
    )


def test_http_hooks_for_the_frequent_events(rig: Rig, token: str) -> None:
    """The docs' mix: HTTP hooks for the frequent events, the command hook for the rest.
    The HTTP events carry no git remote: they land in the same session (named by its id)
    but the agent is the one the command hooks named."""
    settings_file = rig.home / ".claude" / "settings.json"
    settings = json.loads(settings_file.read_text())
    http = {
        "type": "http",
        "url": f"{rig.server.url}/api/v1/hooks/claude-code",
        "headers": {"Authorization": "Bearer $SESSIONHUB_TOKEN"},
        "allowedEnvVars": ["SESSIONHUB_TOKEN"],
        "timeout": 5,
    }
    for event in ("UserPromptSubmit", "PreToolUse", "PostToolUse", "PreCompact"):
        for group in settings["hooks"][event]:
            group["hooks"] = [
                http if "sessionhub_hook" in str(h.get("args")) else h for h in group["hooks"]
            ]
    settings_file.write_text(json.dumps(settings))
    rig.env["SESSIONHUB_TOKEN"] = token
    rig.run('Over HTTP.\n@tool Bash {"command": "echo via-http"}')
    rig.settle()
    [sid] = rig.session_ids()
    session = Session.objects.get(external_id=sid)
    assert (session.prompt_count, session.tool_use_count) == (1, 1)
    assert session.project == "git.example.com/acme/billing-api"
    # The HTTP events name no remote, but their session (by id) is the command hooks':
    # one agent, named by the remote.
    assert LifecycleEvent.objects.filter(session=session, hook="UserPromptSubmit").count() == 1
    assert Agent.objects.count() == 1


def test_the_agent_searches_its_teams_memory_over_mcp(rig: Rig, team: Team) -> None:
    """Installed as documented, the CLI connects to SessionHub's MCP endpoint; the model
    calls the search tool, the answer reaches the model as the tool's result, the call is
    recorded, and once the tool use reaches SessionHub through the hooks the record names
    the session that asked."""
    teammate = AgentFactory(team=team, name="billing (bob)", project="git.example.com/acme/web")
    past = SessionFactory(agent=teammate, external_id="bobs-session")
    SummaryFactory(
        session=past,
        request="Decide the retry policy for the webhook dispatcher",
        learned="We settled on exponential backoff with jitter for webhook retries.",
    )
    registered = json.loads((rig.home / ".claude.json").read_text())["mcpServers"]
    assert registered["sessionhub"]["url"] == f"{rig.server.url}/api/v1/mcp"
    search = {"query": "webhook retry policy", "limit": 3}
    rig.run(
        "What did we decide about webhook retries?\n"
        f"@tool mcp__sessionhub__search_memory {json.dumps(search)}"
    )
    rig.settle()
    [sid] = rig.session_ids()
    results = [
        block
        for body in rig.requests_of(sid)
        for message in body.get("messages") or []
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert results, "the model never got the tool's result"
    handed = json.dumps(results)
    assert str(past.pk) in handed and "retry policy for the webhook dispatcher" in handed
    record = McpCall.objects.get(tool="search_memory")
    answer = json.loads(record.answer)
    session = Session.objects.get(external_id=sid)
    # The asking session (its own prompt holds the words) is left out.
    assert answer["asking_session"]["session_id"] == str(session.pk)
    assert [h["session_id"] for h in answer["hits"]] == [str(past.pk)]
    assert list(record.returned.all()) == [past]
    assert record.arguments == search
    assert record.client.startswith("claude-code")
    assert record.tool_use_id.startswith("toolu_")
    wait_for(
        "the call linked to the session that asked",
        lambda: McpCall.objects.filter(pk=record.pk, session=session).exists(),
    )
