"""The Claude Code hook client end to end: the real script, run as Claude Code runs it (one
process per hook, the hook JSON on stdin), against a live SessionHub over real HTTP.

- Every line of every ``claude-code/*/hooks.jsonl`` fixture goes through the client; the
  database then holds the right sessions, events, reasoning tails, final messages,
  summaries and pending tasks.
- The server is killed halfway through and started again: the client stays silent and
  exits 0 while it is away, spools, and sends the spool on the next call. Every event is
  stored exactly once.
- ``SessionStart`` prints the continuity preamble of the right prior session, in the JSON
  form Claude Code adds to the context; a cold start prints nothing.

The transcript each hook names is the scenario's ``transcript.jsonl`` as it stood at that
call: the file grows turn by turn, so a ``Stop`` reads its own turn and not a later one.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests
from django.db import connection
from django.db.models import Count

import sessionhub
from lifecycle.models import EventKind, LifecycleEvent, Session, SessionStatus
from memory.models import ContinuityRecord, Observation, SessionFeatures, StreamTail, Summary
from tests.conftest import CLAUDE_CODE_SCENARIOS, FIXTURES, claude_code_hooks
from tests.lifecycle.test_replay_http import EXPECTED_CLAUDE_CODE
from tests.memory.test_pipeline import OPEN_WORK, task_list_closed, without_tasks_done

pytestmark = pytest.mark.django_db(transaction=True)

REPO = Path(__file__).resolve().parents[2]
CLIENT = REPO / "integrations" / "claude-code" / "sessionhub_hook.py"
# The project whose code this test process runs: the server subprocess runs the same one.
PROJECT = Path(sessionhub.__file__).resolve().parent.parent

# The TODO each scenario's transcript plants in the model's thinking ("TODO: task-NNNN
# ..."): a plan, which is never a pending task (issue 32).
PENDING_TASK = {
    "basic": "task-2731",
    "clear": "task-3094",
    "compact": "task-1862",
    "crash": "task-5507",
    "secrets": "task-4418",
}
# The next step each scenario's first final message names ("Next step: ...").
NEXT_STEP = {
    "basic": "Next step: regenerate the November exports.",
    "clear": "Next step: rebuild the search index.",
    "compact": "Next step: mention the change in RELEASE_NOTES.md.",
    "crash": "Next step: check the invoice totals.",
    "secrets": "Next step: purge the CDN cache.",
}
SECRET_IN_FIXTURE = "AKIAN9YAT71DNVPUM7HS"  # the AWS key inside the secrets scenario
TRANSCRIPT_EVENTS = {"Stop", "SubagentStop", "SessionEnd"}
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def words(text: str) -> str:
    return " ".join(text.split())


# --------------------------------------------------------------------------- the client


class HookClient:
    """Runs sessionhub_hook.py the way Claude Code does, with a private HOME and spool."""

    def __init__(self, root: Path, url: str, token: str, timeout: float = 10.0) -> None:
        self.home = root / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.spool = root / "spool" / "spool.jsonl"
        self.timeout = timeout
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "SESSIONHUB_URL": url,
            "SESSIONHUB_TOKEN": token,
            "SESSIONHUB_SPOOL": str(self.spool),
            "SESSIONHUB_TIMEOUT": str(timeout),
        }

    def run(self, hook: dict[str, Any] | None, *args: str) -> subprocess.CompletedProcess[str]:
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, str(CLIENT), *args],
            input="" if hook is None else json.dumps(hook),
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.home,
            timeout=self.timeout + 30,
            check=False,
        )
        elapsed = time.monotonic() - started
        assert done.returncode == 0, f"exit {done.returncode}: {done.stderr}\n{self.log()}"
        # Its own deadline, plus the interpreter's start-up.
        assert elapsed < self.timeout + 5, f"the hook took {elapsed:.1f}s"
        return done

    def hook(self, hook: dict[str, Any]) -> str:
        """One hook call: exit 0, nothing on stderr; returns stdout."""
        done = self.run(hook)
        assert done.stderr == "", done.stderr
        return done.stdout

    def spooled(self) -> list[dict[str, Any]]:
        """The events waiting in the spool (and its side files), in order."""
        events = []
        for path in [self.spool, *sorted(self.spool.parent.glob(self.spool.name + ".pending-*"))]:
            if path.exists():
                events += [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        return events

    def log(self) -> str:
        path = self.home / ".sessionhub" / "hook.log"
        return path.read_text() if path.exists() else ""


class Scenario:
    """A fixture scenario whose transcript grows, call by call, as Claude Code writes it."""

    def __init__(self, name: str, folder: Path) -> None:
        self.name = name
        self.lines = claude_code_hooks(name)
        source = FIXTURES / "claude-code" / name / "transcript.jsonl"
        self.records = [x for x in source.read_text().splitlines() if x.strip()]
        self.transcript = folder / f"{name}-{self.lines[0]['session_id']}.jsonl"
        self.transcript.parent.mkdir(parents=True, exist_ok=True)
        self.transcript.write_text("")
        self.written = 0
        self.cuts = self._cuts()

    @property
    def session_id(self) -> str:
        return self.lines[0]["session_id"]

    def _cuts(self) -> list[int]:
        """How many transcript records exist at each hook call."""
        cuts, upto = [], 0
        for line in self.lines:
            name = line["hook_event_name"]
            if name == "Stop":
                wanted = words(line["last_assistant_message"])
                upto = next(
                    i + 1
                    for i in range(upto, len(self.records))
                    if wanted in [words(t) for t in self._blocks(i, "text")]
                )
            elif name == "SessionEnd":
                upto = len(self.records)
            cuts.append(upto)
        return cuts

    def _blocks(self, index: int, kind: str) -> list[str]:
        record = json.loads(self.records[index])
        if record.get("type") != "assistant":
            return []
        content = record["message"]["content"]
        if isinstance(content, str):
            return [content] if kind == "text" else []
        return [b[kind] for b in content if b.get("type") == kind and isinstance(b.get(kind), str)]

    def hook(self, index: int) -> dict[str, Any]:
        """The hook line, its transcript written up to that moment and pointed at."""
        cut = self.cuts[index]
        if cut > self.written:
            with self.transcript.open("a") as handle:
                handle.write("".join(r + "\n" for r in self.records[self.written : cut]))
            self.written = cut
        line = dict(self.lines[index])
        line["transcript_path"] = str(self.transcript)
        return line

    def last_thinking(self, index: int) -> str:
        """The newest thinking block in the transcript as it stood at hook `index`."""
        for i in reversed(range(self.cuts[index])):
            blocks = self._blocks(i, "thinking")
            if blocks:
                return blocks[-1]
        return ""

    def visible_texts(self) -> list[str]:
        return [t for i in range(len(self.records)) for t in self._blocks(i, "text")]


def replay(client: HookClient, scenario: Scenario, indexes: range | None = None) -> None:
    """Send hook lines through the client with the server up: all delivered, none spooled."""
    for index in indexes if indexes is not None else range(len(scenario.lines)):
        out = client.hook(scenario.hook(index))
        assert out == "", f"{scenario.name} line {index}: unexpected stdout {out!r}"
        assert client.spooled() == [], f"spooled with the server up:\n{client.log()}"


# --------------------------------------------------------------------------- checks


def check_scenario(scenario: Scenario) -> Session:
    """What the database must hold after every line of a scenario went through the client."""
    lines = scenario.lines
    session = Session.objects.get(external_id=scenario.session_id)
    status, reason, prompts, tools, turns, compactions = EXPECTED_CLAUDE_CODE[scenario.name]
    assert (session.status, session.end_reason) == (status, reason)
    assert (session.prompt_count, session.tool_use_count, session.turn_count) == (
        prompts,
        tools,
        turns,
    )
    assert session.compaction_count == compactions
    assert session.channel == "cli"
    assert session.cwd == session.project == lines[0]["cwd"]
    assert session.model == "claude-opus-4-1"
    if status == SessionStatus.ENDED:
        assert session.ended_at is not None

    # Every hook call stored exactly once, under the client's own event id, in order.
    events = list(session.events.order_by("occurred_at", "id"))
    assert len(events) == len(lines) == session.event_count
    ids = [e.event_id for e in events]
    assert len(set(ids)) == len(ids)
    assert all(UUID_RE.match(i) for i in ids), ids
    assert [e.hook for e in events] == [x["hook_event_name"] for x in lines]
    assert events[0].kind == EventKind.SESSION_START
    if status == SessionStatus.ENDED:
        assert events[-1].kind == EventKind.SESSION_END

    # One reasoning tail per turn end: thinking only, never the visible answer.
    stops = [i for i, x in enumerate(lines) if x["hook_event_name"] == "Stop"]
    tails = list(StreamTail.objects.filter(session=session).order_by("captured_at", "id"))
    assert len(tails) == len(stops) == turns
    visible = [words(t) for t in scenario.visible_texts()]
    for tail, index in zip(tails, stops, strict=True):
        assert tail.final_message == lines[index]["last_assistant_message"]
        assert tail.text, f"{scenario.name}: empty tail at line {index}"
        assert tail.text.endswith(words(scenario.last_thinking(index))), tail.text
        assert tail.token_count == len(tail.text.split()) <= 100
        for text in visible:
            assert text not in tail.text
            assert tail.text not in text
    assert PENDING_TASK[scenario.name] in tails[0].text
    turn_ends = [e for e in events if e.kind == EventKind.TURN_END]
    assert [e.facts["final_message"] for e in turn_ends] == [
        lines[i]["last_assistant_message"] for i in stops
    ]
    assert all(PENDING_TASK[scenario.name] in e.facts["reasoning"] for e in turn_ends)

    # Tool uses became observations (post phase only).
    assert Observation.objects.filter(session=session).count() == tools

    # The summary is up to date and its "completed" reflects the final assistant message.
    final = lines[stops[-1]]["last_assistant_message"]
    summary = Summary.objects.get(session=session)
    assert summary.final_message == final
    assert summary.events_seen == len(lines)
    done = without_tasks_done(summary.completed, task_list_closed(lines))
    assert done
    assert done in words(final)
    assert summary.request.startswith(lines[1]["prompt"])
    if "Next step:" in final:
        assert NEXT_STEP[scenario.name] in summary.next_steps
    # The summary hands on what is open, and never a step a later turn did (compact's
    # second turn wrote the release notes its first answer named).
    for step in OPEN_WORK[scenario.name]:
        assert step in summary.next_steps
    if scenario.name == "compact":
        assert "RELEASE_NOTES" not in summary.next_steps

    # The TODO the transcript plants in the model's thinking is its plan, not the session's
    # open work (issue 32); what a final message hands on ("Next step: ...") is, until a
    # later turn does it.
    features = SessionFeatures.objects.get(session=session)
    pending = {task["id"] for task in features.pending_tasks}
    assert PENDING_TASK[scenario.name] not in pending, features.pending_tasks
    texts = [task["text"] for task in features.pending_tasks]
    assert texts == OPEN_WORK[scenario.name], texts
    assert lines[0]["cwd"] in features.active_projects

    if scenario.name == "secrets":
        stored = json.dumps(
            [
                list(session.events.values_list("payload", "facts")),
                list(StreamTail.objects.filter(session=session).values_list("text")),
                list(Observation.objects.filter(session=session).values_list("input_digest")),
                [getattr(summary, f) for f in (*Summary.SECTIONS, "final_message")],
            ]
        )
        assert SECRET_IN_FIXTURE not in stored
    return session


def assert_no_duplicates() -> None:
    doubled = (
        LifecycleEvent.objects.values("event_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .values_list("event_id", flat=True)
    )
    assert list(doubled) == []
    assert LifecycleEvent.objects.filter(session__isnull=True).count() == 0


# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize("name", CLAUDE_CODE_SCENARIOS)
def test_fixture_through_the_client(
    live_server: Any, token: str, tmp_path: Path, name: str
) -> None:
    client = HookClient(tmp_path, live_server.url, token)
    scenario = Scenario(name, tmp_path / "transcripts")
    replay(client, scenario)  # a cold SessionStart prints nothing either

    check_scenario(scenario)
    assert_no_duplicates()
    assert LifecycleEvent.objects.count() == len(scenario.lines)
    assert client.log() == ""  # nothing went wrong, so nothing was logged


def test_session_start_prints_the_preamble_of_the_right_prior_session(
    live_server: Any, token: str, tmp_path: Path
) -> None:
    client = HookClient(tmp_path, live_server.url, token)
    # Another project's session (its next step left open) and then the basic session.
    for name in ("clear", "basic"):
        replay(client, Scenario(name, tmp_path / "transcripts"))
    basic = claude_code_hooks("basic")
    prior = Session.objects.get(external_id=basic[0]["session_id"])
    assert prior.status == SessionStatus.ENDED

    new_id = str(uuid.uuid4())
    start = {
        "session_id": new_id,
        "transcript_path": str(tmp_path / "transcripts" / f"{new_id}.jsonl"),
        "cwd": basic[0]["cwd"],
        "permission_mode": "default",
        "hook_event_name": "SessionStart",
        "source": "startup",
        "model": "claude-opus-4-1",
    }
    out = client.hook(start)
    assert out.endswith("\n") and out.count("\n") == 1, repr(out)
    answer = json.loads(out)
    assert set(answer) == {"hookSpecificOutput"}
    assert set(answer["hookSpecificOutput"]) == {"hookEventName", "additionalContext"}
    assert answer["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = answer["hookSpecificOutput"]["additionalContext"]
    # What the prior session left open: the step its final message handed on; the TODO of
    # its thinking is no task (issue 32).
    assert "regenerate the November exports" in context
    assert "task-2731" not in context
    assert "ledger-sync" in context  # its project
    # Another project's session is not "prior": neither its open step nor its project.
    assert "rebuild the search index" not in context
    assert "task-3094" not in context
    assert "docs-portal" not in context

    session = Session.objects.get(external_id=new_id)
    assert session.agent_id == prior.agent_id
    record = ContinuityRecord.objects.get(session=session)
    assert record.preamble == context
    assert list(record.sources.values_list("pk", flat=True)) == [prior.pk]

    # A SessionStart after a compaction asks nothing and prints nothing.
    assert client.hook(dict(start, source="compact")) == ""
    assert ContinuityRecord.objects.filter(session=session).count() == 1

    # A cold start: a working directory never seen prints nothing.
    cold_id = str(uuid.uuid4())
    cold = dict(start, session_id=cold_id, cwd="/home/dev/src/never-seen-before")
    assert client.hook(cold) == ""
    cold_session = Session.objects.get(external_id=cold_id)
    assert ContinuityRecord.objects.get(session=cold_session).preamble == ""
    assert client.spooled() == []
    assert client.log() == ""


def test_git_remote_names_the_project_across_checkouts(
    live_server: Any, token: str, tmp_path: Path
) -> None:
    """Two checkouts of one repository (https with credentials, then ssh) are one project:
    one agent, and the second checkout's session continues the first's."""
    client = HookClient(tmp_path, live_server.url, token)
    checkouts = {
        "https": "https://alice:s3cr3t-pw@github.com/Acme/billing-api.git",
        "ssh": "git@github.com:Acme/billing-api.git",
    }
    cwds = {}
    for name, remote in checkouts.items():
        root = tmp_path / name / "billing-api"
        (root / ".git").mkdir(parents=True)
        (root / ".git" / "config").write_text(
            f'[core]\n\tbare = false\n[remote "origin"]\n\turl = {remote}\n'
            "\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
        )
        (root / "src").mkdir()
        cwds[name] = str(root / "src")

    def call(session_id: str, cwd: str, hook: str, **extra: Any) -> str:
        line = {"session_id": session_id, "cwd": cwd, "hook_event_name": hook} | extra
        return client.hook(line | {"transcript_path": str(tmp_path / "none.jsonl")})

    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    assert call(first, cwds["https"], "SessionStart", source="startup") == ""
    call(first, cwds["https"], "UserPromptSubmit", prompt="Rotate the billing API keys")
    call(first, cwds["https"], "SessionEnd", reason="prompt_input_exit")
    out = call(second, cwds["ssh"], "SessionStart", source="startup")

    one, two = (Session.objects.get(external_id=i) for i in (first, second))
    assert one.project == two.project == "github.com/Acme/billing-api"
    assert one.agent_id == two.agent_id
    assert one.agent.external_id.endswith(":github.com/Acme/billing-api")
    assert (one.cwd, two.cwd) == (cwds["https"], cwds["ssh"])
    stored = json.dumps(list(LifecycleEvent.objects.values_list("payload", "facts")))
    assert "s3cr3t" not in stored and "s3cr3t" not in one.project
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "Rotate the billing API keys" in context
    assert client.log() == ""


def test_proxy_settings_are_honoured(live_server: Any, token: str, tmp_path: Path) -> None:
    """With a proxy in the environment the client goes through it (here: a dead one, so
    the event waits in the spool); with ``no_proxy`` naming the server it goes direct."""
    client = HookClient(tmp_path, live_server.url, token)
    scenario = Scenario("basic", tmp_path / "transcripts")
    client.env |= {"http_proxy": f"http://127.0.0.1:{free_port()}", "no_proxy": ""}
    assert client.hook(scenario.hook(0)) == ""
    assert len(client.spooled()) == 1
    assert LifecycleEvent.objects.count() == 0

    client.env["no_proxy"] = "localhost,127.0.0.1"
    assert client.hook(scenario.hook(1)) == ""
    assert client.spooled() == []
    assert Session.objects.get(external_id=scenario.session_id).event_count == 2


# --------------------------------------------------------------------------- outage


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class DevServer:
    """SessionHub in a subprocess (``manage.py runserver``) on the test database.

    pytest-django's live_server cannot be stopped and started again; this one can. No
    broker: tasks run in-process after commit, as in the embedded setup.
    """

    def __init__(self, port: int, log_path: Path) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        db = connection.settings_dict
        credentials = quote(db["USER"] or "", safe="")
        if db.get("PASSWORD"):
            credentials += ":" + quote(db["PASSWORD"], safe="")
        host = db.get("HOST") or "127.0.0.1"
        port_part = f":{db['PORT']}" if db.get("PORT") else ""
        keep = {
            k: v
            for k, v in os.environ.items()
            if k not in ("REDIS_URL", "DATABASE_URL", "DJANGO_SETTINGS_MODULE")
            and not k.startswith(("SESSIONHUB_", "CELERY_", "PYTEST"))
        }
        self.env = keep | {
            "DATABASE_URL": f"postgres://{credentials}@{host}{port_part}/{quote(db['NAME'])}",
            "DJANGO_SETTINGS_MODULE": "sessionhub.settings",
            "DEBUG": "1",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DB_CONN_MAX_AGE": "0",
            "PYTHONUNBUFFERED": "1",
        }

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    str(PROJECT / "manage.py"),
                    "runserver",
                    "--noreload",
                    f"127.0.0.1:{self.port}",
                ],
                cwd=PROJECT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the server exited:\n{self.log_path.read_text()}")
            try:
                answer = requests.get(f"{self.url}/healthz", timeout=2)
                if answer.status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise AssertionError(f"the server did not come up:\n{self.log_path.read_text()}")

    def kill(self) -> None:
        """Stop it hard, as a crash or a redeploy would."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self.proc = None
        with pytest.raises(requests.ConnectionError):
            requests.get(f"{self.url}/healthz", timeout=2)


@pytest.fixture
def dev_server(tmp_path: Path) -> Any:
    if connection.vendor != "postgresql":
        pytest.skip(
            "!!! SKIPPED: the outage test runs a second server process on the test "
            f"database, which needs PostgreSQL (this run uses {connection.vendor}) !!!"
        )
    server = DevServer(free_port(), tmp_path / "server.log")
    server.start()
    try:
        yield server
    finally:
        if server.proc is not None:
            server.proc.kill()
            server.proc.wait(timeout=30)


@pytest.mark.slow
def test_server_stopped_halfway_every_event_stored_once(
    dev_server: DevServer, token: str, tmp_path: Path
) -> None:
    client = HookClient(tmp_path, dev_server.url, token)
    scenarios = [Scenario(name, tmp_path / "transcripts") for name in CLAUDE_CODE_SCENARIOS]
    halves = {s.name: len(s.lines) // 2 for s in scenarios}

    # First half of every scenario with the server up.
    for scenario in scenarios:
        replay(client, scenario, range(halves[scenario.name]))
    sent_before = sum(halves.values())
    assert LifecycleEvent.objects.count() == sent_before

    # The server dies. The rest, but for each scenario's last line: spooled, in silence.
    dev_server.kill()
    waiting = 0
    for scenario in scenarios:
        for index in range(halves[scenario.name], len(scenario.lines) - 1):
            done = client.run(scenario.hook(index))
            assert (done.stdout, done.stderr) == ("", ""), "the client must print nothing"
            waiting += 1
            assert len(client.spooled()) == waiting
    spooled_ids = [e["sessionhub"]["event_id"] for e in client.spooled()]
    assert len(set(spooled_ids)) == waiting
    assert LifecycleEvent.objects.count() == sent_before
    assert "spooled" in client.log() or "deferred" in client.log()
    spool_copy = client.spool.read_text()

    # Back up: the next hook call sends the spool first, in order, then its own event.
    dev_server.start()
    for scenario in scenarios:
        last = len(scenario.lines) - 1
        assert client.hook(scenario.hook(last)) == ""
        assert client.spooled() == []
    flushed = client.run(None, "flush")
    assert flushed.stdout.strip() == "sent 0, waiting 0: done"

    assert LifecycleEvent.objects.count() == sum(len(s.lines) for s in scenarios)
    assert set(spooled_ids) <= set(LifecycleEvent.objects.values_list("event_id", flat=True))
    assert_no_duplicates()
    for scenario in scenarios:
        check_scenario(scenario)

    # A crash between sending the spool and rewriting it sends it again: the server
    # answers duplicates by event id and nothing changes.
    states = {s.id: (s.status, s.event_count, s.prompt_count) for s in Session.objects.all()}
    client.spool.write_text(spool_copy)
    resent = client.run(None, "flush")
    assert resent.stdout.strip() == f"sent {waiting}, waiting 0: done"
    assert LifecycleEvent.objects.count() == sum(len(s.lines) for s in scenarios)
    assert_no_duplicates()
    assert {s.id: (s.status, s.event_count, s.prompt_count) for s in Session.objects.all()} == (
        states
    )
