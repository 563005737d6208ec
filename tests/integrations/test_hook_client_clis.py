"""Unit tests for the hook client's Codex CLI and Gemini CLI parts: the hook mode that
names a gateway, each gateway's endpoint (one spool, one queue for all), the preamble
each CLI takes, what it reads from each CLI's transcript, Gemini CLI's compression watch,
and the installers. No Django: the fake server of test_hook_client_unit plays SessionHub.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.integrations import test_hook_client_unit as unit

client = unit.client
log_text, run, spool_ids, free_port_url = (
    unit.log_text,
    unit.run,
    unit.spool_ids,
    unit.free_port_url,
)
# The fake SessionHub and the private HOME of the client's unit tests.
server, home, configured = unit.server, unit.home, unit.configured

SESSION = "019a7c10-0000-7000-8000-00000000c0de"


def codex_hook(name: str, **fields: object) -> dict:
    return {
        "session_id": SESSION,
        "transcript_path": "/nonexistent/rollout.jsonl",
        "cwd": "/nonexistent/project",
        "hook_event_name": name,
        "model": "gpt-5.1-codex",
        "permission_mode": "default",
        **fields,
    }


def gemini_hook(name: str, **fields: object) -> dict:
    return {
        "session_id": "6b0e9f52-3c1d-4a8e-9f27-5d4c3b2a1e0f",
        "transcript_path": "/nonexistent/chat.jsonl",
        "cwd": "/nonexistent/project",
        "hook_event_name": name,
        "timestamp": "2026-11-27T17:00:00.000Z",
        **fields,
    }


def requests_to(server, path: str) -> list[dict]:
    return [r for r in server.requests if r["path"] == path]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


# --------------------------------------------------------------------------- hook mode


@pytest.mark.parametrize(
    ("args", "mode"),
    [
        ([], ("", "claude-code")),
        (["hook"], ("", "claude-code")),
        (["hook", "--detach"], ("--detach", "claude-code")),
        (["hook", "--queue", "--gateway", "codex"], ("--queue", "codex")),
        (["hook", "--gateway", "gemini-cli"], ("", "gemini-cli")),
        (["hook", "--detach", "--gateway", "gemini-cli"], ("--detach", "gemini-cli")),
        (["hook", "--gateway", "nonesuch"], None),
        (["hook", "--gateway"], None),
        (["hook", "--other"], None),
        (["install", "--codex"], None),
    ],
)
def test_hook_mode_names_the_gateway(args, mode):
    assert client.hook_mode(args) == mode
    assert client.args_are_cli(args) == (mode is None and bool(args))


def test_each_gateway_posts_to_its_endpoint(configured, server):
    assert run(codex_hook("PostToolUse", tool_name="Bash"), ["hook", "--gateway", "codex"])[0] == 0
    assert run(gemini_hook("AfterTool"), ["hook", "--gateway", "gemini-cli"])[0] == 0
    [codex] = requests_to(server, "/api/v1/hooks/codex")
    [gemini] = requests_to(server, "/api/v1/hooks/gemini-cli")
    assert codex["body"]["sessionhub"]["gateway"] == "codex"
    assert codex["body"]["tool_name"] == "Bash"
    assert gemini["body"]["sessionhub"]["gateway"] == "gemini-cli"
    assert requests_to(server, client.HOOKS_PATH) == []


def test_one_spool_sends_each_event_to_its_gateway_in_order(configured, server, monkeypatch):
    monkeypatch.setenv("SESSIONHUB_URL", free_port_url())  # the server is away
    run(codex_hook("UserPromptSubmit", prompt="a"), ["hook", "--gateway", "codex"])
    run(gemini_hook("BeforeAgent", prompt="b"), ["hook", "--gateway", "gemini-cli"])
    run(gemini_hook("AfterAgent", prompt_response="c"), ["hook", "--gateway", "gemini-cli"])
    run({**codex_hook("PreToolUse"), "tool_name": "Bash"}, ["hook", "--gateway", "codex"])
    run({**codex_hook("Stop"), "hook_event_name": "Stop"})  # Claude Code's
    waiting = spool_ids(configured)
    assert len(waiting) == 5
    monkeypatch.setenv("SESSIONHUB_URL", server.url)
    out = io.StringIO()
    client.main(["flush"], stdout=out)
    assert "sent 5, waiting 0" in out.getvalue()
    sent = [
        (r["path"].rsplit("/", 1)[1], [e["sessionhub"]["event_id"] for e in r["body"]])
        for r in server.requests
    ]
    assert sent == [
        ("codex", waiting[:1]),
        ("gemini-cli", waiting[1:3]),
        ("codex", waiting[3:4]),
        ("claude-code", waiting[4:]),
    ]


def test_queued_hooks_keep_their_gateway(configured, server):
    raw = json.dumps(codex_hook("PostToolUse", tool_name="Bash")).encode()
    path = client.queue_event(raw, start_sender=False, gateway="codex")
    assert path.endswith(".codex.hook")
    other = client.queue_event(raw, start_sender=False, gateway="../../evil")
    assert os.path.basename(other).count(".") == 1  # a name that is no gateway is dropped
    assert client._queued_gateway(path) == "codex"
    assert client._queued_gateway(other) == "claude-code"
    cfg = client.Config()
    spool = client.Spool(cfg.spool_path)
    assert client.move_queue(cfg, spool, client.Deadline(5)) == 2
    assert client.flush_spool(cfg, spool, client.Deadline(5)) == "ok"
    assert [r["path"] for r in server.requests] == [
        "/api/v1/hooks/codex",
        client.HOOKS_PATH,
    ]


# --------------------------------------------------------------------------- preambles


def test_codex_start_and_first_prompt_get_the_preamble(configured, server):
    server.preamble = "[SESSION CONTINUITY] earlier work"
    _, out, _ = run(codex_hook("SessionStart", source="startup"), ["hook", "--gateway", "codex"])
    assert json.loads(out) == {
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": "[SESSION CONTINUITY] earlier work",
        }
    }
    prompt = codex_hook("UserPromptSubmit", prompt="fix the flaky test")
    _, out, _ = run(prompt, ["hook", "--gateway", "codex"])
    assert json.loads(out)["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    asked = [r["body"] for r in requests_to(server, client.CONTINUITY_PATH)]
    assert [a["source"] for a in asked] == ["codex", "codex"]
    assert asked[1]["prompt"] == "fix the flaky test"
    assert asked[1]["event"]["sessionhub"]["gateway"] == "codex"
    # Only the first prompt asks; after a compaction the start asks nothing.
    assert run(prompt, ["hook", "--gateway", "codex"])[1] == ""
    assert (
        run(codex_hook("SessionStart", source="compact"), ["hook", "--gateway", "codex"])[1] == ""
    )
    assert len(requests_to(server, client.CONTINUITY_PATH)) == 2


def test_gemini_first_prompt_asks_with_the_users_words_only(configured, server):
    server.preamble = "[SESSION CONTINUITY] earlier work"
    prompt = gemini_hook(
        "BeforeAgent",
        prompt="<hook_context>[SESSION CONTINUITY] a</hook_context>\n\nwhy does the build fail",
    )
    _, out, _ = run(prompt, ["hook", "--gateway", "gemini-cli"])
    assert json.loads(out)["hookSpecificOutput"] == {
        "hookEventName": "BeforeAgent",
        "additionalContext": "[SESSION CONTINUITY] earlier work",
    }
    [asked] = [r["body"] for r in requests_to(server, client.CONTINUITY_PATH)]
    assert (asked["source"], asked["prompt"]) == ("gemini-cli", "why does the build fail")
    # A Claude Code-style prompt hook of Gemini CLI is no prompt there.
    assert (
        run(gemini_hook("UserPromptSubmit", prompt="x"), ["hook", "--gateway", "gemini-cli"])[1]
        == ""
    )


# --------------------------------------------------------------------------- transcripts


def rollout(tmp_path: Path) -> Path:
    """A Codex rollout in its shape: a turn with reasoning, a compaction whose summary
    Codex records as the model's answer, then the turn's last words."""

    def item(payload: dict) -> dict:
        return {"timestamp": "2026-11-27T17:00:00Z", "type": "response_item", "payload": payload}

    def text(role: str, words: str) -> dict:
        kind = "output_text" if role == "assistant" else "input_text"
        return item({"type": "message", "role": role, "content": [{"type": kind, "text": words}]})

    return write_jsonl(
        tmp_path / "rollout.jsonl",
        [
            {"type": "session_meta", "payload": {"id": SESSION, "cwd": "/p"}},
            {"type": "turn_context", "payload": {"model": "gpt-5.1-codex", "cwd": "/p"}},
            text("user", "check the build"),
            item(
                {
                    "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": "Summary only."}],
                    "content": [{"type": "reasoning_text", "text": "The cache is stale, so"}],
                }
            ),
            item(
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "I rerun it."}]}
            ),
            text("assistant", "Rerunning."),
            {
                "type": "event_msg",
                "payload": {
                    "type": "token_count",
                    "info": {"total_token_usage": {"total_tokens": 1234}},
                },
            },
            text("assistant", "Summary of the work so far."),
            {"type": "compacted", "payload": {"message": "bridge", "replacement_history": []}},
            text("assistant", "DONE the build is green"),
            {
                "type": "event_msg",
                "payload": {
                    "type": "token_count",
                    "info": {"total_token_usage": {"total_tokens": 5678}},
                },
            },
            '{"type": "response_item", "payload": {"type": "mess',  # half written
        ][:-1],
    )


def test_codex_rollout_gives_last_words_reasoning_tokens_and_summary(tmp_path):
    found = client.codex_rollout(str(rollout(tmp_path)))
    assert found["final"] == "DONE the build is green"
    assert found["tail"] == "The cache is stale, so\n\nI rerun it."
    assert (found["model"], found["tokens"]) == ("gpt-5.1-codex", 5678)
    assert found["compact_summary"] == "Summary of the work so far."
    with (tmp_path / "rollout.jsonl").open("a") as handle:
        handle.write(
            json.dumps(
                {
                    "type": "event_msg",
                    "payload": {"type": "task_complete", "last_agent_message": "Done."},
                }
            )
            + "\n"
        )
    assert client.codex_rollout(str(tmp_path / "rollout.jsonl"))["final"] == "Done."


def test_codex_events_carry_what_the_rollout_says(configured, server, tmp_path):
    path = str(rollout(tmp_path))
    run(
        codex_hook("Stop", transcript_path=path, last_assistant_message="It is green."),
        ["hook", "--gateway", "codex"],
    )
    run(
        codex_hook("PostCompact", transcript_path=path, trigger="auto"),
        ["hook", "--gateway", "codex"],
    )
    end = {
        k: v
        for k, v in codex_hook("SessionEnd", transcript_path=path, reason="other").items()
        if k != "model"
    }
    run(end, ["hook", "--gateway", "codex"])
    stop, compact, ended = [r["body"] for r in requests_to(server, "/api/v1/hooks/codex")]
    assert "final_message" not in stop["sessionhub"]  # Codex's own field says it
    assert stop["sessionhub"]["reasoning_tail"].endswith("I rerun it.")
    assert stop["sessionhub"]["token_count"] == 5678
    assert compact["sessionhub"]["compact_summary"] == "Summary of the work so far."
    assert ended["sessionhub"]["final_message"] == "DONE the build is green"
    assert ended["sessionhub"]["model"] == "gpt-5.1-codex"  # SessionEnd names none


def chat(tmp_path: Path) -> Path:
    """A Gemini CLI chat recording in its shape: a message written again as it grows."""
    return write_jsonl(
        tmp_path / "chat.jsonl",
        [
            {"sessionId": "g", "startTime": "2026-11-27T17:00:00Z", "kind": "main"},
            {
                "$set": {
                    "messages": [
                        {"id": "0", "type": "user", "content": [{"text": "<session_context>x"}]}
                    ]
                }
            },
            {"id": "1", "type": "user", "content": [{"text": "first prompt"}]},
            {
                "id": "2",
                "type": "gemini",
                "content": "old answer",
                "thoughts": [{"subject": "", "description": "old thought"}],
                "model": "gemini-2.5-pro",
            },
            {"id": "3", "type": "user", "content": [{"text": "check the build"}]},
            {
                "id": "4",
                "type": "gemini",
                "content": "",
                "thoughts": [{"subject": "Plan", "description": "run the tests"}],
                "model": "gemini-2.5-pro",
            },
            {
                "id": "4",
                "type": "gemini",
                "content": "",
                "thoughts": [{"subject": "Plan", "description": "run the tests"}],
                "model": "gemini-2.5-pro",
                "toolCalls": [{"name": "run_shell_command"}],
            },
            {
                "id": "5",
                "type": "user",
                "content": [{"functionResponse": {"name": "run_shell_command"}}],
            },
            {
                "id": "6",
                "type": "gemini",
                "content": "DONE green",
                "thoughts": [{"subject": "", "description": "they pass"}],
                "model": "gemini-2.5-flash",
            },
            {"$set": {"lastUpdated": "2026-11-27T17:01:00Z"}},
        ],
    )


def test_gemini_chat_gives_last_words_thoughts_of_the_turn_and_model(tmp_path):
    found = client.gemini_chat(str(chat(tmp_path)))
    assert found == {
        "final": "DONE green",
        "tail": "Plan: run the tests\n\nthey pass",
        "model": "gemini-2.5-flash",
    }


def test_gemini_turn_end_carries_the_chat_recording(configured, server, tmp_path):
    path = str(chat(tmp_path))
    run(
        gemini_hook("AfterAgent", transcript_path=path, prompt_response="DONE green"),
        ["hook", "--gateway", "gemini-cli"],
    )
    [sent] = [r["body"] for r in requests_to(server, "/api/v1/hooks/gemini-cli")]
    assert sent["sessionhub"]["model"] == "gemini-2.5-flash"
    assert sent["sessionhub"]["reasoning_tail"] == "Plan: run the tests\n\nthey pass"
    assert "final_message" not in sent["sessionhub"]


# --------------------------------------------------------------------------- compression


def append_later(path: Path, record: dict, delay: float) -> threading.Thread:
    def write() -> None:
        time.sleep(delay)
        with path.open("a") as handle:
            handle.write(json.dumps(record)[:20])
            handle.flush()
            time.sleep(0.05)  # a line written in two goes
            handle.write(json.dumps(record)[20:] + "\n")

    thread = threading.Thread(target=write)
    thread.start()
    return thread


def test_a_compression_is_seen_in_the_chat_recording(tmp_path):
    path = chat(tmp_path)
    start = path.stat().st_size
    rewrite = {
        "$set": {
            "messages": [
                {"id": "0", "type": "user", "content": [{"text": "<session_context>x"}]},
                {
                    "id": "9",
                    "type": "user",
                    "content": [{"text": "<state_snapshot>so far</state_snapshot>"}],
                },
                {"id": "10", "type": "gemini", "content": [{"text": "Got it."}]},
            ]
        }
    }
    writer = append_later(path, rewrite, 0.3)
    assert client.watch_gemini_compression(str(path), start, os.getpid(), 10) == (
        True,
        "<state_snapshot>so far</state_snapshot>",
    )
    writer.join()
    start = path.stat().st_size
    writer = append_later(path, {"id": "11", "type": "gemini", "content": "next answer"}, 0.3)
    assert client.watch_gemini_compression(str(path), start, os.getpid(), 10) == (False, "")
    writer.join()


def test_the_watch_ends_when_the_cli_is_gone_or_time_runs_out(tmp_path):
    path = chat(tmp_path)
    finished = subprocess.Popen(["true"])
    finished.wait()
    gone = finished.pid
    started = time.monotonic()
    assert client.watch_gemini_compression(str(path), path.stat().st_size, gone, 30) == (False, "")
    assert client.watch_gemini_compression(str(path), path.stat().st_size, os.getpid(), 0.3) == (
        False,
        "",
    )
    assert time.monotonic() - started < 5


def test_pre_compress_is_sent_once_the_cli_decided(configured, server, tmp_path):
    path = chat(tmp_path)
    hook = gemini_hook("PreCompress", transcript_path=str(path), trigger="auto")
    client._noted["transcript_size"] = path.stat().st_size  # what main notes before detaching
    client._noted["parent"] = os.getpid()
    writer = append_later(
        path,
        {"$set": {"messages": [{"type": "user", "content": "<state_snapshot>s</state_snapshot>"}]}},
        0.3,
    )
    try:
        run(hook, ["hook", "--gateway", "gemini-cli"])
    finally:
        client._noted.update(parent=0, transcript_size=None)
        writer.join()
    [sent] = [r["body"] for r in requests_to(server, "/api/v1/hooks/gemini-cli")]
    assert sent["sessionhub"]["compacted"] is True
    assert sent["sessionhub"]["compact_summary"] == "<state_snapshot>s</state_snapshot>"
    assert "transcript_size" not in sent["sessionhub"]


# --------------------------------------------------------------------------- install


def install(home: Path, *args: str) -> str:
    out = io.StringIO()
    assert client.main(["install", *args], stdout=out) == 0
    return out.getvalue()


def test_gemini_install_keeps_other_settings_and_hooks_and_is_idempotent(home):
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    mine = {"type": "command", "command": "notify-send done", "name": "mine"}
    settings.write_text(json.dumps({"theme": "dark", "hooks": {"AfterAgent": [{"hooks": [mine]}]}}))
    said = install(home, "--gemini-cli")
    assert f"updated: {settings}" in said
    data = json.loads(settings.read_text())
    assert data["theme"] == "dark"
    assert set(data["hooks"]) == set(client.CLI_HOOKS[client.GEMINI_CLI])
    assert data["hooks"]["AfterAgent"][0] == {"hooks": [mine]}
    [entry] = data["hooks"]["AfterAgent"][1]["hooks"]
    assert entry["timeout"] == 10_000 and entry["name"] == "sessionhub"
    assert entry["command"].endswith(f"{client.CLIENT_PATH} hook --gateway gemini-cli")
    [queued] = data["hooks"]["AfterTool"][0]["hooks"]
    assert "sessionhub_hook_queue.py --gateway gemini-cli" in queued["command"]
    assert (home / ".sessionhub" / "sessionhub_hook_queue.py").exists()
    assert f"unchanged: {settings}" in install(home, "--gemini-cli")
    # The Claude Code settings were not touched.
    assert not (home / ".claude").exists()
    out = io.StringIO()
    client.main(["uninstall", "--gemini-cli"], stdout=out)
    after = json.loads(settings.read_text())
    assert after == {"theme": "dark", "hooks": {"AfterAgent": [{"hooks": [mine]}]}}


def test_codex_install_without_codex_says_how_to_trust(home, monkeypatch):
    monkeypatch.setenv("PATH", str(home))  # no codex here
    monkeypatch.setenv("CODEX_HOME", str(home / "codex-home"))
    said = install(home, "--codex")
    hooks_file = home / "codex-home" / "hooks.json"
    assert f"updated: {hooks_file}" in said
    assert "codex is not on PATH" in said and "/hooks" in said
    data = json.loads(hooks_file.read_text())["hooks"]
    assert set(data) == set(client.CLI_HOOKS[client.CODEX])
    assert data["SessionEnd"][0]["hooks"][0]["timeout"] == 10  # seconds
    assert "--detach --gateway codex" in data["PostCompact"][0]["hooks"][0]["command"]
    fake = home / "codex"
    fake.write_text("#!/bin/sh\nexit 3\n")
    fake.chmod(0o755)
    said = install(home, "--codex", "--codex-bin", str(fake))
    assert "could not trust the hooks" in said and "/hooks" in said


def test_a_shared_command_names_the_gateway(home, tmp_path):
    target = tmp_path / "project-hooks.json"
    install(
        home,
        "--codex",
        "--settings",
        str(target),
        "--command",
        "sessionhub-hook",
        "--codex-bin",
        "/nonexistent/codex",
    )
    hooks = json.loads(target.read_text())["hooks"]
    assert hooks["Stop"][0]["hooks"][0]["command"] == "sessionhub-hook hook --gateway codex"
    assert (
        hooks["PreToolUse"][0]["hooks"][0]["command"]
        == "sessionhub-hook hook --queue --gateway codex"
    )
    assert log_text(home) == ""


def test_settings_with_comments_are_left_alone(home, capsys):
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    text = '{\n  // my theme\n  "theme": "dark"\n}\n'
    settings.write_text(text)
    out = io.StringIO()
    assert client.main(["install", "--gemini-cli"], stdout=out) == 0
    assert "is not plain JSON, so it is left alone" in capsys.readouterr().err
    assert settings.read_text() == text
