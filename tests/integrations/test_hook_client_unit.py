"""Unit tests for the Claude Code hook client (integrations/claude-code/sessionhub_hook.py).

No Django and no real SessionHub: a small stdlib HTTP server in a thread plays the
server, records every request and answers as each test tells it to.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLIENT_PATH = REPO / "integrations" / "claude-code" / "sessionhub_hook.py"
TOKEN = "shk_test_token_value_123"


def _load_client():
    """Import the client from its file, as the console script would import it."""
    spec = importlib.util.spec_from_file_location("sessionhub_hook", CLIENT_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["sessionhub_hook"] = module
    spec.loader.exec_module(module)
    return module


client = _load_client()


FIXTURES = REPO / "tests" / "fixtures" / "claude-code"
SCENARIOS = ["basic", "clear", "compact", "crash", "secrets"]


def fixture_hooks(scenario: str) -> list[dict]:
    """The hook payloads of one fixture scenario, with transcript_path pointing at the file."""
    folder = FIXTURES / scenario
    hooks = [json.loads(line) for line in (folder / "hooks.jsonl").read_text().splitlines()]
    for hook in hooks:
        hook["transcript_path"] = str(folder / "transcript.jsonl")
    return hooks


def first_hook(scenario: str, name: str) -> dict:
    """First hook of the given event name in a scenario."""
    return next(h for h in fixture_hooks(scenario) if h["hook_event_name"] == name)


# --------------------------------------------------------------------------- fake server


class FakeServer(ThreadingHTTPServer):
    """Records requests; `mode` (or a callable of path and body) picks each answer."""

    daemon_threads = True
    block_on_close = False

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict] = []
        self.mode: object = 200
        self.preamble = ""
        # What the answer to a hook post hands over (a manual continue), once.
        self.waiting = ""
        self.lock = threading.Lock()
        self.thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        """Base URL of the fake server."""
        return f"http://127.0.0.1:{self.server_address[1]}"

    def hook_requests(self) -> list[dict]:
        """Requests made to the hooks endpoint, in arrival order."""
        return [r for r in self.requests if r["path"] == client.HOOKS_PATH]

    def accepted_ids(self) -> list[str]:
        """Event ids of every event the server answered 200 for, in order."""
        ids = []
        for request in self.hook_requests():
            if request["answer"] != 200:
                continue
            body = request["body"]
            for event in body if isinstance(body, list) else [body]:
                ids.append(event["sessionhub"]["event_id"])
        return ids


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        """Keep the test output quiet."""

    def do_POST(self) -> None:
        """Record the request, then answer according to the server's mode."""
        server: FakeServer = self.server  # type: ignore[assignment]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        mode = server.mode(self.path, body) if callable(server.mode) else server.mode
        with server.lock:
            server.requests.append(
                {"path": self.path, "headers": dict(self.headers), "body": body, "answer": mode}
            )
        if mode == "drop":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if mode == "sleep":
            time.sleep(5)
            mode = 200
        if mode == "trickle":
            # One byte at a time, each well within a socket timeout: only a total
            # deadline stops the client from waiting the whole ~6 s.
            answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
            for index in range(len(answer)):
                self.wfile.write(answer[index : index + 1])
                self.wfile.flush()
                time.sleep(0.15)
            return
        if mode != 200:
            self._answer(mode, {"message": "nope", "code": "test"})
            return
        if self.path == client.CONTINUITY_PATH:
            self._answer(200, {"preamble": server.preamble, "used": []})
            return
        if self.path == client.WHOAMI_PATH:
            who = {"team": "acme", "team_name": "Acme", "token": "laptop", "scopes": ["ingest"]}
            self._answer(200, who)
            return
        events = body if isinstance(body, list) else [body]
        results = [{"event_id": e["sessionhub"]["event_id"], "status": "accepted"} for e in events]
        answer: dict = {"results": results}
        reads = any(e["sessionhub"].get("reads_context") for e in events)
        if server.waiting and reads:
            answer["continuity"] = [{"record_ids": [7], "preamble": server.waiting}]
            server.waiting = ""
        self._answer(200, answer)

    def _answer(self, code: int, payload: dict) -> None:
        """Send a JSON answer."""
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def server():
    """A running fake SessionHub."""
    srv = FakeServer()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A private HOME with no SessionHub settings inherited from the machine."""
    for name in list(os.environ):
        if name.startswith("SESSIONHUB_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SESSIONHUB_TIMEOUT", "2")
    return tmp_path


@pytest.fixture
def configured(home, server, monkeypatch):
    """HOME plus URL and token pointing at the fake server."""
    monkeypatch.setenv("SESSIONHUB_URL", server.url)
    monkeypatch.setenv("SESSIONHUB_TOKEN", TOKEN)
    return home


def free_port_url() -> str:
    """A URL where nothing listens (connection refused)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


def run(payload, argv=None) -> tuple[int, str, float]:
    """Call main() in-process with payload on stdin; returns (rc, stdout, seconds)."""
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    out = io.StringIO()
    started = time.monotonic()
    rc = client.main(argv or [], stdin=io.BytesIO(raw), stdout=out)
    return rc, out.getvalue(), time.monotonic() - started


def spool_ids(home: Path) -> list[str]:
    """Event ids waiting in the default spool, in order."""
    path = home / ".sessionhub" / "spool.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["sessionhub"]["event_id"] for line in path.read_text().splitlines()]


def log_text(home: Path) -> str:
    """Content of the client's log file."""
    path = home / ".sessionhub" / "hook.log"
    return path.read_text() if path.exists() else ""


def tool_hook(n: int = 0) -> dict:
    """A small PreToolUse payload."""
    return {
        "session_id": "5d3c9a55-0000-4000-8000-000000000001",
        "transcript_path": "/nonexistent/transcript.jsonl",
        "cwd": "/nonexistent/project",
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": f"echo {n}"},
        "tool_use_id": f"toolu_{n}",
    }


# --------------------------------------------------------------------------- posting


def test_posts_stdin_json_plus_sessionhub_key(configured, server):
    hook = tool_hook(1)
    rc, out, _ = run(hook)

    assert rc == 0
    assert out == ""
    [request] = server.requests
    assert request["path"] == "/api/v1/hooks/claude-code"
    assert request["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert request["headers"]["Content-Type"] == "application/json"
    body = dict(request["body"])
    meta = body.pop("sessionhub")
    assert body == hook
    assert uuid.UUID(meta["event_id"]).version == 4
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", meta["occurred_at"])
    assert meta["client"] == f"sessionhub-hook/{client.VERSION}"
    assert "git_remote" not in meta and "final_message" not in meta
    assert spool_ids(configured) == []


def test_url_with_api_path_or_trailing_slash_is_normalised(configured, server, monkeypatch):
    monkeypatch.setenv("SESSIONHUB_URL", server.url + "/api/v1/hooks/claude-code/")
    run(tool_hook())
    assert [r["path"] for r in server.requests] == ["/api/v1/hooks/claude-code"]


def test_config_file_is_read_and_environment_wins(home, server, monkeypatch):
    config = home / ".sessionhub" / "config.json"
    config.parent.mkdir()
    config.write_text(json.dumps({"url": free_port_url(), "token": "from-file", "timeout": 1}))
    monkeypatch.setenv("SESSIONHUB_URL", server.url)

    run(tool_hook())

    [request] = server.requests
    assert request["headers"]["Authorization"] == "Bearer from-file"
    cfg = client.Config()
    assert cfg.url == server.url  # env beat the file
    assert cfg.token == "from-file"


def test_unconfigured_client_does_nothing_and_logs_once(home, server):
    assert run(tool_hook())[:2] == (0, "")
    assert run(tool_hook())[:2] == (0, "")

    assert server.requests == []
    assert spool_ids(home) == []
    assert log_text(home).count("not set") == 1


@pytest.mark.parametrize(
    "raw", [b"", b"   \n", b"not json", b"[1, 2]", b'"text"', b"\xff\xfe\x00garbage"]
)
def test_invalid_stdin_exits_zero_silently(configured, server, raw):
    rc, out, _ = run(raw)
    assert (rc, out) == (0, "")
    assert server.requests == []
    assert spool_ids(configured) == []
    assert "unexpected error" not in log_text(configured)  # handled, not crashed through


def test_disable_switch(configured, server, monkeypatch):
    monkeypatch.setenv("SESSIONHUB_DISABLE", "1")
    run(tool_hook())
    assert server.requests == []


# --------------------------------------------------------------------------- git remote


def test_git_remote_comes_from_config_without_credentials(configured, server, tmp_path):
    repo = tmp_path / "work" / "billing"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text(
        "[core]\n\tbare = false\n"
        '[remote "upstream"]\n\turl = https://github.com/other/fork.git\n'
        '[remote "origin"]\n'
        "\turl = https://deploy:s3cr3t-pass@github.com/acme/billing.git  ; a comment\n"
        "\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
    )
    (repo / "src" / "deep").mkdir(parents=True)
    hook = tool_hook()
    hook["cwd"] = str(repo / "src" / "deep")

    run(hook)

    meta = server.requests[0]["body"]["sessionhub"]
    assert meta["git_remote"] == "https://github.com/acme/billing.git"
    assert "s3cr3t" not in json.dumps(server.requests[0]["body"]["sessionhub"])


def test_git_remote_of_a_worktree_uses_the_common_config(tmp_path):
    main_git = tmp_path / "main" / ".git"
    (main_git / "worktrees" / "feature").mkdir(parents=True)
    (main_git / "config").write_text('[remote "origin"]\n\turl = git@github.com:acme/app.git\n')
    (main_git / "worktrees" / "feature" / "commondir").write_text("../..\n")
    worktree = tmp_path / "feature"
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {main_git / 'worktrees' / 'feature'}\n")

    assert client.find_git_remote(str(worktree)) == "git@github.com:acme/app.git"
    assert client.find_git_remote(str(tmp_path / "elsewhere")) is None


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://user:pw@github.com/a/b.git", "https://github.com/a/b.git"),
        ("https://ghp_tokenonly@github.com/a/b.git", "https://github.com/a/b.git"),
        ("http://u:p@host:8080/x", "http://host:8080/x"),
        ("ssh://git:pw@host/a/b.git", "ssh://git@host/a/b.git"),
        ("git@github.com:a/b.git", "git@github.com:a/b.git"),
        ("https://github.com/a/b.git", "https://github.com/a/b.git"),
    ],
)
def test_strip_credentials(url, expected):
    assert client.strip_credentials(url) == expected


# --------------------------------------------------------------------------- transcript


def _fixture_thinking_and_text(path: Path) -> tuple[list[str], list[str]]:
    """All thinking texts and all assistant texts of a transcript, in order."""
    thinking, texts = [], []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record.get("type") != "assistant":
            continue
        for block in record["message"]["content"]:
            if block.get("type") == "thinking":
                thinking.append(block["thinking"])
            elif block.get("type") == "text":
                texts.append(block["text"])
    return thinking, texts


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_fixture_transcript_final_message_and_reasoning_tail(scenario):
    path = FIXTURES / scenario / "transcript.jsonl"
    thinking, texts = _fixture_thinking_and_text(path)
    last_stop = [h for h in fixture_hooks(scenario) if h["hook_event_name"] == "Stop"][-1]

    final, tail = client.read_transcript(str(path))

    # The transcript's last text agrees with what Claude Code put in the Stop payload.
    assert final == last_stop["last_assistant_message"] == texts[-1]
    assert tail
    assert len(tail) <= client.TAIL_CHARS
    assert tail.endswith(thinking[-1])
    # The tail is made of thinking only: every paragraph is (part of) a thinking block,
    # and no visible answer leaks into it.
    for paragraph in tail.split("\n\n"):
        assert any(paragraph in t for t in thinking), paragraph
    for text in texts:
        assert text not in tail


def test_stop_event_carries_final_message_and_reasoning_tail(configured, server):
    hook = first_hook("basic", "Stop")
    run(hook)

    body = server.requests[0]["body"]
    meta = body.pop("sessionhub")
    assert body == hook
    assert meta["final_message"] == hook["last_assistant_message"]
    assert meta["reasoning_tail"].endswith(
        "TODO: task-2731 regenerate the November ledger exports."
    )
    assert "Refunds now reach" not in meta["reasoning_tail"]


def test_session_end_reads_final_message_from_transcript(configured, server):
    hook = first_hook("clear", "SessionEnd")
    assert "last_assistant_message" not in hook
    run(hook)

    meta = server.requests[0]["body"]["sessionhub"]
    assert meta["final_message"].startswith("Search now folds accents at index and query")
    assert meta["reasoning_tail"].endswith(
        "TODO: task-3094 rebuild the search index on staging and production."
    )


def _assistant_line(msg_id: str, blocks: list[dict], **extra) -> str:
    """One transcript line of an assistant message."""
    record = {
        "type": "assistant",
        "uuid": str(uuid.uuid4()),
        "message": {"id": msg_id, "role": "assistant", "content": blocks},
        **extra,
    }
    return json.dumps(record)


def test_split_message_is_joined_and_tail_cut_on_a_word(tmp_path):
    words = " ".join(f"word{i:04d}" for i in range(600))  # about 5,400 characters
    lines = [
        json.dumps({"type": "user", "message": {"role": "user", "content": "go"}}),
        _assistant_line("msg_1", [{"type": "thinking", "thinking": "early idea"}]),
        _assistant_line("msg_1", [{"type": "text", "text": "Old answer."}]),
        _assistant_line("msg_2", [{"type": "thinking", "thinking": words}]),
        _assistant_line("msg_2", [{"type": "text", "text": "First part."}]),
        _assistant_line("msg_2", [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]),
        _assistant_line("msg_2", [{"type": "text", "text": "Second part."}]),
        '{"type": "assistant", "message": {"id": "msg_3", "content": [{"type": "te',  # torn
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines))

    final, tail = client.read_transcript(str(path))

    assert final == "First part.\n\nSecond part."
    assert len(tail) <= 2000
    assert tail.endswith("word0599")
    assert re.fullmatch(r"(word\d{4} ?)+", tail), "tail must start on a whole word"
    assert "answer" not in tail and "part." not in tail


def test_long_transcript_is_read_from_the_end(tmp_path):
    path = tmp_path / "big.jsonl"
    filler = _assistant_line("msg_old", [{"type": "text", "text": "x" * 1000}])
    with path.open("w") as handle:
        handle.write("this first line is not JSON at all\n")
        for _ in range(2000):  # about 2 MB of older conversation
            handle.write(filler + "\n")
        handle.write(_assistant_line("msg_new", [{"type": "thinking", "thinking": "last thought"}]))
        handle.write("\n" + _assistant_line("msg_new", [{"type": "text", "text": "Final."}]) + "\n")
    assert path.stat().st_size > 2 * client.TRANSCRIPT_WINDOW

    final, tail = client.read_transcript(str(path))

    assert (final, tail) == ("Final.", "last thought")


def test_sidechain_lines_stay_out_of_the_main_summary(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(
        "\n".join(
            [
                _assistant_line("m1", [{"type": "text", "text": "Main answer."}]),
                _assistant_line(
                    "s1", [{"type": "text", "text": "Subagent answer."}], isSidechain=True
                ),
            ]
        )
    )
    assert client.read_transcript(str(path))[0] == "Main answer."
    assert client.read_transcript(str(path), sidechain=True)[0] == "Subagent answer."


def test_subagent_stop_prefers_the_agent_transcript(configured, server, tmp_path):
    agent = tmp_path / "agent.jsonl"
    agent.write_text(
        _assistant_line(
            "a1", [{"type": "thinking", "thinking": "sub think"}, {"type": "text", "text": "Sub."}]
        )
    )
    hook = tool_hook()
    hook.update(
        hook_event_name="SubagentStop",
        transcript_path=str(tmp_path / "missing.jsonl"),
        agent_transcript_path=str(agent),
    )
    run(hook)
    meta = server.requests[0]["body"]["sessionhub"]
    assert (meta["final_message"], meta["reasoning_tail"]) == ("Sub.", "sub think")


def test_missing_transcript_is_skipped_silently(configured, server):
    hook = tool_hook()
    hook.update(hook_event_name="Stop", last_assistant_message="All done.")
    rc, out, _ = run(hook)
    assert (rc, out) == (0, "")
    meta = server.requests[0]["body"]["sessionhub"]
    assert meta["final_message"] == "All done."
    assert "reasoning_tail" not in meta


# --------------------------------------------------------------------------- spool


@pytest.mark.parametrize("failure", [500, 503, 429, "drop"])
def test_transient_failure_spools_then_next_call_flushes_in_order(configured, server, failure):
    server.mode = failure
    run(tool_hook(1))
    run(tool_hook(2))
    waiting = spool_ids(configured)
    assert len(waiting) == 2

    server.mode = 200
    server.requests.clear()
    run(tool_hook(3))

    first, second = server.hook_requests()
    assert isinstance(first["body"], list)  # the spool goes first, as one batch
    assert [e["sessionhub"]["event_id"] for e in first["body"]] == waiting
    assert [e["tool_use_id"] for e in first["body"]] == ["toolu_1", "toolu_2"]
    assert second["body"]["tool_use_id"] == "toolu_3"
    assert spool_ids(configured) == []
    # Each event reached the server exactly once with an answer of 200.
    accepted = server.accepted_ids()
    assert len(accepted) == len(set(accepted)) == 3


def test_refused_connection_spools_and_flush_command_sends(configured, server, monkeypatch):
    monkeypatch.setenv("SESSIONHUB_URL", free_port_url())
    rc, out, _ = run(tool_hook(1))
    assert (rc, out) == (0, "")
    waiting = spool_ids(configured)
    assert len(waiting) == 1

    monkeypatch.setenv("SESSIONHUB_URL", server.url)
    out = io.StringIO()
    assert client.main(["flush"], stdout=out) == 0
    assert "sent 1, waiting 0" in out.getvalue()
    assert server.accepted_ids() == waiting
    assert spool_ids(configured) == []


def test_server_down_during_flush_spools_current_event_without_trying_it(configured, server):
    server.mode = 500
    run(tool_hook(1))
    server.requests.clear()

    run(tool_hook(2))

    assert len(server.requests) == 1  # only the spool batch was tried
    assert len(spool_ids(configured)) == 2


@pytest.mark.parametrize("code", [401, 403])
def test_a_refused_token_keeps_the_event_in_the_spool(configured, server, code):
    server.mode = code
    rc, out, _ = run(tool_hook(1))
    assert (rc, out) == (0, "")
    assert len(server.requests) == 1
    assert len(spool_ids(configured)) == 1
    assert f"kept in the spool, token refused: HTTP {code}" in log_text(configured)

    # The next hook sends the spool first; refused again, it does not ask twice.
    server.requests.clear()
    run(tool_hook(2))
    assert len(server.requests) == 1
    assert len(spool_ids(configured)) == 2


@pytest.mark.parametrize("code", [400, 404, 413])
def test_permanent_error_is_not_spooled_but_logged(configured, server, code):
    server.mode = code
    rc, out, _ = run(tool_hook(1))

    assert (rc, out) == (0, "")
    assert len(server.requests) == 1
    assert spool_ids(configured) == []
    assert f"HTTP {code}" in log_text(configured)


def test_rejected_event_is_logged(configured, server):
    def answer(path, body):
        return 200

    server.mode = answer
    original = _Handler._answer

    def rejecting(self, code, payload):
        if "results" in payload:
            for item in payload["results"]:
                item.update(status="rejected", field="session_id", reason="bad")
        original(self, code, payload)

    _Handler._answer = rejecting
    try:
        run(tool_hook(1))
    finally:
        _Handler._answer = original
    assert "rejected event" in log_text(configured)
    assert spool_ids(configured) == []


def test_spool_batches_hold_at_most_1000_events(configured, server):
    spool = client.Spool(client.Config().spool_path)
    deadline = client.Deadline(5)
    events = [client.build_event(tool_hook(n), deadline) for n in range(1005)]
    spool.append(events, deadline)

    run(tool_hook(9999))

    sizes = [len(r["body"]) if isinstance(r["body"], list) else 1 for r in server.requests]
    assert sizes == [1000, 5, 1]
    assert server.accepted_ids()[:1005] == [e["sessionhub"]["event_id"] for e in events]
    assert spool_ids(configured) == []


def test_oversize_batch_is_split_until_it_fits(configured, server):
    spool = client.Spool(client.Config().spool_path)
    deadline = client.Deadline(5)
    events = [client.build_event(tool_hook(n), deadline) for n in range(5)]
    spool.append(events, deadline)
    server.mode = lambda path, body: 413 if isinstance(body, list) and len(body) > 2 else 200

    run(tool_hook(99))

    ids = [e["sessionhub"]["event_id"] for e in events]
    assert server.accepted_ids()[:5] == ids  # all delivered, still in order
    assert spool_ids(configured) == []


def test_auth_failure_keeps_the_spool(configured, server):
    server.mode = 500
    run(tool_hook(1))
    server.mode = 401
    run(tool_hook(2))
    # Both wait for a fixed token: the spooled one, and the new one behind it.
    assert len(spool_ids(configured)) == 2
    server.mode = 200
    run(tool_hook(3))
    assert spool_ids(configured) == []
    assert len(server.accepted_ids()) == 3


def test_concurrent_hooks_never_send_an_event_twice(configured, server):
    server.mode = 500
    for n in range(30):
        run(tool_hook(n))
    waiting = spool_ids(configured)
    assert len(waiting) == 30
    server.mode = 200
    server.requests.clear()

    threads = [threading.Thread(target=run, args=(tool_hook(100 + n),)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)

    accepted = server.accepted_ids()
    assert len(accepted) == len(set(accepted)) == 38
    assert set(waiting) <= set(accepted)
    assert spool_ids(configured) == []


def test_spool_file_is_private(configured, server):
    server.mode = 500
    run(tool_hook())
    mode = stat.S_IMODE((configured / ".sessionhub" / "spool.jsonl").stat().st_mode)
    assert mode == 0o600


# --------------------------------------------------------------------------- SessionStart


def session_start(source: str = "startup") -> dict:
    """A SessionStart payload."""
    hook = tool_hook()
    for key in ("tool_name", "tool_input", "tool_use_id"):
        hook.pop(key)
    hook.update(hook_event_name="SessionStart", source=source, model="claude-sonnet-4-5")
    return hook


def test_session_start_prints_the_preamble_as_additional_context(configured, server):
    server.preamble = "## Continuity\nYou were migrating the session store to redis."
    rc, out, _ = run(session_start())

    assert rc == 0
    assert [r["path"] for r in server.requests] == [client.HOOKS_PATH, client.CONTINUITY_PATH]
    # The request carries the start event as posted (issue 12: the server starts the
    # session itself when the start has not landed).
    assert server.requests[1]["body"] == {
        "source": "claude-code",
        "session_id": session_start()["session_id"],
        "event": server.requests[0]["body"],
    }
    assert server.requests[1]["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert out.endswith("\n") and out.count("\n") == 1
    assert json.loads(out) == {
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": server.preamble,
        }
    }


def test_the_first_prompt_asks_with_the_prompt_and_prints_its_context(configured, server):
    server.preamble = "## Continuity\nThe websocket reconnect session."
    prompt = dict(session_start(), hook_event_name="UserPromptSubmit", prompt="the websocket")
    prompt.pop("source")
    rc, out, _ = run(prompt)
    assert rc == 0
    assert [r["path"] for r in server.requests] == [client.HOOKS_PATH, client.CONTINUITY_PATH]
    assert server.requests[1]["body"] == {
        "source": "claude-code",
        "session_id": prompt["session_id"],
        "prompt": "the websocket",
        "event": server.requests[0]["body"],
    }
    assert json.loads(out) == {
        "hookSpecificOutput": {
            "hookEventName": "UserPromptSubmit",
            "additionalContext": server.preamble,
        }
    }
    # The second prompt of the session asks nothing and prints nothing.
    rc, out, _ = run(dict(prompt, prompt="and then"))
    assert (rc, out) == (0, "")
    assert [r["path"] for r in server.requests[2:]] == [client.HOOKS_PATH]


def test_a_manual_continue_in_a_prompts_answer_is_printed_with_the_first_prompts(
    configured, server
):
    prompt = dict(session_start(), hook_event_name="UserPromptSubmit", prompt="the websocket")
    prompt.pop("source")
    server.preamble = "## Continuity\nThe websocket reconnect session."
    server.waiting = "[SESSION CONTINUITY — inherited from 1 prior session(s)]\nBy hand."
    rc, out, _ = run(prompt)
    assert rc == 0
    # Only the post whose answer is read says so; the continuity request carries it as posted.
    assert server.requests[0]["body"]["sessionhub"]["reads_context"] is True
    context = json.loads(out)["hookSpecificOutput"]
    assert context == {
        "hookEventName": "UserPromptSubmit",
        "additionalContext": server.preamble + "\n\n" + "[SESSION CONTINUITY — inherited "
        "from 1 prior session(s)]\nBy hand.",
    }
    # A later prompt: only what waits, once.
    server.waiting = "Continued by hand."
    rc, out, _ = run(dict(prompt, prompt="and then"))
    assert json.loads(out)["hookSpecificOutput"]["additionalContext"] == "Continued by hand."
    rc, out, _ = run(dict(prompt, prompt="and again"))
    assert (rc, out) == (0, "")


def test_a_spooled_prompt_never_says_its_answer_is_read(configured, server):
    server.mode = 503
    prompt = dict(session_start(), hook_event_name="UserPromptSubmit", prompt="later")
    prompt.pop("source")
    run(prompt)
    server.mode = 200
    run(session_start())  # flushes the spool first
    flushed = next(r["body"] for r in server.requests if r["answer"] == 200)
    events = flushed if isinstance(flushed, list) else [flushed]
    assert [e.get("prompt") for e in events][:1] == ["later"]  # the spooled prompt
    assert not any(e["sessionhub"].get("reads_context") for e in events)


def test_session_start_with_empty_preamble_prints_nothing(configured, server):
    server.preamble = ""
    rc, out, _ = run(session_start())
    assert (rc, out) == (0, "")
    assert len(server.requests) == 2


def test_session_start_after_compaction_asks_for_no_preamble(configured, server):
    server.preamble = "something"
    rc, out, _ = run(session_start("compact"))
    assert (rc, out) == (0, "")
    assert [r["path"] for r in server.requests] == [client.HOOKS_PATH]


def test_session_start_with_server_down_prints_nothing_and_spools(configured, server):
    server.preamble = "something"
    server.mode = 503
    rc, out, _ = run(session_start())
    assert (rc, out) == (0, "")
    assert [r["path"] for r in server.requests] == [client.HOOKS_PATH]
    assert len(spool_ids(configured)) == 1


def test_continuity_failure_prints_nothing(configured, server):
    server.preamble = "something"
    server.mode = lambda path, body: 500 if path == client.CONTINUITY_PATH else 200
    rc, out, _ = run(session_start())
    assert (rc, out) == (0, "")
    assert spool_ids(configured) == []  # the event itself went through


# --------------------------------------------------------------------------- time budget


@pytest.mark.parametrize("behaviour", ["sleep", "trickle"])
@pytest.mark.parametrize("payload", [tool_hook(), session_start()])
def test_slow_server_cannot_hold_the_hook_past_its_timeout(
    configured, server, monkeypatch, payload, behaviour
):
    monkeypatch.setenv("SESSIONHUB_TIMEOUT", "1")
    server.preamble = "late"
    server.mode = behaviour

    rc, out, elapsed = run(payload)

    assert (rc, out) == (0, "")
    assert elapsed < 1.0 + 0.3
    assert len(spool_ids(configured)) == 1  # timed out, so kept for later (server dedupes)


def test_timeout_also_bounds_a_flush(configured, server, monkeypatch):
    server.mode = 500
    run(tool_hook(1))
    monkeypatch.setenv("SESSIONHUB_TIMEOUT", "1")
    server.mode = "sleep"

    _, _, elapsed = run(tool_hook(2))

    assert elapsed < 1.3
    assert len(spool_ids(configured)) == 2


# --------------------------------------------------------------------------- robustness


def test_unexpected_error_is_logged_never_raised(configured, server, monkeypatch):
    def explode(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(client, "build_event", explode)
    rc, out, _ = run(tool_hook())
    assert (rc, out) == (0, "")
    assert "boom" in log_text(configured)


def test_log_is_rotated_past_one_megabyte(home):
    log_path = home / ".sessionhub" / "hook.log"
    log_path.parent.mkdir()
    log_path.write_text("x" * (client.LOG_MAX_BYTES + 10))

    client.log("fresh line")

    assert log_path.stat().st_size < 200
    assert "fresh line" in log_path.read_text()
    assert (home / ".sessionhub" / "hook.log.1").stat().st_size > client.LOG_MAX_BYTES


def test_runs_as_a_script_with_nothing_on_stdout(configured, server):
    env = dict(os.environ)
    done = subprocess.run(
        [sys.executable, str(CLIENT_PATH)],
        input=json.dumps(tool_hook(7)).encode(),
        capture_output=True,
        env=env,
        timeout=10,
        check=False,
    )
    assert done.returncode == 0
    assert done.stdout == b""
    assert server.hook_requests()[0]["body"]["tool_use_id"] == "toolu_7"


def test_version(capsys):
    out = io.StringIO()
    assert client.main(["--version"], stdout=out) == 0
    assert out.getvalue().strip() == f"sessionhub-hook {client.VERSION}"


# --------------------------------------------------------------------------- install


def _our_entries(settings: dict, event: str) -> list[dict]:
    """The client's entries for one event in a settings dict."""
    return [
        entry
        for group in settings["hooks"].get(event, [])
        for entry in group.get("hooks", [])
        if "sessionhub" in " ".join([entry.get("command", ""), *entry.get("args", [])])
    ]


def test_install_is_idempotent_and_keeps_existing_hooks(home, tmp_path):
    settings_file = tmp_path / "proj" / ".claude" / "settings.json"
    settings_file.parent.mkdir(parents=True)
    existing = {
        "model": "opus",
        "permissions": {"allow": ["Bash(npm test)"]},
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]}
            ],
            "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
            "PermissionRequest": [{"hooks": [{"type": "command", "command": "ask.sh"}]}],
        },
    }
    settings_file.write_text(json.dumps(existing))
    argv = ["install", "--settings", str(settings_file)]

    assert client.main(argv, stdout=io.StringIO()) == 0
    first = settings_file.read_bytes()
    assert client.main(argv, stdout=io.StringIO()) == 0
    assert settings_file.read_bytes() == first

    settings = json.loads(first)
    assert settings["model"] == "opus"
    assert settings["permissions"] == existing["permissions"]
    assert settings["hooks"]["PreToolUse"][0] == existing["hooks"]["PreToolUse"][0]
    assert settings["hooks"]["Stop"][0] == existing["hooks"]["Stop"][0]
    assert settings["hooks"]["PermissionRequest"] == existing["hooks"]["PermissionRequest"]
    for event in client.INSTALL_EVENTS:
        [entry] = _our_entries(settings, event)
        assert entry["type"] == "command"
        # The exec form: this interpreter, no site packages, this file (issue 13: no shell,
        # no PATH lookup); async exactly for the events whose answer nobody reads.
        assert entry["command"] == os.path.abspath(sys.executable)
        if event in client.ASYNC_EVENTS:
            # The async events run the few-line queue script install wrote (no json, no
            # compiling the whole client), which leaves the sending to one sender.
            assert entry["args"] == ["-S", client.queue_script_path()]
        else:
            assert entry["args"][:3] == ["-S", str(Path(client.__file__).resolve()), "hook"]
            assert entry["args"][3:] == (["--detach"] if event in client.DETACHED_EVENTS else [])
        assert entry.get("async", False) == (event in client.ASYNC_EVENTS)
    tool_group = settings["hooks"]["PostToolUse"][-1]
    assert tool_group["matcher"] == "*"


def test_install_updates_a_moved_command_in_place(home, tmp_path):
    settings_file = tmp_path / "settings.json"
    old = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "/old/sessionhub-hook"}]}]}}
    settings_file.write_text(json.dumps(old))

    client.main(
        ["install", "--settings", str(settings_file), "--command", "/new/sessionhub-hook"],
        stdout=io.StringIO(),
    )

    settings = json.loads(settings_file.read_text())
    assert len(settings["hooks"]["Stop"]) == 1
    assert [e["command"] for e in _our_entries(settings, "Stop")] == ["/new/sessionhub-hook"]


def test_install_user_scope_and_config_file(home, server):
    out = io.StringIO()
    client.main(["install", "--user", "--url", server.url, "--token", TOKEN], stdout=out)

    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert len(_our_entries(settings, "SessionStart")) == 1
    config = home / ".sessionhub" / "config.json"
    assert json.loads(config.read_text()) == {"url": server.url, "token": TOKEN}
    assert stat.S_IMODE(config.stat().st_mode) == 0o600

    out = io.StringIO()
    client.main(["status"], stdout=out)
    text = out.getvalue()
    assert server.url in text
    assert "token:   set" in text
    assert TOKEN not in text
    assert "(0 event(s) waiting, at most 10000 kept)" in text
    assert "server:  ok: token laptop (ingest) of team acme [Acme]" in text


def test_status_counts_waiting_events(configured, server):
    server.mode = 500
    run(tool_hook(1))
    run(tool_hook(2))
    out = io.StringIO()
    client.main(["status"], stdout=out)
    assert "(2 event(s) waiting," in out.getvalue()
    assert "server:  answered with an error: HTTP 500" in out.getvalue()
    assert TOKEN not in out.getvalue()


def test_uninstall_removes_only_our_entries(home, tmp_path):
    settings_file = tmp_path / "settings.json"
    mine = {"type": "command", "command": "audit.sh"}
    settings_file.write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": [mine]}]}}))
    client.main(["install", "--settings", str(settings_file)], stdout=io.StringIO())

    client.main(["uninstall", "--settings", str(settings_file)], stdout=io.StringIO())

    assert json.loads(settings_file.read_text()) == {"hooks": {"PreToolUse": [{"hooks": [mine]}]}}


# --------------------------------------------------------------------------- MCP server


def test_install_registers_the_mcp_server_with_the_token_kept_in_one_place(home, server):
    claude_json = home / ".claude.json"
    claude_json.write_text(json.dumps({"numStartups": 3, "mcpServers": {"docs": {"url": "x"}}}))
    os.chmod(claude_json, 0o600)
    out = io.StringIO()
    client.main(["install", "--user", "--url", server.url, "--token", TOKEN], stdout=out)
    config = json.loads(claude_json.read_text())
    assert config["numStartups"] == 3 and config["mcpServers"]["docs"] == {"url": "x"}
    entry = config["mcpServers"]["sessionhub"]
    assert entry["type"] == "http"
    assert entry["url"] == server.url + "/api/v1/mcp"
    assert TOKEN not in claude_json.read_text()  # the token stays in config.json
    assert stat.S_IMODE(claude_json.stat().st_mode) == 0o600
    assert "mcp__sessionhub__" in out.getvalue()
    # The helper Claude Code runs prints the header from the client's own config.
    helper = subprocess.run(  # noqa: S602 - a shell runs it, as Claude Code runs it
        entry["headersHelper"], shell=True, capture_output=True, text=True, check=True
    )
    assert json.loads(helper.stdout) == {"Authorization": f"Bearer {TOKEN}"}
    # Again: nothing changes; a new token reaches the MCP server through the same file.
    before = claude_json.read_bytes()
    client.main(["install", "--user", "--token", "shub_new_token"], stdout=io.StringIO())
    assert claude_json.read_bytes() == before
    out = io.StringIO()
    client.main(["mcp-headers"], stdout=out)
    assert json.loads(out.getvalue()) == {"Authorization": "Bearer shub_new_token"}


def test_mcp_headers_follow_the_environment_and_say_nothing_without_a_token(home, monkeypatch):
    out = io.StringIO()
    client.main(["mcp-headers"], stdout=out)
    assert json.loads(out.getvalue()) == {}
    monkeypatch.setenv("SESSIONHUB_TOKEN", "shub_from_env")
    out = io.StringIO()
    client.main(["mcp-headers"], stdout=out)
    assert json.loads(out.getvalue()) == {"Authorization": "Bearer shub_from_env"}


def test_project_scope_writes_mcp_json_and_uninstall_takes_only_ours(home, tmp_path, monkeypatch):
    project = tmp_path / "repo"
    project.mkdir()
    monkeypatch.chdir(project)
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"db": {"command": "db-mcp"}}}))
    argv = ["install", "--project", "--command", "sessionhub-hook", "--url", "http://hub:8000"]
    client.main(argv, stdout=io.StringIO())
    servers = json.loads((project / ".mcp.json").read_text())["mcpServers"]
    assert servers["sessionhub"] == {
        "type": "http",
        "url": "http://hub:8000/api/v1/mcp",
        "headersHelper": "sessionhub-hook mcp-headers",
    }
    assert servers["db"] == {"command": "db-mcp"}
    client.main(["uninstall", "--project"], stdout=io.StringIO())
    assert json.loads((project / ".mcp.json").read_text()) == {
        "mcpServers": {"db": {"command": "db-mcp"}}
    }


def test_a_server_of_that_name_written_by_hand_is_left_alone(home, server):
    claude_json = home / ".claude.json"
    mine = {"type": "http", "url": "https://elsewhere/mcp", "headers": {"X": "1"}}
    claude_json.write_text(json.dumps({"mcpServers": {"sessionhub": mine}}))
    out = io.StringIO()
    client.main(["install", "--user", "--url", server.url, "--token", TOKEN], stdout=out)
    assert json.loads(claude_json.read_text())["mcpServers"]["sessionhub"] == mine
    assert "did not write" in out.getvalue()
    client.main(["uninstall", "--user"], stdout=io.StringIO())
    assert json.loads(claude_json.read_text())["mcpServers"]["sessionhub"] == mine


def test_no_mcp_and_no_url_leave_claude_json_alone(home, tmp_path):
    client.main(["install", "--settings", str(tmp_path / "s.json")], stdout=io.StringIO())
    assert not (home / ".claude.json").exists()
    argv = ["install", "--settings", str(tmp_path / "s.json"), "--url", "http://x", "--no-mcp"]
    client.main(argv, stdout=io.StringIO())
    assert not (home / ".claude.json").exists()


# --------------------------------------------------------------------------- issue 13


def test_an_oversized_string_is_cut_with_a_marker_and_listed(configured, server):
    """An Edit of a ~7 MB file: the event is sent, the file cut to a marker."""
    original = "x = 1\n" * 1_200_000  # 7.2 MB
    hook = dict(tool_hook(1), hook_event_name="PostToolUse")
    hook["tool_response"] = {"filePath": "/p/big.py", "originalFile": original}
    rc, out, _ = run(hook)
    assert (rc, out) == (0, "")
    [request] = server.hook_requests()
    sent = request["body"]
    text = sent["tool_response"]["originalFile"]
    cut = len(original) - client.MAX_STRING_CHARS
    assert text.startswith("x = 1\n")
    assert text.endswith(f"… [sessionhub-hook cut {cut} of {len(original)} characters]")
    assert sent["sessionhub"]["trimmed"] == {"tool_response.originalFile": cut}
    assert len(json.dumps(sent)) < client.MAX_EVENT_BYTES


def test_many_large_strings_are_cut_further_until_the_event_fits():
    event = {"sessionhub": {"event_id": "e"}, "parts": ["y" * 100_000] * 60}
    fitted = client.fit_event(event)
    assert len(json.dumps(fitted)) <= client.MAX_EVENT_BYTES
    assert len(fitted["sessionhub"]["trimmed"]) == 60
    assert all("sessionhub-hook cut" in p for p in fitted["parts"])


def test_folder_is_0700_and_log_is_0600(home, tmp_path):
    client.main(
        ["install", "--settings", str(tmp_path / "s.json"), "--url", "http://x", "--token", "t"],
        stdout=io.StringIO(),
    )
    client.log("a line")
    folder = home / ".sessionhub"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "hook.log").stat().st_mode) == 0o600
    assert stat.S_IMODE((folder / "config.json").stat().st_mode) == 0o600


def test_status_after_a_successful_flush_is_not_the_old_error(configured, server):
    server.mode = 500
    run(tool_hook(1))
    server.mode = 200
    run(tool_hook(2))
    out = io.StringIO()
    client.main(["status"], stdout=out)
    last = [x for x in out.getvalue().splitlines() if x.startswith("last log line")]
    assert last and "1 waiting event(s) sent" in last[0], out.getvalue()


def test_api_error_text_is_never_the_final_message_and_model_is_read(tmp_path):
    path = tmp_path / "t.jsonl"
    real = {
        "type": "assistant",
        "isSidechain": False,
        "message": {
            "id": "m1",
            "model": "claude-opus-5-5",
            "content": [{"type": "text", "text": "Real work done."}],
        },
    }
    failed = {
        "type": "assistant",
        "isSidechain": False,
        "isApiErrorMessage": True,
        "message": {
            "id": "m2",
            "model": "<synthetic>",
            "content": [{"type": "text", "text": "API Error: 400 boom"}],
        },
    }
    path.write_text(json.dumps(real) + "\n" + json.dumps(failed) + "\n")
    final, _ = client.read_transcript(str(path))
    assert final == "Real work done."
    assert client.transcript_model(str(path)) == "claude-opus-5-5"


def test_detached_hook_returns_at_once_and_the_child_sends(configured, server, tmp_path):
    """``hook --detach`` as Claude Code runs it: the parent exits before the event is sent;
    the child, in its own session, sends it."""
    env = dict(os.environ)
    done = subprocess.run(
        [sys.executable, "-S", str(CLIENT_PATH), "hook", "--detach"],
        input=json.dumps(dict(tool_hook(7), hook_event_name="PostToolUse")),
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not server.accepted_ids():
        time.sleep(0.05)
    assert len(server.accepted_ids()) == 1


def test_session_end_resends_a_failed_turns_stop_failure_under_the_same_id(
    configured, server, tmp_path
):
    """Claude Code may kill the StopFailure hook as it exits: SessionEnd sends the same
    event again (same id, so the server keeps one)."""
    path = tmp_path / "t.jsonl"
    user = {"type": "user", "isSidechain": False, "message": {"role": "user", "content": "go"}}
    failed = {
        "type": "assistant",
        "isSidechain": False,
        "uuid": "9b1bb8ad-270f-4864-8e37-e2c0fd276ce1",
        "timestamp": "2026-11-23T21:56:12.715Z",
        "error": "unknown",
        "isApiErrorMessage": True,
        "message": {
            "id": "m",
            "model": "<synthetic>",
            "content": [{"type": "text", "text": "API Error: 400 x"}],
        },
    }
    path.write_text(json.dumps(user) + "\n" + json.dumps(failed) + "\n")
    base = {"session_id": "s-1", "transcript_path": str(path), "cwd": str(tmp_path)}
    run(dict(base, hook_event_name="StopFailure", error="unknown"))
    run(dict(base, hook_event_name="SessionEnd", reason="other"))
    first, second = (r["body"] for r in server.hook_requests())
    assert first["sessionhub"]["event_id"] == "stopfailure:" + failed["uuid"]
    assert [e["hook_event_name"] for e in second] == ["StopFailure", "SessionEnd"]
    assert second[0]["sessionhub"]["event_id"] == first["sessionhub"]["event_id"]
    assert second[0]["last_assistant_message"] == "API Error: 400 x"
    # A session whose last turn did not fail sends SessionEnd alone.
    path.write_text(json.dumps(user) + "\n")
    run(dict(base, hook_event_name="SessionEnd", reason="other"))
    assert server.hook_requests()[-1]["body"]["hook_event_name"] == "SessionEnd"


# --------------------------------------------------------------------------- the queue


def queued_files(home: Path) -> list[Path]:
    folder = home / ".sessionhub" / "queue"
    return sorted(folder.glob("*" + client.QUEUE_SUFFIX)) if folder.exists() else []


def test_queued_events_are_private_and_keep_their_time_and_id(configured, server):
    before = time.time()
    rc, out, _ = run(tool_hook(1), ["hook", "--queue"])
    assert (rc, out) == (0, "")
    assert server.requests == []  # queued, not sent: the hook did no network at all
    [path] = queued_files(configured)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_bytes()) == tool_hook(1)  # stdin as it came

    client.drain(client.Config(), linger=0)
    [event] = server.hook_requests()[0]["body"]
    assert event["tool_use_id"] == "toolu_1"
    # The time is when the hook ran, not when the sender sent it.
    occurred = event["sessionhub"]["occurred_at"]
    stamp = time.mktime(time.strptime(occurred[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
    assert before - 1 <= stamp <= time.time()
    assert queued_files(configured) == [] and spool_ids(configured) == []
    # The id comes from the file's name: a file moved twice (a sender killed between
    # spooling it and deleting it) is the same event, which the server keeps once.
    again = client.build_event(tool_hook(1), client.Deadline(2), queued=str(path))
    assert again["sessionhub"]["event_id"] == event["sessionhub"]["event_id"]
    uuid.UUID(event["sessionhub"]["event_id"])


def test_the_sender_sends_the_queue_in_order_and_a_blocking_hook_goes_after(configured, server):
    for n in range(5):
        run(tool_hook(n), ["hook", "--queue"])
    stop = {**tool_hook(9), "hook_event_name": "Stop"}
    rc, _, _ = run(stop, ["hook"])  # moves the queue into the spool and sends it first
    assert rc == 0
    sent = [e["tool_use_id"] for r in server.hook_requests() for e in _events(r["body"])]
    assert sent == [f"toolu_{n}" for n in range(5)] + ["toolu_9"]
    assert queued_files(configured) == []


def _events(body: object) -> list[dict]:
    return body if isinstance(body, list) else [body]


def test_a_server_outage_leaves_queued_events_in_the_spool(configured, server):
    server.mode = 503
    for n in range(3):
        run(tool_hook(n), ["hook", "--queue"])
    client.drain(client.Config(), linger=0)
    assert queued_files(configured) == []
    assert len(spool_ids(configured)) == 3  # nothing lost: the next hook or flush sends them
    server.mode = 200
    run(tool_hook(7), ["hook"])
    sent = [
        e["tool_use_id"]
        for r in server.hook_requests()
        if r["answer"] == 200
        for e in _events(r["body"])
    ]
    assert sent == ["toolu_0", "toolu_1", "toolu_2", "toolu_7"]


def test_the_installed_queue_script_queues_and_its_sender_delivers(configured, server):
    client.write_queue_script()
    script = Path(client.queue_script_path())
    assert stat.S_IMODE(script.stat().st_mode) == 0o600
    env = {**os.environ, "HOME": str(configured)}
    for n in range(3):
        done = subprocess.run(
            [sys.executable, "-S", str(script)],
            input=json.dumps(tool_hook(n)).encode(),
            env=env,
            capture_output=True,
            timeout=30,
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    # One detached sender delivers all three, then lingers and exits.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(server.accepted_ids()) < 3:
        time.sleep(0.05)
    sent = [e["tool_use_id"] for r in server.hook_requests() for e in _events(r["body"])]
    assert sorted(sent) == ["toolu_0", "toolu_1", "toolu_2"]
    assert queued_files(configured) == []


def test_the_queue_script_hands_an_event_it_cannot_queue_to_the_client(configured, server):
    client.write_queue_script()
    blocked = configured / "not-a-folder"
    blocked.write_text("a file where the queue folder should be")
    env = {**os.environ, "HOME": str(configured), "SESSIONHUB_QUEUE": str(blocked)}
    done = subprocess.run(
        [sys.executable, "-S", client.queue_script_path()],
        input=json.dumps(tool_hook(4)).encode(),
        env=env,
        capture_output=True,
        timeout=30,
    )
    assert done.returncode == 0
    assert [e["tool_use_id"] for r in server.hook_requests() for e in _events(r["body"])] == [
        "toolu_4"
    ]


# --------------------------------------------------------------------------- earlier session

OWN = "11111111-2222-4333-8444-555555555555"
EARLIER = "66666666-7777-4888-9999-aaaaaaaaaaaa"


def _record(kind: str, **fields) -> str:
    return json.dumps({"type": kind, "uuid": str(uuid.uuid4()), **fields})


@pytest.mark.parametrize(
    "first",
    [
        # A /branch fork names where it came from.
        _record("user", sessionId=OWN, forkedFrom={"sessionId": EARLIER, "messageUuid": "m"}),
        # A resume that minted a new id copies the conversation, still naming the old id.
        _record("user", sessionId=EARLIER, message={"role": "user", "content": "go"}),
        # A fork copies the answers with the session they were requested in.
        _record("assistant", sessionId=OWN, requestSessionId=EARLIER, message={"content": []}),
        # A continuation summary names the transcript it continues.
        _record(
            "user",
            sessionId=OWN,
            isCompactSummary=True,
            message={
                "role": "user",
                "content": "This session is being continued from a previous conversation. "
                f"Read the full transcript at: /home/u/.claude/projects/-x/{EARLIER}.jsonl",
            },
        ),
    ],
)
def test_the_transcript_names_the_session_it_continues(tmp_path, first):
    path = tmp_path / f"{OWN}.jsonl"
    big = _record("api-request-blob", blob="x" * 200_000)  # bookkeeping before the records
    path.write_text(
        "\n".join([json.dumps({"type": "summary", "leafUuid": "l"}), big, first]) + "\n"
    )
    assert client.transcript_predecessor(str(path), OWN) == EARLIER


def test_a_transcript_of_its_own_or_a_compaction_in_place_names_no_earlier_session(tmp_path):
    path = tmp_path / f"{OWN}.jsonl"
    summary = {
        "role": "user",
        "content": "This session is being continued from a previous conversation. "
        f"Read the full transcript at: /home/u/.claude/projects/-x/{OWN}.jsonl",
    }
    path.write_text(
        "\n".join(
            [
                _record("user", sessionId=OWN, message={"role": "user", "content": "hi"}),
                _record("user", sessionId=OWN, isCompactSummary=True, message=summary),
                _record("assistant", sessionId=OWN, requestSessionId=OWN, message={}),
            ]
        )
    )
    assert client.transcript_predecessor(str(path), OWN) is None
    assert client.transcript_predecessor(str(tmp_path / "missing.jsonl"), OWN) is None


def test_the_last_turn_an_api_error_or_the_user_ended(tmp_path):
    path = tmp_path / "t.jsonl"
    error = _record(
        "assistant",
        isApiErrorMessage=True,
        error="server_error",
        apiErrorStatus=529,
        apiErrorType="overloaded_error",
        message={"model": "<synthetic>", "content": [{"type": "text", "text": "API Error: 529"}]},
    )
    path.write_text("\n".join([_record("user", message={"role": "user", "content": "go"}), error]))
    assert client.transcript_turn_state(str(path)) == {
        "api_error": "server_error",
        "status": 529,
        "type": "overloaded_error",
    }
    stopped = _record(
        "user",
        message={
            "role": "user",
            "content": [{"type": "text", "text": "[Request interrupted by user for tool use]"}],
        },
    )
    path.write_text(
        "\n".join([_assistant_line("m1", [{"type": "text", "text": "On it."}]), stopped])
    )
    assert client.transcript_turn_state(str(path)) == {"interrupted": True}
    answered = _assistant_line("m2", [{"type": "text", "text": "Done."}])
    path.write_text(
        "\n".join([error, _record("user", message={"role": "user", "content": "again"}), answered])
    )
    assert client.transcript_turn_state(str(path)) is None


def test_stop_and_end_carry_the_earlier_session_and_the_turn_state(configured, server, tmp_path):
    path = tmp_path / f"{OWN}.jsonl"
    error = _record(
        "assistant",
        sessionId=OWN,
        isApiErrorMessage=True,
        error="server_error",
        apiErrorStatus=502,
        message={"model": "<synthetic>", "content": [{"type": "text", "text": "API Error: 502"}]},
    )
    copied = _record("user", sessionId=EARLIER, message={"role": "user", "content": "old"})
    path.write_text("\n".join([copied, error]) + "\n")
    hook = {
        "hook_event_name": "Stop",
        "session_id": OWN,
        "transcript_path": str(path),
        "cwd": str(tmp_path),
    }
    run(hook)
    meta = server.requests[0]["body"]["sessionhub"]
    assert meta["resumed_from"] == EARLIER
    assert meta["turn"] == {"api_error": "server_error", "status": 502}


def test_an_oversized_final_message_keeps_its_head_and_its_end():
    report = "Head of the report. " + "z" * 200_000 + " The run drops from 48 to 19 minutes."
    event = {
        "sessionhub": {"event_id": "e", "final_message": report},
        "last_assistant_message": report,
    }
    fitted = client.fit_event(event)
    for text in (fitted["last_assistant_message"], fitted["sessionhub"]["final_message"]):
        assert text.startswith("Head of the report.")
        assert text.endswith("from 48 to 19 minutes.")
        assert "sessionhub-hook cut" in text and len(text) < client.MAX_STRING_CHARS + 100
