#!/usr/bin/env python3
"""What one Claude Code hook call costs the agent: the client's own wall time.

Runs ``python3 integrations/claude-code/sessionhub_hook.py`` as Claude Code does (a new
process per hook, the hook JSON on stdin) against a tiny local stdlib HTTP server that
answers 200 at once, so the server's own cost is not counted, and next to
``python3 -c pass`` with the same interpreter on the same machine. Three kinds of call:

- ``PostToolUse``: the most frequent hook; one POST.
- ``Stop``: also reads the transcript from its end (a fixture transcript padded to
  ``--transcript-kb`` with earlier turns) for the final message and reasoning tail.
- ``SessionStart``: one POST, then asks ``/api/v1/continuity`` and prints the preamble.

The runs are interleaved (one of each kind per round) so that machine noise hits every
kind alike. Prints the median and p95 per kind and their excess over ``python3 -c pass``;
the target is at most 60 ms more. Standard library only::

    python3 bench/hook_client.py            # N=50 of each
    python3 bench/hook_client.py -n 200 --check   # exit 1 when over the target
"""

from __future__ import annotations

import argparse
import json
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
SESSION_ID = "c386bbc4-cd61-4e30-98f1-6adf91b7584a"
CWD = "/home/dev/src/billing-api"
FINAL = (
    "Done. The session store now uses redis. All 42 tests pass. Next step: update the changelog."
)
PREAMBLE = (
    "[SESSION CONTINUITY — inherited from 1 prior session(s)]\n\nLAST SESSION (2h ago):\n"
    "- asked: Migrate the session store from memcached to redis\n\nPENDING TASKS:\n"
    "- [task-415] TODO: task-415 follow-up on monitoring. (2h ago)"
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
        with self.server.lock:
            self.server.counts[self.path] = self.server.counts.get(self.path, 0) + 1
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
    """The basic fixture's transcript when the shared fixtures are beside the repo."""
    for base in [REPO.parent, *REPO.parents]:
        path = base / "shared" / "fixtures" / "claude-code" / "basic" / "transcript.jsonl"
        if path.is_file():
            return [x for x in path.read_text().splitlines() if x.strip()]
    return []


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
    last_turn = fixture_transcript() or [
        json.dumps(
            {
                "type": "assistant",
                "message": {
                    "id": "msg_last",
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "TODO: task-415 follow-up."},
                        {"type": "text", "text": FINAL},
                    ],
                },
            }
        )
    ]
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
        last = fixture_transcript()
        final = FINAL
        if last:
            texts = [
                b["text"]
                for b in json.loads(last[-1])["message"]["content"]
                if b.get("type") == "text"
            ]
            final = texts[-1] if texts else FINAL
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--runs", type=int, default=50, help="runs of each kind (50)")
    parser.add_argument("--python", default="python3", help="interpreter (python3)")
    parser.add_argument("--transcript-kb", type=int, default=1024, help="transcript size (1024)")
    parser.add_argument("--warmup", type=int, default=3, help="uncounted runs of each kind (3)")
    parser.add_argument("--check", action="store_true", help="exit 1 when over the target")
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
        kinds = {
            "python3 -c pass": ([python, "-c", "pass"], ""),
            "PostToolUse": ([python, str(CLIENT)], hook_line("PostToolUse", transcript)),
            "Stop": ([python, str(CLIENT)], hook_line("Stop", transcript)),
            "SessionStart": ([python, str(CLIENT)], hook_line("SessionStart", transcript)),
        }
        times: dict[str, list[float]] = {name: [] for name in kinds}
        for round_ in range(args.warmup + args.runs):
            for name, (command, stdin) in kinds.items():
                elapsed, out = timed(command, stdin, env)
                if name == "SessionStart":
                    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
                    assert context == PREAMBLE, out
                elif out:
                    raise SystemExit(f"{name} printed {out!r}")
                if round_ >= args.warmup:
                    times[name].append(elapsed)
        spooled = (root / "spool.jsonl").exists()
    stub.shutdown()

    rounds = args.warmup + args.runs
    hooks_path = "/api/v1/hooks/claude-code"
    assert stub.counts.get(hooks_path) == 3 * rounds, stub.counts
    assert stub.counts.get("/api/v1/continuity") == rounds, stub.counts
    assert not spooled, "events were spooled: the stub did not answer in time"

    base = times["python3 -c pass"]
    base_median, base_p95 = statistics.median(base), p95(base)
    print(f"interpreter: {python} (Python {version}; launchers such as pyenv shims resolved)")
    print(f"client:      {CLIENT}")
    print(f"runs:        {args.runs} of each kind (+{args.warmup} warm-up), interleaved")
    print(f"transcript:  {transcript_bytes / 1024:.0f} KB for Stop; stub server on {stub.url}")
    print()
    print(f"{'call':<18}{'median':>9}{'p95':>9}{'+median':>10}{'+p95':>9}")
    figures = {}
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
            print(f"{name:<18}{median:>7.1f}ms{high:>7.1f}ms")
            continue
        ok = extra_median <= TARGET_MS and extra_p95 <= TARGET_MS
        verdict = verdict and ok
        print(
            f"{name:<18}{median:>7.1f}ms{high:>7.1f}ms{extra_median:>+8.1f}ms{extra_p95:>+7.1f}ms"
            f"  {'ok' if ok else 'OVER'}"
        )
    print()
    print(
        f"target: at most {TARGET_MS:.0f} ms more than `python3 -c pass` (median and p95): "
        + ("met" if verdict else "NOT met")
    )
    if args.json_path:
        Path(args.json_path).write_text(
            json.dumps(
                {"runs": args.runs, "python": python, "version": version, "figures": figures},
                indent=2,
            )
        )
    return 0 if verdict or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
