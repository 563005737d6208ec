"""A local stand-in for an OpenAI-compatible model API (``POST /v1/chat/completions``),
for the real OpenClaw gateway in the tests: the only part of those tests that is not real.

It speaks the protocol the gateway's ``openai-completions`` adapter speaks: streamed
server-sent events (``chat.completion.chunk``, ``[DONE]``), tool calls with their
arguments streamed, and reasoning (``reasoning_content`` deltas). What it answers depends
on the user's own words only: OpenClaw adds context of its own to the user message
(SessionHub's continuity preamble, its internal-context blocks, timestamps), and the
mock skips those before it decides. Every request is recorded, whole, for the tests to
read what reached the model.

Directives in the user's words:
- ``use the read tool on <path>``: the first answer is a call of the ``read`` tool (or
  the first tool the request offers) with that path; after the tool result, a final
  answer that quotes the result's first words.
- ``search the team's memory for <words>``: the first answer is a call of SessionHub's
  ``sessionhub_search_memory`` tool with those words as the query (through
  ``tool_call`` when the gateway's Tool Search keeps plugin tools in its catalog, as
  it does by default); after the tool result, a final answer that quotes the result's
  first words.
- anything else: a final answer ``ok: <the user's words>``, with reasoning before it.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# Blocks OpenClaw or a plugin puts before or after the user's words in the user message.
_BLOCK_PATTERNS = [
    # SessionHub's preamble: a header line, then lines until a blank line.
    re.compile(r"\[SESSION CONTINUITY[^\n]*\](?:\n(?!\n)[^\n]*)*", re.S),
    # OpenClaw's internal context, a user message of its own after the user's:
    # <<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>> ... <<<END_OPENCLAW_INTERNAL_CONTEXT>>>
    re.compile(r"<<<BEGIN_OPENCLAW_[A-Z_]+>>>.*?<<<END_OPENCLAW_[A-Z_]+>>>", re.S),
    # The runtime line it appends to the user's words, and the leading timestamp.
    re.compile(r"^Runtime: agent=.*$", re.M),
    re.compile(r"^\[[A-Z][a-z]{2} \d{4}-\d{2}-\d{2}[^\]]*\]\s*", re.M),
]
_READ = re.compile(r"use the read tool on (\S+)", re.I)
_SEARCH = re.compile(r"search the team's memory for (.+)$", re.I | re.M)


def text_of(content: Any) -> str:
    """The text of a chat message's content (a string, or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") in ("text", "input_text")
        )
    return ""


def users_words(text: str) -> str:
    """The user's own words: the message without what the gateway or plugins added."""
    for pattern in _BLOCK_PATTERNS:
        text = pattern.sub("", text)
    return text.strip()


class MockModel:
    """The server; ``requests`` holds every request body, in order."""

    def __init__(self, model_id: str = "mock-1") -> None:
        self.model_id = model_id
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> MockModel:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def chats(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.requests)

    # --- the answers ----------------------------------------------------------------

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """(reasoning, text, tool call) for a request."""
        messages = body.get("messages") or []
        # The last user message that holds the user's words (OpenClaw's internal-context
        # message comes after it), and whatever tool results came after that.
        words, results = "", []
        for message in reversed(messages):
            if message.get("role") == "tool":
                results.append(text_of(message.get("content")))
            elif message.get("role") == "user":
                words = users_words(text_of(message.get("content")))
                if words:
                    break
        if results:
            first = " ".join(results[0].split()[:8])
            return {
                "reasoning": "The tool answered; I report what it said.",
                "text": f"The file says: {first}",
            }
        search = _SEARCH.search(words)
        tools = [t.get("function", {}).get("name") for t in body.get("tools") or []]
        # Only a turn offered the tool (or the catalog's tool_call) searches: a
        # compaction's summary request quotes the directive but offers no tools.
        if search and {"sessionhub_search_memory", "tool_call"} & set(tools):
            arguments = {"query": search.group(1).strip()}
            call = {"name": "sessionhub_search_memory", "arguments": arguments}
            if "sessionhub_search_memory" not in tools:
                # OpenClaw's Tool Search (on by default): plugin tools are catalog
                # entries, called through tool_call by name.
                call = {
                    "name": "tool_call",
                    "arguments": {"id": "sessionhub_search_memory", "args": arguments},
                }
            return {
                "reasoning": "The team may have done this before; I search its memory.",
                "tool": call,
            }
        wanted = _READ.search(words)
        if wanted:
            tools = [t.get("function", {}).get("name") for t in body.get("tools") or []]
            name = "read" if "read" in tools else (tools[0] if tools else "read")
            return {
                "reasoning": f"I need to read {wanted.group(1)} first.",
                "tool": {"name": name, "arguments": {"path": wanted.group(1)}},
            }
        return {
            "reasoning": f"The user asked: {words[:200]}. I answer briefly.",
            "text": f"ok: {words[:200]}",
        }

    def _chunks(self, answer: dict[str, Any]) -> list[dict[str, Any]]:
        base = {
            "id": f"chatcmpl-{int(time.time() * 1000)}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.model_id,
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return base | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        out = [chunk({"role": "assistant", "content": ""})]
        reasoning = answer.get("reasoning", "")
        for piece in re.findall(r"\S+\s*", reasoning):
            out.append(chunk({"reasoning_content": piece}))
        if "tool" in answer:
            arguments = json.dumps(answer["tool"]["arguments"])
            call_id = f"call_{len(self.requests)}"
            out.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": call_id,
                                "type": "function",
                                "function": {"name": answer["tool"]["name"], "arguments": ""},
                            }
                        ]
                    }
                )
            )
            half = len(arguments) // 2
            for part in (arguments[:half], arguments[half:]):
                out.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}))
            out.append(chunk({}, "tool_calls"))
        else:
            for piece in re.findall(r"\S+\s*", answer["text"]):
                out.append(chunk({"content": piece}))
            out.append(chunk({}, "stop"))
        out.append(
            base
            | {
                "choices": [],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
            }
        )
        return out

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _json(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": model.model_id}]})
                else:
                    self._json(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    self._json(400, {"error": {"message": "bad json"}})
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._json(404, {"error": {"message": "not found"}})
                    return
                with model._lock:
                    model.requests.append(body)
                answer = model.answer(body)
                if not body.get("stream"):
                    message: dict[str, Any] = {"role": "assistant", "content": answer.get("text")}
                    if "tool" in answer:
                        message["tool_calls"] = [
                            {
                                "id": "call_0",
                                "type": "function",
                                "function": {
                                    "name": answer["tool"]["name"],
                                    "arguments": json.dumps(answer["tool"]["arguments"]),
                                },
                            }
                        ]
                    message["reasoning_content"] = answer.get("reasoning", "")
                    self._json(
                        200,
                        {
                            "id": "chatcmpl-0",
                            "object": "chat.completion",
                            "model": model.model_id,
                            "choices": [
                                {
                                    "index": 0,
                                    "message": message,
                                    "finish_reason": "tool_calls" if "tool" in answer else "stop",
                                }
                            ],
                            "usage": {"prompt_tokens": 100, "completion_tokens": 20},
                        },
                    )
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for chunk in model._chunks(answer):
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        return Handler
