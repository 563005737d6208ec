#!/usr/bin/env python3
"""Regenerate the memory-quality corpus: every scripted session of ``scenarios.py`` run
through the real Claude Code CLI (npm, pinned, as the test suite installs it) against
the Messages API mock, plus the hand-written sessions in older shapes (``legacy.py``).

What Claude Code fires is kept by a recorder hook (registered for every event the hook
client installs, blocking, so that it runs when Claude Code runs the client): the hook's
JSON as Claude Code wrote it, when it fired, and how many lines the session's transcript
(and a subagent's) had at that moment, so that a replay can show the client the
transcript as it was. Each session's transcript files are kept too, without the records
Claude Code writes for its own request bookkeeping (system prompt and tool schema blobs,
listings of skills and agents), which the client never reads; the line counts are mapped
onto what is kept. The home folder of the run is written ``{HOME}`` everywhere.

Run from the repository root (a few minutes; needs npm and git)::

    .venv/bin/python bench/corpus/generate.py

It rewrites ``bench/corpus/sessions.jsonl`` (the recorded hooks of every session, in
order), ``bench/corpus/claude-projects/`` (the transcripts) and ``bench/corpus/truth.json``
(each session's id, project and ground truth). Session ids and times of day differ from
run to run; what the sessions say and do does not.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench.corpus import legacy  # noqa: E402
from bench.corpus.scenarios import BOILERPLATE, PROJECTS, SESSIONS, Session  # noqa: E402
from tests.integrations.mock_anthropic import (  # noqa: E402
    CLAUDE_CODE_VERSION,
    SUMMARY_TEXT,
    MockAnthropic,
)

CORPUS = REPO / "bench" / "corpus"
ROOT = Path("/tmp/sessionhub-corpus")
HOME_MARK = "{HOME}"
EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Notification",
    "Stop",
    "StopFailure",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "SessionEnd",
)
# Records Claude Code writes about its own requests: the client never reads them.
DROPPED_TYPES = {"api-request-blob", "api-request-shape", "api-request"}
DROPPED_ATTACHMENTS = {
    "skill_listing",
    "deferred_tools_delta",
    "agent_listing_delta",
    "environment",
    "model",
    "mcp_instructions_delta",
    "prompt_snapshot",
    "remote_session_change",
    "auto_mode",
    "session_context",
}

RECORDER = """import json, os, sys, time
raw = sys.stdin.buffer.read()
at = time.time_ns()
out = {"at_ns": at, "raw": raw.decode("utf-8", "replace"), "lines": {}}
try:
    hook = json.loads(raw)
except ValueError:
    hook = None
if isinstance(hook, dict):
    for key in ("transcript_path", "agent_transcript_path"):
        path = hook.get(key)
        if isinstance(path, str) and path:
            try:
                with open(os.path.expanduser(path), "rb") as f:
                    out["lines"][key] = f.read().count(b"\\n")
            except OSError:
                out["lines"][key] = None
with open(os.path.join(os.environ["RECORD_DIR"], f"{at}-{os.getpid()}.json"), "w") as f:
    json.dump(out, f)
"""


def claude_binary() -> Path:
    from tests.integrations.node_runtime import npm_prefix

    prefix = npm_prefix("claude-code", {"@anthropic-ai/claude-code": CLAUDE_CODE_VERSION})
    return prefix / "node_modules" / ".bin" / "claude"


class Generator:
    def __init__(self, claude: Path, mock: MockAnthropic) -> None:
        self.claude, self.mock = claude, mock
        self.home = ROOT / "home"
        self.records = ROOT / "records"
        self.ids: dict[str, str] = {}  # session name -> session id
        self.recorded: list[dict[str, Any]] = []  # {"name", "t", "raw", "lines"}

    def setup(self) -> None:
        shutil.rmtree(ROOT, ignore_errors=True)
        self.records.mkdir(parents=True)
        (self.home / ".claude").mkdir(parents=True)
        (self.home / "recorder.py").write_text(RECORDER)
        command = f"python3 {self.home / 'recorder.py'}"
        hooks = {
            event: [{"matcher": "*", "hooks": [{"type": "command", "command": command}]}]
            for event in EVENTS
        }
        (self.home / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
        for name, remote in PROJECTS.items():
            if name == "legacy-crm":
                continue
            folder = self.project(name)
            folder.mkdir(parents=True)
            subprocess.run(["git", "init", "-q", str(folder)], check=True)
            if remote:
                subprocess.run(
                    ["git", "-C", str(folder), "remote", "add", "origin", remote], check=True
                )
            (folder / "CLAUDE.md").write_text(
                f"# {name}\n\nRun the tests before you commit. Keep changes small.\n"
            )

    def project(self, name: str) -> Path:
        return self.home / "src" / name

    def env(self, session: Session) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "IS_SANDBOX": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "ANTHROPIC_BASE_URL": self.mock.url,
            "ANTHROPIC_API_KEY": "sk-ant-test-not-a-key",
            "RECORD_DIR": str(self.records),
            # An API error ends the turn at once instead of after minutes of retries.
            "CLAUDE_CODE_MAX_RETRIES": "0",
        }
        if session.tools in ("tasks", "todo"):
            env["CLAUDE_CODE_ENABLE_TODO_TOOLS"] = "1"
        if session.tools == "todo":
            env["CLAUDE_CODE_ENABLE_TASKS"] = "0"  # the TodoWrite of earlier releases
        return env

    def run_turn(self, session: Session, index: int) -> None:
        turn = session.turns[index]
        if turn.steps:
            self.mock.script(turn.prompt, list(turn.steps))
        for prompt, steps in session.subagents.items():
            self.mock.script(prompt, list(steps), prefix=prompt.startswith("<"))
        if session.compact_summary:
            self.mock.compact_summary = session.compact_summary
        args = ["-p", "--dangerously-skip-permissions"]
        if index == 0 and session.fork_of:
            args += ["--resume", self.ids[session.fork_of], "--fork-session"]
        elif index > 0:
            args += (
                ["--continue"] if turn.how == "continue" else ["--resume", self.ids[session.name]]
            )
        before = set(os.listdir(self.records))
        started = time.time_ns()
        done = subprocess.run(
            # "--" so that a prompt such as "--history" is a prompt, not an option.
            [str(self.claude), *args, "--", turn.prompt],
            cwd=self.project(session.project),
            env=self.env(session),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        time.sleep(0.5)  # hooks of a background task may still be writing
        expected_fail = any(step.status for step in turn.steps)
        if done.returncode != 0 and not expected_fail:
            raise RuntimeError(f"{session.name} turn {index}: {done.stdout} {done.stderr}")
        new = sorted(set(os.listdir(self.records)) - before)
        hour = session.hour + turn.minute / 60
        for file in new:
            record = json.loads((self.records / file).read_text())
            hook = json.loads(record["raw"])
            if index == 0 and session.name not in self.ids:
                self.ids[session.name] = hook["session_id"]
            if hook["session_id"] != self.ids[session.name]:
                raise RuntimeError(f"{session.name}: a hook of another session {hook}")
            self.recorded.append(
                {
                    "session": session.name,
                    "t": round(hour * 3600 + (record["at_ns"] - started) / 1e9, 3),
                    "raw": record["raw"],
                    "lines": record["lines"],
                }
            )
        self.mock.compact_summary = SUMMARY_TEXT
        print(f"  {session.name} turn {index}: {len(new)} hooks", file=sys.stderr)

    def run_all(self) -> None:
        order = sorted(
            ((s.hour + t.minute / 60, s, i) for s in SESSIONS for i, t in enumerate(s.turns)),
            key=lambda x: x[0],
        )
        for _, session, index in order:
            self.run_turn(session, index)


def _kept(record: dict[str, Any]) -> bool:
    if record.get("type") in DROPPED_TYPES:
        return False
    attachment = record.get("attachment")
    return not (
        record.get("type") == "attachment"
        and isinstance(attachment, dict)
        and attachment.get("type") in DROPPED_ATTACHMENTS
    )


def templated(text: str) -> str:
    return text.replace(str(ROOT / "home"), HOME_MARK)


def write_corpus(gen: Generator) -> None:
    """Transcripts without Claude Code's bookkeeping, hooks with their line counts mapped."""
    source = gen.home / ".claude" / "projects"
    target = CORPUS / "claude-projects"
    shutil.rmtree(target, ignore_errors=True)
    kept_upto: dict[str, list[int]] = {}  # templated path -> kept lines among the first n
    for path in sorted(source.rglob("*.jsonl")):
        lines = path.read_text().splitlines(keepends=True)
        out, prefix = [], [0]
        for line in lines:
            try:
                keep = _kept(json.loads(line))
            except ValueError:
                keep = True
            if keep:
                out.append(templated(line))
            prefix.append(len(out))
        relative = path.relative_to(source)
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        (target / relative).write_text("".join(out))
        kept_upto[templated(str(path))] = prefix
    hooks = []
    for entry in sorted(gen.recorded, key=lambda e: e["t"]):
        raw = templated(entry["raw"])
        hook = json.loads(raw)
        lines = {}
        for key, count in entry["lines"].items():
            prefix = kept_upto.get(hook.get(key, ""))
            lines[key] = (
                None if count is None or prefix is None else prefix[min(count, len(prefix) - 1)]
            )
        hooks.append({"session": entry["session"], "t": entry["t"], "hook": hook, "lines": lines})
    with open(CORPUS / "sessions.jsonl", "w") as handle:
        for item in hooks + legacy.recorded():
            handle.write(json.dumps(item, ensure_ascii=False) + "\n")
    legacy.write_transcripts(target)
    truth = {
        "claude_code_version": CLAUDE_CODE_VERSION,
        "boilerplate": BOILERPLATE,
        "projects": PROJECTS,
        "sessions": {
            **{
                s.name: {
                    "session_id": gen.ids[s.name],
                    "project": s.project,
                    "hour": s.hour,
                    "first_prompt": s.turns[0].prompt,
                    **dataclasses.asdict(s.truth),
                }
                for s in SESSIONS
            },
            **legacy.truth(),
        },
    }
    (CORPUS / "truth.json").write_text(json.dumps(truth, ensure_ascii=False, indent=1) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args()
    claude = claude_binary()
    with MockAnthropic() as mock:
        gen = Generator(claude, mock)
        gen.setup()
        gen.run_all()
        write_corpus(gen)
    print(f"corpus written: {len(gen.recorded)} hooks of {len(gen.ids)} sessions", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
