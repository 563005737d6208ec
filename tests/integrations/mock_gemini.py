"""A local stand-in for the Gemini API, for driving the real Gemini CLI.

It speaks the wire protocol Gemini CLI uses with an API key and ``GOOGLE_GEMINI_BASE_URL``:
``POST /v1beta/models/{model}:streamGenerateContent?alt=sse`` streamed as server-sent
events (one ``GenerateContentResponse`` per chunk: a thought part, then a text part or a
``functionCall`` part, the usage in the last chunk), ``:generateContent`` for the CLI's
own side requests (a JSON answer shaped by the request's ``responseJsonSchema``, or the
summary a compression asks for) and ``:countTokens``. Every request is recorded.

What the model "does" is written in the prompt, as for the other mocks: lines of the
user text that opened the turn and start with ``@`` are steps, one per model call:

- ``@tool NAME {json args}``: call a function (``@tool run_shell_command {"command": "ls"}``).
- ``@big``: a harmless ``run_shell_command`` whose usage reports a context almost full,
  which makes the CLI compress the history before its next call.

After the last step the model answers ``DONE <first words>``. The step to run is the
number of ``functionResponse`` parts since that user text.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# The Gemini CLI release this mock was written against (npm, pinned).
GEMINI_CLI_VERSION = "0.61.0"
MODEL = "gemini-2.5-pro"
THOUGHT = "The user wrote a plan; I follow it one step per call, then I report."
SNAPSHOT = "<state_snapshot>Compressed: the user checks SessionHub hooks.</state_snapshot>"
BIG_USAGE = 800_000


def _texts(content: dict[str, Any]) -> list[str]:
    return [
        p["text"]
        for p in content.get("parts") or []
        if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")
    ]


def _user_words(text: str) -> str:
    """What the user wrote in a text part: '' for the CLI's own context (the session's
    context, a compression's snapshot), and without the context hooks added before it."""
    text = text.strip()
    if text.startswith("<session_context>") or SNAPSHOT in text:
        return ""
    return re.sub(r"^(<hook_context>.*?</hook_context>\s*)+", "", text, flags=re.S)


def _sample(schema: Any) -> Any:
    """A value that fits a JSON schema (the CLI's side requests ask for JSON)."""
    if not isinstance(schema, dict):
        return None
    kind = str(schema.get("type", "")).lower()
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object":
        return {k: _sample(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    return "user" if "speaker" in json.dumps(schema) else "mock"


class MockGemini(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> MockGemini:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()

    # ----------------------------------------------------------------- queries

    def turns(self) -> list[dict[str, Any]]:
        """Bodies of the agent's streamed calls (not the CLI's side requests), in order."""
        with self.lock:
            return [r["body"] for r in self.requests if "streamGenerateContent" in r["path"]]

    def side_requests(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r["body"] for r in self.requests if ":generateContent" in r["path"]]

    @staticmethod
    def shown(body: dict[str, Any]) -> str:
        """Everything a request showed the model: system instruction and contents."""
        return json.dumps(
            {"system": body.get("systemInstruction"), "contents": body.get("contents")}
        )

    # ----------------------------------------------------------------- the model

    def turn(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
        """(parts of the answer, prompt tokens to report) for one agent call."""
        opening, results = "", 0
        for content in reversed(body.get("contents") or []):
            parts = content.get("parts") or []
            if any(isinstance(p, dict) and "functionResponse" in p for p in parts):
                results += sum(1 for p in parts if isinstance(p, dict) and "functionResponse" in p)
                continue
            if content.get("role") != "user":
                continue
            texts = [w for w in map(_user_words, _texts(content)) if w]
            if texts:
                opening = "\n".join(texts)
                break
        steps = [line.strip() for line in opening.splitlines() if line.strip().startswith("@")]
        thought = {"text": THOUGHT, "thought": True}
        if results < len(steps):
            step = steps[results]
            if step == "@big":
                call = {"name": "run_shell_command", "args": {"command": "echo nearly full"}}
                return [thought, {"functionCall": call}], BIG_USAGE
            match = re.match(r"@tool\s+(\S+)\s+(\{.*\})\s*$", step)
            if not match:
                raise ValueError(f"mock: unreadable step {step!r}")
            name, raw = match.groups()
            return [thought, {"functionCall": {"name": name, "args": json.loads(raw)}}], 3_000
        words = " ".join(re.sub(r"[^\w ]", " ", opening).split()[:6])
        return [thought, {"text": f"DONE {words}"}], 3_000

    def side(self, body: dict[str, Any]) -> dict[str, Any]:
        """A non-streamed answer: JSON when the request asks for it, else a summary."""
        config = body.get("generationConfig") or {}
        if config.get("responseMimeType") == "application/json":
            schema = config.get("responseJsonSchema") or config.get("responseSchema")
            text = json.dumps(_sample(schema))
        else:
            text = SNAPSHOT
        return _response([{"text": text}], 500)


def _response(parts: list[dict[str, Any]], prompt_tokens: int) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": 40,
            "thoughtsTokenCount": 12,
            "totalTokenCount": prompt_tokens + 52,
        },
        "modelVersion": MODEL,
    }


def _sse(parts: list[dict[str, Any]], prompt_tokens: int) -> bytes:
    """One chunk per part, the usage and finish reason on the last."""
    chunks = []
    for index, part in enumerate(parts):
        chunk = _response([part], prompt_tokens)
        if index < len(parts) - 1:
            del chunk["candidates"][0]["finishReason"]
        chunks.append(chunk)
    return b"".join(f"data: {json.dumps(c)}\r\n\r\n".encode() for c in chunks)


class _Handler(BaseHTTPRequestHandler):
    server: MockGemini
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, data: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.requests.append({"method": "GET", "path": self.path, "body": None})
        self._send(200, b"{}")

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
            "api_key": self.headers.get("x-goog-api-key", ""),
            "at": time.monotonic(),
        }
        with self.server.lock:
            self.server.requests.append(entry)
        if ":countTokens" in self.path:
            size = len(json.dumps(body)) // 4
            self._send(200, json.dumps({"totalTokens": size}).encode())
        elif ":streamGenerateContent" in self.path:
            parts, tokens = self.server.turn(body)
            self._send(200, _sse(parts, tokens), "text/event-stream")
        elif ":generateContent" in self.path:
            self._send(200, json.dumps(self.server.side(body)).encode())
        else:
            self._send(200, b"{}")
