"""A local stand-in for the OpenAI Responses API, for driving the real Codex CLI.

It speaks the wire protocol Codex uses with a ``wire_api = "responses"`` provider:
``POST /v1/responses`` streamed as server-sent events (``response.created``, then each
output item as ``response.output_item.added`` / deltas / ``response.output_item.done``,
then ``response.completed`` with the usage), with ``reasoning`` items (a summary and the
raw reasoning text), ``function_call`` items and assistant ``message`` items. Anything
else the CLI asks on the side (``GET /v1/models``...) gets an empty JSON object. Every
request is recorded.

What the model "does" is written in the prompt, as for the Anthropic mock: lines of the
user text that opened the turn and start with ``@`` are steps, one per model call:

- ``@tool NAME {json arguments}``: call a function tool (``@tool exec_command {"cmd": "ls"}``).
- ``@big``: a harmless ``exec_command`` whose usage reports a context almost full, which
  makes the CLI compact before its next call (``model_auto_compact_token_limit``).
- ``@fail``: answer this call with a non-retryable API error (400).

After the last step the model answers ``DONE <first words>``. The step to run is the
number of steps this mock already answered in the turn (a compaction drops the earlier
calls from the input, so it is counted here). A compaction request (the
CLI asks for a summary of the conversation so far) is answered with a summary text.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# The Codex CLI release this mock was written against (npm, pinned).
CODEX_VERSION = "0.171.0"
REASONING = "The user wrote a plan; I follow it one step per call, then I report."
SUMMARY = "Compacted: the user is checking SessionHub hooks with the build tools."
COMPACT_MARKERS = (
    "CONTEXT CHECKPOINT COMPACTION",
    "handoff summary",
    "summary of the conversation",
)
BIG_USAGE = 950_000


def _input_texts(item: dict[str, Any]) -> list[str]:
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        part.get("text", "")
        for part in content
        if isinstance(part, dict) and part.get("type") in ("input_text", "output_text", "text")
    ]


def _is_context(text: str) -> bool:
    """Text Codex writes itself into a user message (environment, instructions...)."""
    return text.lstrip().startswith("<") or text.lstrip().startswith("# AGENTS.md")


class MockResponses(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.issued: dict[tuple[str, str], int] = {}
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self) -> MockResponses:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()

    # ----------------------------------------------------------------- queries

    def responses(self) -> list[dict[str, Any]]:
        """Bodies of the /v1/responses calls, in order."""
        with self.lock:
            return [
                r["body"] for r in self.requests if r["path"].split("?")[0].endswith("/responses")
            ]

    def requests_of(self, session_id: str) -> list[dict[str, Any]]:
        """The model calls Codex made for one session (it names its thread in the body)."""
        return [b for b in self.responses() if session_id in json.dumps(b.get("client_metadata"))]

    @staticmethod
    def shown(body: dict[str, Any]) -> str:
        """Everything a request showed the model: instructions and input as one string."""
        return json.dumps({"instructions": body.get("instructions"), "input": body.get("input")})

    # ----------------------------------------------------------------- the model

    def answer(self, body: dict[str, Any]) -> tuple[int, list[dict[str, Any]], int]:
        """(HTTP status, output items or an error body, input tokens to report)."""
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        last_user = ""
        for item in reversed(items):
            if item.get("role") == "user":
                last_user = " ".join(_input_texts(item))
                break
        if any(marker in last_user for marker in COMPACT_MARKERS):
            return 200, [self._message(SUMMARY)], 2_000
        opening, results = "", 0
        for item in reversed(items):
            if item.get("type") == "function_call_output":
                results += 1
                continue
            if item.get("role") != "user":
                continue
            texts = [
                t
                for t in _input_texts(item)
                if t.strip() and not _is_context(t) and SUMMARY not in t
            ]
            if texts:
                opening = "\n".join(texts)
                break
        steps = [line.strip() for line in opening.splitlines() if line.strip().startswith("@")]
        # The steps already run are the ones this mock answered for this session and
        # opening since the turn began (a first call has no tool output yet); after a
        # compaction the earlier calls are gone from the input, so the input cannot say.
        key = (str(body.get("prompt_cache_key")), opening)
        with self.lock:
            fresh = not results and SUMMARY not in json.dumps(items)
            done = 0 if fresh else self.issued.get(key, 0)
            self.issued[key] = done + 1 if done < len(steps) else done
        if done < len(steps):
            return self._step(steps[done])
        words = " ".join(re.sub(r"[^\w ]", " ", opening).split()[:6])
        return 200, [self._reasoning(), self._message(f"DONE {words}")], 3_000

    def _step(self, step: str) -> tuple[int, list[dict[str, Any]], int]:
        if step == "@fail":
            error = {"error": {"type": "invalid_request_error", "message": "mock: this turn fails"}}
            return 400, [error], 0
        if step == "@big":
            call = self._call("exec_command", {"cmd": "echo the context is nearly full"})
            return 200, [self._reasoning(), call], BIG_USAGE
        match = re.match(r"@tool\s+(\S+)\s+(\{.*\})\s*$", step)
        if not match:
            raise ValueError(f"mock: unreadable step {step!r}")
        name, raw = match.groups()
        return 200, [self._reasoning(), self._call(name, json.loads(raw))], 3_000

    @staticmethod
    def _reasoning() -> dict[str, Any]:
        return {
            "type": "reasoning",
            "id": f"rs_{uuid.uuid4().hex[:20]}",
            "summary": [{"type": "summary_text", "text": REASONING}],
            "content": [{"type": "reasoning_text", "text": REASONING}],
        }

    @staticmethod
    def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "function_call",
            "id": f"fc_{uuid.uuid4().hex[:20]}",
            "call_id": f"call_{uuid.uuid4().hex[:20]}",
            "name": name,
            "arguments": json.dumps(arguments),
        }

    @staticmethod
    def _message(text: str) -> dict[str, Any]:
        return {
            "type": "message",
            "id": f"msg_{uuid.uuid4().hex[:20]}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }


def _sse(response_id: str, items: list[dict[str, Any]], input_tokens: int) -> bytes:
    """The output items as the event stream the Responses API sends."""
    out: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": response_id, "status": "in_progress"}}
    ]
    for index, item in enumerate(items):
        kind = item["type"]
        empty = dict(item)
        if kind == "message":
            empty["content"] = []
        elif kind == "reasoning":
            empty["summary"], empty["content"] = [], []
        elif kind == "function_call":
            empty["arguments"] = ""
        out.append({"type": "response.output_item.added", "output_index": index, "item": empty})
        if kind == "message":
            text = item["content"][0]["text"]
            out.append(
                {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": index,
                    "content_index": 0,
                    "delta": text,
                }
            )
        elif kind == "reasoning":
            out.append(
                {
                    "type": "response.reasoning_summary_text.delta",
                    "item_id": item["id"],
                    "output_index": index,
                    "summary_index": 0,
                    "delta": item["summary"][0]["text"],
                }
            )
        elif kind == "function_call":
            out.append(
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": item["id"],
                    "output_index": index,
                    "delta": item["arguments"],
                }
            )
        out.append({"type": "response.output_item.done", "output_index": index, "item": item})
    usage = {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 40,
        "output_tokens_details": {"reasoning_tokens": 12},
        "total_tokens": input_tokens + 40,
    }
    out.append(
        {
            "type": "response.completed",
            "response": {"id": response_id, "status": "completed", "output": items, "usage": usage},
        }
    )
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in out)


class _Handler(BaseHTTPRequestHandler):
    server: MockResponses
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, data: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", f"req_{uuid.uuid4().hex[:12]}")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.requests.append({"method": "GET", "path": self.path, "body": None})
        self._send(200, b'{"object": "list", "data": [], "models": []}')

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"unreadable": raw[:200].decode("utf-8", "replace")}
        entry = {
            "method": "POST",
            "path": self.path,
            "body": body,
            "authorization": self.headers.get("Authorization", ""),
            "at": time.monotonic(),
        }
        with self.server.lock:
            self.server.requests.append(entry)
        if not self.path.split("?", 1)[0].endswith("/responses"):
            self._send(200, b"{}")
            return
        status, items, tokens = self.server.answer(body)
        if status != 200:
            self._send(status, json.dumps(items[0]).encode())
            return
        self._send(200, _sse(f"resp_{uuid.uuid4().hex[:20]}", items, tokens), "text/event-stream")
