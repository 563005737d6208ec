"""The real Codex CLI, installed from npm (pinned), against a local mock of the OpenAI
Responses API (``mock_openai_responses.py``) and a live SessionHub, with the hook client
installed as docs/integrations.md tells users (``install --codex``, which also trusts the
hooks through Codex's own app server).

Codex's npm package is a small launcher plus the native binary of the platform, as an
optional dependency: it runs on the machine's Node 20. Each run is ``codex exec`` (one
turn), ``codex exec resume <id>`` continues a session; the mock reports a nearly full
context to make Codex compact on its own (``model_auto_compact_token_limit``). Beside
SessionHub's hooks a recorder hook keeps every payload Codex fired: the events stored must
be exactly those, per session and hook, nothing lost or doubled, across an outage too.

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
from sessionhub.models import ApiToken
from tests.integrations.cli_rig import PROJECT, CliRig, dev_server, wait_for
from tests.integrations.mock_openai_responses import (
    CODEX_VERSION,
    REASONING,
    SUMMARY,
    MockResponses,
)
from tests.integrations.node_runtime import npm_prefix
from tests.integrations.test_hook_client_e2e import DevServer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MODEL = "gpt-5.1-codex"
SECRET = "ghp_R8x2Kq7VtL0mZ4nB6cD1eF3gH5jJ9kP2sT7u"


@pytest.fixture(scope="module")
def codex() -> Path:
    prefix = npm_prefix("codex", {"@openai/codex": CODEX_VERSION})
    binary = prefix / "node_modules" / ".bin" / "codex"
    done = subprocess.run(
        [binary, "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0 or CODEX_VERSION not in done.stdout:
        pytest.fail(f"!!! @openai/codex {CODEX_VERSION} from npm does not run: {done!r} !!!")
    return binary


@pytest.fixture(scope="module")
def mock() -> Iterator[MockResponses]:
    with MockResponses() as server:
        yield server


@pytest.fixture(scope="module")
def server(django_db_setup: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    dev = dev_server(tmp_path_factory.mktemp("codex-server"))
    try:
        yield dev
    finally:
        if dev.proc is not None:
            dev.proc.kill()
            dev.proc.wait(timeout=30)


class CodexRig(CliRig):
    def __init__(self, root: Path, codex: Path, server: DevServer, mock: MockResponses):
        super().__init__(root, server, "codex", {"MOCK_API_KEY": "sk-mock-not-a-key"})
        self.codex, self.mock = codex, mock
        self.codex_home = self.home / ".codex"
        self.codex_home.mkdir()
        # The user's own Codex configuration: a model provider at the mock, compaction
        # early enough for the mock's "nearly full" answer to set it off.
        (self.codex_home / "config.toml").write_text(
            f'model = "{MODEL}"\n'
            'model_provider = "mock"\n'
            "model_auto_compact_token_limit = 200000\n"
            "[model_providers.mock]\n"
            'name = "Mock"\n'
            f'base_url = "{mock.url}"\n'
            'env_key = "MOCK_API_KEY"\n'
            'wire_api = "responses"\n'
        )

    @property
    def hooks_file(self) -> Path:
        return self.codex_home / "hooks.json"

    def install_all(self, token: str) -> str:
        """``install --codex`` (trusting SessionHub's hooks), then the recorder, which the
        user trusts as /hooks would."""
        said = self.install(token, "--codex-bin", str(self.codex))
        self.add_recorder(self.hooks_file, timeout=10)
        self.app_server(trust="RECORD_DIR")
        return said

    def app_server(self, trust: str = "") -> list[dict[str, Any]]:
        """The hooks Codex lists for the project; with ``trust``, trust those whose command
        holds it first (what /hooks does for the user)."""
        hello = {"clientInfo": {"name": "sessionhub-test", "version": "1"}}
        script = [{"id": 1, "method": "initialize", "params": hello}, {"method": "initialized"}]
        listing = {"id": 2, "method": "hooks/list", "params": {"cwds": [str(self.project)]}}
        proc = subprocess.Popen(
            [str(self.codex), "app-server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=self.env,
            cwd=self.project,
        )
        assert proc.stdin is not None and proc.stdout is not None

        def ask(message: dict[str, Any]) -> dict[str, Any]:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            for line in proc.stdout:
                answer = json.loads(line)
                if answer.get("id") == message["id"]:
                    assert "error" not in answer, answer
                    return answer["result"]
            raise AssertionError("codex app-server closed")

        try:
            ask(script[0])
            proc.stdin.write(json.dumps(script[1]) + "\n")
            hooks = [h for e in ask(listing)["data"] for h in e["hooks"]]
            if trust:
                value = {
                    h["key"]: {"trusted_hash": h["currentHash"]}
                    for h in hooks
                    if trust in h.get("command", "")
                }
                edit = {"keyPath": "hooks.state", "mergeStrategy": "upsert", "value": value}
                ask({"id": 3, "method": "config/batchWrite", "params": {"edits": [edit]}})
                hooks = [h for e in ask(dict(listing, id=4))["data"] for h in e["hooks"]]
            return hooks
        finally:
            proc.stdin.close()
            proc.wait(timeout=30)

    def run(self, prompt: str, *resume: str) -> subprocess.CompletedProcess[str]:
        """``codex exec`` (``codex exec resume ID`` with ``resume``): no hook-trust bypass,
        so a hook runs only if it was trusted."""
        command = [str(self.codex), "exec", *(["resume", *resume] if resume else [])]
        done = subprocess.run(
            [*command, "--dangerously-bypass-approvals-and-sandbox", prompt],
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        assert done.returncode == 0, (done.stdout, done.stderr[-3000:])
        return done


@pytest.fixture
def rig(
    tmp_path: Path, codex: Path, server: DevServer, mock: MockResponses, token: str
) -> CodexRig:
    if server.proc is None or server.proc.poll() is not None:
        server.start()  # a test before this one took it down
    rig = CodexRig(tmp_path, codex, server, mock)
    rig.install_all(token)
    return rig


def summary_of(session: Session) -> Summary:
    return wait_for(
        f"a summary of {session.external_id}",
        lambda: Summary.objects.filter(session=session, events_seen=session.event_count).first(),
    )


def test_installed_and_trusted(rig: CodexRig, token: str) -> None:
    hooks = json.loads(rig.hooks_file.read_text())["hooks"]
    ours = {
        event: [h for g in groups for h in g["hooks"] if "sessionhub_hook" in h["command"]]
        for event, groups in hooks.items()
    }
    assert set(ours) == {
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PermissionRequest",
        "PostToolUse",
        "PreCompact",
        "PostCompact",
        "SubagentStart",
        "SubagentStop",
        "Stop",
        "Interrupt",
        "SessionEnd",
    }
    for event, [entry] in ours.items():
        assert entry["command"].startswith("/")  # no PATH lookup
        assert entry["command"].endswith("--gateway codex"), entry
        queued = event in {"PreToolUse", "PermissionRequest", "PostToolUse", "PreCompact"}
        assert ("sessionhub_hook_queue.py" in entry["command"]) == queued or event.startswith(
            "Subagent"
        )
    listed = rig.app_server()
    assert {h["trustStatus"] for h in listed} == {"trusted"}, listed
    assert len([h for h in listed if "sessionhub_hook" in h["command"]]) == 12
    # Installing again keeps the recorder and changes nothing of SessionHub's hooks.
    for _ in range(2):
        again = rig.install(token, "--codex-bin", str(rig.codex))
    assert f"unchanged: {rig.hooks_file}" in again and "trusted in Codex: 12" in again
    assert len(rig.app_server()) == 24
    assert (rig.home / ".sessionhub").stat().st_mode & 0o777 == 0o700


def test_sessions_tools_preamble_resume_and_compaction(rig: CodexRig) -> None:
    rig.run(
        "Check the build and note what is left.\n"
        '@tool exec_command {"cmd": "echo built-ok"}\n'
        '@tool exec_command {"cmd": "echo TODO: task-777 follow up > notes.md"}'
    )
    rig.settle()
    [first] = rig.session_ids()
    session = Session.objects.get(external_id=first)
    assert (session.source, session.status, session.end_reason) == (
        Source.CODEX,
        SessionStatus.ENDED,
        "other",
    )
    assert (session.prompt_count, session.tool_use_count, session.turn_count) == (1, 2, 1)
    assert session.model == MODEL
    assert session.project == PROJECT
    assert session.token_count and session.token_count > 0  # from the rollout
    agent = Agent.objects.get()
    label = ApiToken.objects.get().gateway_name
    assert (agent.source, agent.name) == (Source.CODEX, "billing-api")
    assert agent.developer  # the OS user@host the hook client reports
    assert agent.external_id == f"{label}:{PROJECT}"
    bash = Observation.objects.filter(session=session, tool_name="Bash").order_by("id")
    digests = [o.output_digest for o in bash]
    assert len(digests) == 2 and digests[0].startswith("built-ok"), digests
    assert "task-777" in (rig.project / "notes.md").read_text()  # the tool really ran
    turn = LifecycleEvent.objects.get(session=session, kind=EventKind.TURN_END)
    assert turn.facts["final_message"].startswith("DONE Check the build")
    assert REASONING.split(";")[0] in turn.facts["reasoning"]  # from the rollout
    tail = StreamTail.objects.filter(session=session).first()
    assert tail is not None and tail.final_message.startswith("DONE Check the build")
    assert summary_of(session).request.startswith("Check the build")

    # A second session: the preamble reaches the model.
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
    shown = [rig.mock.shown(b) for b in rig.mock.requests_of(second)]
    assert shown and json.dumps(record.preamble)[1:-1] in shown[0]

    # Resume the first, with a context that fills up: Codex compacts on its own.
    rig.run(
        "Resume the build check.\n@big\n" + '@tool exec_command {"cmd": "echo after-compaction"}',
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
    assert session.compaction_count == 1  # PreCompact, PostCompact, SessionStart(compact)
    assert session.tool_use_count == 4
    assert session.turn_count == 2
    post = LifecycleEvent.objects.get(session=session, hook="PostCompact")
    assert post.facts["trigger"] == "auto"
    assert post.facts["compact_summary"] == SUMMARY
    last = LifecycleEvent.objects.filter(session=session, hook="Stop").order_by("-occurred_at")[0]
    assert last.facts["final_message"].startswith("DONE Resume the build check")
    assert SUMMARY not in json.dumps(
        list(LifecycleEvent.objects.filter(kind=EventKind.TURN_END).values_list("facts"))
    )


def test_an_outage_and_a_secret_in_a_prompt(rig: CodexRig) -> None:
    rig.run('Start.\n@tool exec_command {"cmd": "echo up"}')
    rig.settle()
    [sid] = rig.session_ids()
    before = sum(rig.stored().values())

    rig.server.kill()
    rig.run(
        f"While it is down, deploy with {SECRET}.\n" + '@tool exec_command {"cmd": "echo down"}',
        sid,
    )
    waiting = sum(rig.expected().values()) - before
    spool = rig.home / ".sessionhub" / "spool.jsonl"
    wait_for(
        "every event of the run spooled",
        lambda: spool.exists() and len(spool.read_text().splitlines()) == waiting,
    )
    assert SECRET in spool.read_text()  # the client keeps the payload as the CLI wrote it
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
            [getattr(s, f) for s in Summary.objects.all() for f in (*Summary.SECTIONS,)],
        ]
    )
    assert SECRET not in stored
    assert "[REDACTED:" in stored
