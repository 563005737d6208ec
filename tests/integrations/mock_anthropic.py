"""A local stand-in for the Anthropic Messages API, for driving the real Claude Code CLI.

It speaks the wire protocol Claude Code uses: ``POST /v1/messages`` (streamed as
server-sent events, or as one JSON answer when ``stream`` is false), with thinking,
text and ``tool_use`` blocks; ``POST /v1/messages/count_tokens``; anything else the CLI
asks on the side is answered with an empty JSON object. Every request is recorded.

What the model "does" is written in the prompt, so each test says its plan in plain
words the CLI passes through untouched. Lines of the first user text of a conversation
that start with ``@`` are steps, run one per model call:

- ``@tool NAME {json input}``: call a tool (``@tool Bash {"command": "ls"}``).
- ``@fail``: answer this call with a non-retryable API error (400).
- ``@big``: a harmless Bash call whose usage reports a context almost full, which
  makes the CLI compact on its own before its next call.

After the last step the model answers with a final text, ``DONE <first words>``.
The step to run is the number of tool results sent since that user text. A
compaction request (the CLI asks for a summary of the conversation) is answered with a
``<summary>`` text. Requests that carry no tools (titles, topic checks) get a short text.

A prompt can also be given a script beforehand (``script(prompt, steps)``), so that the
user's words stay the words a person would type: the turn that prompt opens runs those
steps, one per model call, each a :class:`Step` — thinking and text said along the way, a
tool call, an API error (``status`` 529 is Claude Code's "overloaded", 5xx a server
error), and a last step without a tool that is the turn's final answer.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# The Claude Code release this mock was written against (npm, pinned): the tests and
# bench/hook_client.py install this one.
CLAUDE_CODE_VERSION = "2.1.330"
COMPACT_MARKERS = ("summary of the conversation", "create a detailed summary")
SUMMARY_TEXT = "<summary>Compacted: the user is checking SessionHub hooks.</summary>"
THINKING = "I should follow the plan the user wrote, one step per call, then report."


@dataclass(frozen=True)
class Step:
    """One model call of a scripted turn: thinking, text, then a tool call; or, without a
    tool, the turn's final answer; or an API error (``status``)."""

    say: str = ""
    think: str = ""
    tool: str = ""
    input: dict[str, Any] = field(default_factory=dict)
    status: int = 0
    # Usage reported with this answer: a context nearly full makes the CLI compact.
    input_tokens: int = 1200


_ERRORS = {
    400: ("invalid_request_error", "mock: this turn fails"),
    500: ("api_error", "Internal server error"),
    502: ("api_error", "Bad gateway"),
    503: ("api_error", "Service unavailable"),
    529: ("overloaded_error", "Overloaded"),
}


def _texts(content: Any) -> list[str]:
    """The text blocks of a message, without the CLI's own ``<system-reminder>`` blocks."""
    if isinstance(content, str):
        blocks = [content]
    elif isinstance(content, list):
        blocks = [
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        ]
    else:
        return []
    # Text the CLI adds itself: reminders, and the caveat and output of a local command
    # (``/compact``) that go out with the next prompt.
    return [t for t in blocks if not t.lstrip().startswith(_INJECTED)]


_INJECTED = ("<system-reminder>", "<local-command-", "<command-name>", "<command-message>")


def _has_tool_result(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


class MockAnthropic(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.scripts: dict[str, list[Step]] = {}
        # What the model answers when the CLI asks it to summarise the conversation.
        self.compact_summary = SUMMARY_TEXT
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> MockAnthropic:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()

    def script(self, prompt: str, steps: list[Step], *, prefix: bool = False) -> None:
        """The turn that ``prompt`` opens runs ``steps`` (the last, without a tool, is its
        final answer); with ``prefix``, every turn opened by a text that begins with it
        (a notification Claude Code writes, which names ids of its own)."""
        with self.lock:
            key = ("prefix:" if prefix else "") + prompt.strip()
            self.scripts[key] = list(steps)

    def _script_for(self, opening: str) -> list[Step] | None:
        opening = opening.strip()
        with self.lock:
            found = self.scripts.get(opening)
            if found is None:
                found = next(
                    (
                        steps
                        for key, steps in self.scripts.items()
                        if key.startswith("prefix:") and opening.startswith(key[7:])
                    ),
                    None,
                )
        return found

    # ----------------------------------------------------------------- queries

    def messages(self) -> list[dict[str, Any]]:
        """Bodies of the /v1/messages calls, in order."""
        with self.lock:
            return [
                r["body"]
                for r in self.requests
                if r["path"].startswith("/v1/messages?") or r["path"] == "/v1/messages"
            ]

    def all_text(self, body: dict[str, Any]) -> str:
        """Everything a request showed the model: system and messages as one string."""
        return json.dumps({"system": body.get("system"), "messages": body.get("messages")})

    # ----------------------------------------------------------------- the model

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """(HTTP status, message or error) for one /v1/messages body."""
        messages = body.get("messages") or []
        last = messages[-1] if messages else {}
        last_text = " ".join(_texts(last.get("content")))
        if any(m in last_text for m in COMPACT_MARKERS):
            return 200, self._message(body, [self._text(self.compact_summary)], "end_turn")
        if not body.get("tools"):
            return 200, self._message(body, [self._text("SessionHub check")], "end_turn")
        # The user text that opened the current turn, and the tool results since.
        results = 0
        opening = ""
        for message in reversed(messages):
            if message.get("role") != "user":
                continue
            content = message.get("content")
            text = " ".join(_texts(content))
            # A prompt typed after a turn that died between a tool call and the model's
            # answer shares the user message with that tool's result: it opens a turn.
            if text.strip():
                opening = text
                break
            if _has_tool_result(content):
                results += 1
        script = self._script_for(opening)
        if script is not None:
            return self._scripted(body, script, results)
        steps = [line.strip() for line in opening.splitlines() if line.strip().startswith("@")]
        if results < len(steps):
            return self._step(body, steps[results], results)
        words = " ".join(re.sub(r"[^\w ]", " ", opening).split()[:6])
        return 200, self._message(body, [self._text(f"DONE {words}")], "end_turn")

    def _scripted(
        self, body: dict[str, Any], steps: list[Step], index: int
    ) -> tuple[int, dict[str, Any]]:
        """The answer a script gives at its ``index``-th call: past the end, its last step
        again (a turn the CLI retries after an error)."""
        step = steps[min(index, len(steps) - 1)]
        if step.status:
            kind, text = _ERRORS.get(step.status, ("api_error", "mock error"))
            return step.status, {"type": "error", "error": {"type": kind, "message": text}}
        blocks = [self._text(step.say)] if step.say else []
        if step.tool:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{uuid.uuid4().hex[:24]}",
                    "name": step.tool,
                    "input": step.input,
                }
            )
        elif not blocks:
            blocks.append(self._text("Done."))
        message = self._message(
            body, blocks, "tool_use" if step.tool else "end_turn", thinking=step.think
        )
        message["usage"]["input_tokens"] = step.input_tokens
        return 200, message

    def _step(self, body: dict[str, Any], step: str, index: int) -> tuple[int, dict[str, Any]]:
        if step == "@fail":
            return 400, {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": "mock: this turn fails"},
            }
        if step == "@big":
            block = {
                "type": "tool_use",
                "id": f"toolu_{uuid.uuid4().hex[:24]}",
                "name": "Bash",
                "input": {"command": "echo the context is nearly full"},
            }
            message = self._message(body, [block], "tool_use")
            message["usage"]["input_tokens"] = 990_000
            return 200, message
        match = re.match(r"@tool\s+(\S+)\s+(\{.*\})\s*$", step)
        if not match:
            raise ValueError(f"mock: unreadable step {step!r}")
        name, raw = match.groups()
        block = {
            "type": "tool_use",
            "id": f"toolu_{uuid.uuid4().hex[:24]}",
            "name": name,
            "input": json.loads(raw),
        }
        return 200, self._message(body, [block], "tool_use")

    def _text(self, text: str) -> dict[str, Any]:
        return {"type": "text", "text": text}

    def _message(
        self, body: dict[str, Any], blocks: list[dict], stop: str, thinking: str = ""
    ) -> dict[str, Any]:
        asked = body.get("thinking") or {}
        content = []
        if asked.get("type") in ("enabled", "adaptive"):
            # A scripted thought is shown whatever display the CLI asked for: it stands
            # for the thinking a session recorded with display on.
            shown = thinking or ("" if asked.get("display") == "omitted" else THINKING)
            content.append({"type": "thinking", "thinking": shown, "signature": "sig-mock"})
        content += blocks
        return {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or "claude-mock",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 1200,
                "output_tokens": 40,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }


def _sse(message: dict[str, Any]) -> bytes:
    """The message as the event stream the Messages API sends."""
    out: list[tuple[str, dict[str, Any]]] = []
    head = dict(message, content=[], stop_reason=None)
    head["usage"] = dict(message["usage"], output_tokens=1)
    out.append(("message_start", {"type": "message_start", "message": head}))
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "text":
            start, deltas = (
                {"type": "text", "text": ""},
                [{"type": "text_delta", "text": block["text"]}],
            )
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": ""}
            deltas = (
                [{"type": "thinking_delta", "thinking": block["thinking"]}]
                if block["thinking"]
                else []
            )
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        out.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        for delta in deltas:
            out.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        out.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    out.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
        )
    )
    out.append(("message_stop", {"type": "message_stop"}))
    return b"".join(f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in out)


class _Handler(BaseHTTPRequestHandler):
    server: MockAnthropic
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, data: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", f"req_{uuid.uuid4().hex[:12]}")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.requests.append({"method": "GET", "path": self.path, "body": None})
        self._send(200, b"{}")

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"unreadable": raw[:200].decode("utf-8", "replace")}
        entry = {"method": "POST", "path": self.path, "body": body, "at": time.monotonic()}
        with self.server.lock:
            self.server.requests.append(entry)
        path = self.path.split("?", 1)[0]
        if path.endswith("/count_tokens"):
            size = len(json.dumps(body)) // 4
            self._send(200, json.dumps({"input_tokens": size}).encode())
            return
        if not path.endswith("/v1/messages"):
            self._send(200, b"{}")
            return
        status, message = self.server.answer(body)
        if status != 200:
            self._send(status, json.dumps(message).encode())
        elif body.get("stream"):
            self._send(200, _sse(message), "text/event-stream")
        else:
            self._send(200, json.dumps(message).encode())
        entry["answered"] = time.monotonic()
        entry["stop_reason"] = message.get("stop_reason")
