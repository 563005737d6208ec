#!/usr/bin/env python3
"""What the Claude Code hooks cost the agent, measured the way Claude Code runs them.

1. Blocking hooks (``SessionStart``, which prints the preamble; ``UserPromptSubmit``;
   ``Stop``, which reads the transcript) and the queued ``PostToolUse`` (the few-line
   script the async hooks run; a sender it starts does the sending):
   the client is installed with its own ``install`` into a throwaway settings file and
   each hook's entry is run exactly as written there (exec form: ``command`` + ``args``,
   no shell), one new process per call with the hook JSON on stdin, against a tiny local
   server that answers 200 at once, next to ``python3 -c pass`` with the same interpreter.
   Runs are interleaved so machine noise hits every kind alike. Target: SessionStart at
   most 60 ms over ``python3 -c pass`` at p50.
2. ``--cli``: the agent-visible overhead of a 10-tool session through the real Claude Code
   CLI (npm, pinned, as the test suite installs it) against the local Messages API mock:
   for each tool call, the time from the model's ``tool_use`` answer to the next request
   (what the agent waits for: the tool itself and its blocking hooks), with the hooks
   installed and without, sessions interleaved. Target: at most 5 ms more per tool call
   at p50 (the tool hooks are async). Needs the virtualenv (``.venv/bin/python``)::

    python3 bench/hook_client.py                  # part 1, N=50 of each
    .venv/bin/python bench/hook_client.py --cli   # parts 1 and 2
    python3 bench/hook_client.py -n 200 --check   # exit 1 when over a target
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLIENT = REPO / "integrations" / "claude-code" / "sessionhub_hook.py"
TARGET_MS = 60.0
TOOL_TARGET_MS = 5.0
TOOLS_PER_SESSION = 10
SESSION_ID = "5edb0bc8-1d81-4c83-adbe-3baf4facb9d3"  # the basic fixture's session
CWD = "/home/maya/work/ledger-sync"
PREAMBLE = (
    "[SESSION CONTINUITY — inherited from 1 prior session(s)]\n\nLAST SESSION (2h ago):\n"
    "- asked: The nightly ledger export skips refunds.\n\nPENDING TASKS:\n"
    "- [task-2731] TODO: task-2731 regenerate the November ledger exports. (2h ago)"
)


# --------------------------------------------------------------------------- stub server


class Stub(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: Stub
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"null")
        # Events, not requests: the queue's sender posts several in one request.
        counted = len(body) if isinstance(body, list) else 1
        with self.server.lock:
            self.server.counts[self.path] = self.server.counts.get(self.path, 0) + counted
        if self.path.endswith("/continuity"):
            answer = {"preamble": PREAMBLE, "sources": [], "inherited_pins": []}
        else:
            events = body if isinstance(body, list) else [body]
            answer = {
                "accepted": len(events),
                "duplicates": 0,
                "rejected": 0,
                "results": [
                    {"index": i, "status": "accepted", "event_id": e["sessionhub"]["event_id"]}
                    for i, e in enumerate(events)
                ],
            }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


# --------------------------------------------------------------------------- inputs


def real_interpreter(python: str) -> tuple[str, str]:
    """Resolve launchers such as pyenv shims to the interpreter they start, and its version."""
    done = subprocess.run(
        [
            python,
            "-c",
            "import sys, platform; print(sys.executable); print(platform.python_version())",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    path, version = [*done.stdout.splitlines(), "", ""][:2]
    return path or python, version


def fixture_transcript() -> list[str]:
    """The basic fixture's transcript (tests/fixtures/claude-code/basic)."""
    path = REPO / "tests" / "fixtures" / "claude-code" / "basic" / "transcript.jsonl"
    return [x for x in path.read_text().splitlines() if x.strip()]


def write_transcript(path: Path, size_kb: int) -> int:
    """A transcript of about `size_kb` KB: earlier turns first, the last turn at the end."""
    filler_think = "I should look at the cache settings next; maybe the key prefix is wrong. " * 8
    lines: list[str] = []
    size = 0
    turn = 0
    while size < size_kb * 1024:
        turn += 1
        message_id = f"msg_filler_{turn:06d}"
        for block in (
            {"type": "thinking", "thinking": filler_think, "signature": "sig"},
            {"type": "text", "text": f"Step {turn}: looked at the settings. " * 4},
        ):
            record = {
                "type": "assistant",
                "uuid": f"u-{turn}-{block['type']}",
                "sessionId": SESSION_ID,
                "message": {"id": message_id, "role": "assistant", "content": [block]},
            }
            line = json.dumps(record)
            lines.append(line)
            size += len(line) + 1
    last_turn = fixture_transcript()
    path.write_text("\n".join(lines + last_turn) + "\n")
    return path.stat().st_size


def hook_line(kind: str, transcript: Path) -> str:
    base = {
        "session_id": SESSION_ID,
        "transcript_path": str(transcript),
        "cwd": CWD,
        "permission_mode": "default",
        "hook_event_name": kind,
    }
    if kind == "PostToolUse":
        base |= {
            "tool_name": "Bash",
            "tool_input": {"command": "pytest -q tests", "description": "Run the tests"},
            "tool_response": {"stdout": "42 passed in 3.1s", "stderr": "", "interrupted": False},
            "tool_use_id": "toolu_07923986-bb9",
        }
    elif kind == "Stop":
        last = json.loads(fixture_transcript()[-1])["message"]["content"]
        final = next(b["text"] for b in reversed(last) if b.get("type") == "text")
        base |= {"stop_hook_active": False, "last_assistant_message": final}
    elif kind == "SessionStart":
        base |= {"source": "startup", "model": "claude-sonnet-4-5"}
    return json.dumps(base)


# --------------------------------------------------------------------------- measuring


def timed(command: list[str], stdin: str, env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        command, input=stdin, capture_output=True, text=True, env=env, check=False, timeout=60
    )
    elapsed = (time.perf_counter() - started) * 1000
    if done.returncode != 0 or done.stderr:
        raise SystemExit(f"{command} failed ({done.returncode}): {done.stderr}")
    return elapsed, done.stdout


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(0.95 * len(ordered)) - 1))]


def installed_entries(root: Path, python: str) -> dict[str, dict]:
    """Install the client into a throwaway settings file; its entry for each event."""
    settings = root / "settings.json"
    subprocess.run(
        [python, str(CLIENT), "install", "--settings", str(settings)],
        capture_output=True,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(root / "home")},
        check=True,
    )
    entries = {}
    for event, groups in json.loads(settings.read_text())["hooks"].items():
        [entry] = [h for g in groups for h in g["hooks"]]
        entries[event] = entry
    return entries


def as_claude_runs(entry: dict) -> list[str]:
    """The argv Claude Code spawns for an exec-form entry."""
    assert "args" in entry, f"not the exec form: {entry}"
    return [entry["command"], *entry["args"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--runs", type=int, default=50, help="runs of each kind (50)")
    parser.add_argument("--python", default="python3", help="interpreter (python3)")
    parser.add_argument("--transcript-kb", type=int, default=1024, help="transcript size (1024)")
    parser.add_argument("--warmup", type=int, default=3, help="uncounted runs of each kind (3)")
    parser.add_argument("--cli", action="store_true", help="also time the real Claude Code CLI")
    parser.add_argument("--cli-sessions", type=int, default=5, help="CLI sessions of each (5)")
    parser.add_argument("--check", action="store_true", help="exit 1 when over a target")
    parser.add_argument("--json", dest="json_path", help="also write the figures to this file")
    args = parser.parse_args()

    python, version = real_interpreter(shutil.which(args.python) or args.python)
    stub = Stub()
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory(prefix="sessionhub-bench-") as tmp:
        root = Path(tmp)
        (root / "home").mkdir()
        transcript = root / "transcript.jsonl"
        transcript_bytes = write_transcript(transcript, args.transcript_kb)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(root / "home"),
            "LANG": "C.UTF-8",
            "SESSIONHUB_URL": stub.url,
            "SESSIONHUB_TOKEN": "bench-token",
            "SESSIONHUB_SPOOL": str(root / "spool.jsonl"),
        }
        entries = installed_entries(root, python)
        prompt = json.loads(hook_line("SessionStart", transcript)) | {
            "hook_event_name": "UserPromptSubmit",
            "prompt": "Migrate the session store to redis",
        }
        kinds = {
            "python3 -c pass": ([python, "-c", "pass"], ""),
            "SessionStart": (
                as_claude_runs(entries["SessionStart"]),
                hook_line("SessionStart", transcript),
            ),
            "UserPromptSubmit": (as_claude_runs(entries["UserPromptSubmit"]), json.dumps(prompt)),
            "Stop": (as_claude_runs(entries["Stop"]), hook_line("Stop", transcript)),
            "PostToolUse (queued)": (
                as_claude_runs(entries["PostToolUse"]),
                hook_line("PostToolUse", transcript),
            ),
        }
        times: dict[str, list[float]] = {name: [] for name in kinds}
        for round_ in range(args.warmup + args.runs):
            for name, (command, stdin) in kinds.items():
                elapsed, out = timed(command, stdin, env)
                if name == "SessionStart":
                    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
                    assert context == PREAMBLE, out
                elif name == "UserPromptSubmit" and out:
                    # The session's first prompt asks continuity by relevance and adds it.
                    printed = json.loads(out)["hookSpecificOutput"]
                    assert printed["hookEventName"] == "UserPromptSubmit", out
                elif out:
                    raise SystemExit(f"{name} printed {out!r}")
                if round_ >= args.warmup:
                    times[name].append(elapsed)
        # The queue's sender sends after the queued hooks have gone: wait for the last.
        rounds = args.warmup + args.runs
        hooks_path = "/api/v1/hooks/claude-code"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and stub.counts.get(hooks_path, 0) < 4 * rounds:
            time.sleep(0.05)
        spooled = (root / "spool.jsonl").exists()
    stub.shutdown()

    assert stub.counts.get(hooks_path) == 4 * rounds, stub.counts
    # Every SessionStart asks, and so does the session's first prompt (only the first).
    assert stub.counts.get("/api/v1/continuity") == rounds + 1, stub.counts
    assert not spooled, "events were spooled: the stub did not answer in time"

    base = times["python3 -c pass"]
    base_median, base_p95 = statistics.median(base), p95(base)
    print(f"interpreter: {python} (Python {version}; launchers such as pyenv shims resolved)")
    print(f"client:      {CLIENT}, run as installed: {' '.join(kinds['Stop'][0])}")
    print(f"runs:        {args.runs} of each kind (+{args.warmup} warm-up), interleaved")
    print(f"transcript:  {transcript_bytes / 1024:.0f} KB for Stop; stub server on {stub.url}")
    print()
    print(f"{'call':<22}{'median':>9}{'p95':>9}{'+median':>10}{'+p95':>9}")
    figures: dict[str, dict] = {}
    verdict = True
    for name, values in times.items():
        median, high = statistics.median(values), p95(values)
        extra_median, extra_p95 = median - base_median, high - base_p95
        figures[name] = {
            "median_ms": round(median, 1),
            "p95_ms": round(high, 1),
            "extra_median_ms": round(extra_median, 1),
            "extra_p95_ms": round(extra_p95, 1),
        }
        if name == "python3 -c pass":
            print(f"{name:<22}{median:>7.1f}ms{high:>7.1f}ms")
            continue
        note = ""
        if name == "SessionStart":
            ok = extra_median <= TARGET_MS
            verdict = verdict and ok
            note = "  target met" if ok else "  OVER the target"
        print(
            f"{name:<22}{median:>7.1f}ms{high:>7.1f}ms{extra_median:>+8.1f}ms{extra_p95:>+7.1f}ms"
            + note
        )
    print()
    print(
        f"target: SessionStart at most {TARGET_MS:.0f} ms more than `python3 -c pass` at p50: "
        + ("met" if verdict else "NOT met")
    )
    if args.cli:
        cli = cli_overhead(args.cli_sessions)
        figures["cli"] = cli
        ok = cli["extra_per_tool_median_ms"] <= TOOL_TARGET_MS
        verdict = verdict and ok
        print()
        print(
            f"real CLI: Claude Code {cli['version']}, {args.cli_sessions} sessions of "
            f"{TOOLS_PER_SESSION} tool calls with and without the hooks, interleaved"
        )
        print(f"{'per tool call':<22}{'median':>9}{'p95':>9}")
        for name in ("without", "no-op", "with"):
            print(
                f"{name + ' hooks':<22}{cli[name]['median_ms']:>7.1f}ms"
                f"{cli[name]['p95_ms']:>7.1f}ms"
            )
        print(
            f"agent-visible overhead per tool call: {cli['extra_per_tool_median_ms']:+.1f} ms at "
            f"p50, {cli['extra_per_tool_p95_ms']:+.1f} ms at p95; whole session "
            f"{cli['session_without_ms']:.0f} ms → {cli['session_with_ms']:.0f} ms (median)"
        )
        print(
            f"of which Claude Code's own cost of two async hooks that do nothing: "
            f"{cli['noop_per_tool_median_ms']:+.1f} ms at p50"
        )
        print(
            f"target: at most {TOOL_TARGET_MS:.0f} ms per tool call at p50: "
            + ("met" if ok else "NOT met")
        )
    if args.json_path:
        Path(args.json_path).write_text(
            json.dumps(
                {"runs": args.runs, "python": python, "version": version, "figures": figures},
                indent=2,
            )
        )
    return 0 if verdict or not args.check else 1


def _serve_stub(urls: multiprocessing.Queue) -> None:
    stub = Stub()
    urls.put(stub.url)
    stub.serve_forever()


def _stub_process() -> tuple[multiprocessing.Process, str]:
    urls: multiprocessing.Queue = multiprocessing.Queue()
    process = multiprocessing.Process(target=_serve_stub, args=(urls,), daemon=True)
    process.start()
    return process, urls.get(timeout=30)


def cli_overhead(sessions: int) -> dict:
    """Per-tool gaps seen by the model (tool_use answered → next request), with and
    without the hooks, through the real CLI."""
    sys.path.insert(0, str(REPO))
    from tests.integrations.mock_anthropic import CLAUDE_CODE_VERSION, MockAnthropic
    from tests.integrations.node_runtime import npm_prefix

    prefix = npm_prefix("claude-code", {"@anthropic-ai/claude-code": CLAUDE_CODE_VERSION})
    claude = prefix / "node_modules" / ".bin" / "claude"
    plan = "Ten quick checks.\n" + "\n".join(
        f'@tool Bash {{"command": "true {n}"}}' for n in range(TOOLS_PER_SESSION)
    )
    # The stub runs in a process of its own, as SessionHub would: in this one it would
    # share the interpreter lock with the Messages API mock whose timestamps are measured.
    stub_process, stub_url = _stub_process()
    # "no-op": the same events as async exec-form hooks running `python3 -S -c pass`:
    # what Claude Code's own spawning of async hooks costs, whatever they do.
    gaps: dict[str, list[float]] = {"with": [], "without": [], "no-op": []}
    totals: dict[str, list[float]] = {"with": [], "without": [], "no-op": []}
    with (
        tempfile.TemporaryDirectory(prefix="sessionhub-bench-cli-") as tmp,
        MockAnthropic() as mock,
    ):
        homes = {}
        for name in gaps:
            home = Path(tmp) / name
            (home / "proj").mkdir(parents=True)
            (home / ".claude").mkdir()
            if name == "with":
                subprocess.run(
                    [
                        sys.executable,
                        str(CLIENT),
                        "install",
                        "--user",
                        "--url",
                        stub_url,
                        "--token",
                        "bench-token",
                    ],
                    capture_output=True,
                    env={"HOME": str(home), "PATH": os.environ["PATH"]},
                    check=True,
                )
            elif name == "no-op":
                noop = {"type": "command", "command": sys.executable, "args": ["-S", "-c", "pass"]}
                tools = {"matcher": "*", "hooks": [dict(noop, timeout=10, **{"async": True})]}
                hooks = {e: [tools] for e in ("PreToolUse", "PostToolUse")}
                (home / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
            else:
                (home / ".claude" / "settings.json").write_text("{}")
            homes[name] = home
        for round_ in range(sessions + 1):
            for name, home in homes.items():
                env = {
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "HOME": str(home),
                    "LANG": "C.UTF-8",
                    "IS_SANDBOX": "1",
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                    "DISABLE_TELEMETRY": "1",
                    "DISABLE_AUTOUPDATER": "1",
                    "ANTHROPIC_BASE_URL": mock.url,
                    "ANTHROPIC_API_KEY": "sk-ant-bench",
                }
                first = len(mock.requests)
                started = time.perf_counter()
                done = subprocess.run(
                    [str(claude), "-p", plan, "--dangerously-skip-permissions"],
                    cwd=home / "proj",
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=300,
                    check=False,
                )
                total = (time.perf_counter() - started) * 1000
                if done.returncode != 0:
                    raise SystemExit(f"claude failed: {done.stdout}\n{done.stderr}")
                calls = [
                    r
                    for r in mock.requests[first:]
                    if r["path"].startswith("/v1/messages") and r["body"].get("tools")
                ]
                run_gaps = [
                    (after["at"] - before["answered"]) * 1000
                    for before, after in itertools.pairwise(calls)
                    if before.get("stop_reason") == "tool_use"
                ]
                if len(run_gaps) != TOOLS_PER_SESSION:
                    raise SystemExit(
                        f"{name}: {len(run_gaps)} tool calls seen, not {TOOLS_PER_SESSION}"
                    )
                if round_ > 0:  # the first round warms caches
                    gaps[name] += run_gaps
                    totals[name].append(total)
    stub_process.terminate()
    version = subprocess.run([str(claude), "--version"], capture_output=True, text=True).stdout
    out = {
        name: {"median_ms": round(statistics.median(v), 1), "p95_ms": round(p95(v), 1)}
        for name, v in gaps.items()
    }
    return {
        "version": version.split()[0] if version else "?",
        **out,
        "extra_per_tool_median_ms": round(
            out["with"]["median_ms"] - out["without"]["median_ms"], 1
        ),
        "extra_per_tool_p95_ms": round(out["with"]["p95_ms"] - out["without"]["p95_ms"], 1),
        "noop_per_tool_median_ms": round(
            out["no-op"]["median_ms"] - out["without"]["median_ms"], 1
        ),
        "session_with_ms": statistics.median(totals["with"]),
        "session_without_ms": statistics.median(totals["without"]),
    }


if __name__ == "__main__":
    sys.exit(main())
