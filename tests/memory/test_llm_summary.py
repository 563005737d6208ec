"""The LLM summarizer against a real local HTTP server that speaks the OpenAI
chat-completions protocol: a good answer, an HTTP error, malformed answers, a timeout,
an unreachable endpoint and a spent daily budget. Every failure must leave an extractive
summary that says why, and the budget must stop calls before they are made."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from lifecycle.models import EventKind, Session, SessionStatus
from memory import pipeline
from memory.models import LlmUsage, Summary
from sessionhub.models import Team
from tests.factories import EventFactory, GenericAgentFactory, LiveSessionFactory

pytestmark = pytest.mark.django_db

MODEL = "local-test-model"
API_KEY = "sk-test-local-only"
FINAL = "Fixed the retry loop in webhooks/retry.py. All 12 tests pass. Next step: deploy."
ANSWER = {
    "request": "Fix the flaky payment webhook retries.",
    "investigated": "Read webhooks/retry.py and ran the tests.",
    "learned": "The retries had no jitter.",
    "completed": "Fixed the retry loop; all 12 tests pass.",
    "next_steps": "Deploy.",
}
USAGE = {"prompt_tokens": 321, "completion_tokens": 79, "total_tokens": 400}


class ChatServer:
    """A chat-completions endpoint on 127.0.0.1 whose behaviour each test chooses."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        self.body: bytes | None = None  # raw answer; None means a good completion
        self.delay = 0.0
        self.content: str = json.dumps(ANSWER)
        self.usage: Any = USAGE
        self.raw_reply: bytes | None = None  # bytes written instead of an HTTP reply
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                server.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "json": json.loads(raw)}
                )
                if server.delay:
                    time.sleep(server.delay)
                if server.raw_reply is not None:
                    self.wfile.write(server.raw_reply)
                    self.close_connection = True
                    return
                body = server.body if server.body is not None else server.completion()
                try:
                    self.send_response(server.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (the timeout test)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def completion(self) -> bytes:
        return json.dumps(
            {
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": MODEL,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": self.content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": self.usage,
            }
        ).encode()


@pytest.fixture
def llm(settings: Any) -> Iterator[ChatServer]:
    server = ChatServer()
    server.thread.start()
    settings.SESSIONHUB = {
        **settings.SESSIONHUB,
        "LLM": {
            "URL": server.url,
            "MODEL": MODEL,
            "API_KEY": API_KEY,
            "TIMEOUT": 5.0,
            "MAX_TOKENS": 300,
        },
    }
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def ended_session(team: Team | None = None) -> Session:
    """An ended session with a prompt, a tool use and a final answer, as stored rows."""
    agent = GenericAgentFactory(team=team) if team else GenericAgentFactory()
    session = LiveSessionFactory(agent=agent, status=SessionStatus.ENDED, event_count=5)
    now = timezone.now()
    rows = [
        (EventKind.SESSION_START, "", {}, {}),
        (EventKind.PROMPT, "", {"text": "Fix the flaky payment webhook retries"}, {}),
        (
            EventKind.TOOL_USE,
            "post",
            {"tool_name": "Read"},
            {"input": {"file_path": "webhooks/retry.py"}, "output": "retry.py: 80 lines"},
        ),
        (
            EventKind.TURN_END,
            "",
            {"final_message": FINAL, "reasoning": "The cause was missing jitter."},
            {},
        ),
        (EventKind.SESSION_END, "", {"reason": "new"}, {}),
    ]
    for n, (kind, phase, facts, payload) in enumerate(rows):
        EventFactory(
            session=session,
            kind=kind,
            phase=phase,
            facts=facts,
            payload=payload,
            occurred_at=now - timedelta(minutes=10 - n),
        )
    return session


def summarize(session: Session) -> Summary:
    assert pipeline.session_process(str(session.pk)) is True
    return Summary.objects.get(session=session)


def usage(team_id: int) -> tuple[int, int]:
    row = LlmUsage.objects.filter(team_id=team_id, day=timezone.now().date()).first()
    return (row.tokens, row.calls) if row else (0, 0)


def assert_extractive(summary: Summary, why: str) -> None:
    assert summary.method == Summary.EXTRACTIVE
    assert why in summary.fallback_reason, summary.fallback_reason
    assert summary.llm_tokens == 0
    # The default summary is complete: the final message made it into "completed".
    assert "All 12 tests pass." in summary.completed
    assert summary.final_message == FINAL
    assert "Fix the flaky payment webhook retries" in summary.request


def test_answer_becomes_the_summary_and_tokens_are_counted(llm: ChatServer) -> None:
    session = ended_session()
    summary = summarize(session)

    assert summary.method == MODEL
    assert summary.fallback_reason == ""
    assert {name: getattr(summary, name) for name in Summary.SECTIONS} == ANSWER
    assert summary.final_message == FINAL
    assert summary.llm_tokens == USAGE["total_tokens"]
    assert usage(session.team_id) == (USAGE["total_tokens"], 1)

    [request] = llm.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == f"Bearer {API_KEY}"
    body = request["json"]
    assert body["model"] == MODEL
    assert body["max_tokens"] == 300
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    material = json.loads(body["messages"][1]["content"])
    assert material["final_message"] == FINAL
    assert material["prompts"] == ["Fix the flaky payment webhook retries"]


def test_a_secret_in_the_answer_is_not_stored(llm: ChatServer) -> None:
    token = "ghp_76dEyTzAeKOmXRrvftva9AW7hipTgadDZFlR"
    llm.content = json.dumps({**ANSWER, "learned": f"The deploy token is {token}."})
    summary = summarize(ended_session())
    assert summary.method == MODEL
    assert token not in summary.learned
    assert "[REDACTED:" in summary.learned


def test_the_model_is_never_sent_a_secret(
    llm: ChatServer, api: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    key = "AKIA29326ML64LG2TJF8"
    base = {"agent_id": "llm-agent", "session_id": "llm-session"}
    events = [
        {**base, "event_id": "l1", "kind": "session_start"},
        {**base, "event_id": "l2", "kind": "prompt", "text": f"use AWS_ACCESS_KEY_ID={key}"},
        {**base, "event_id": "l3", "kind": "turn_end", "final_message": f"Done with {key}."},
        {**base, "event_id": "l4", "kind": "session_end", "reason": "new"},
    ]
    with django_capture_on_commit_callbacks(execute=True):
        assert api.post("/api/v1/events", events, format="json").status_code == 200
    assert Summary.objects.get(session__external_id="llm-session").method == MODEL
    assert llm.requests
    assert key not in json.dumps(llm.requests)


def test_http_500_falls_back(llm: ChatServer) -> None:
    llm.status = 500
    llm.body = b'{"error": {"message": "model crashed", "type": "server_error"}}'
    session = ended_session()
    summary = summarize(session)
    assert_extractive(summary, "LLM unavailable")
    assert "500" in summary.fallback_reason
    assert len(llm.requests) == 1
    assert usage(session.team_id) == (0, 0)


MALFORMED = {
    "not json": b"<html>Bad gateway</html>",
    "empty object": b"{}",
    "no choices": b'{"choices": []}',
    "content not json": json.dumps(
        {"choices": [{"message": {"content": "Sure! Here is a summary."}}]}
    ).encode(),
    "content null": json.dumps({"choices": [{"message": {"content": None}}]}).encode(),
    "content a number": json.dumps({"choices": [{"message": {"content": 42}}]}).encode(),
    "sections a list": json.dumps({"choices": [{"message": {"content": "[1, 2]"}}]}).encode(),
    "answer a list": b"[]",
    "answer null": b"null",
    "choices an object": b'{"choices": {"message": {}}}',
    "not utf-8": b'{"choices": "\xff\xfe"}',
}


@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_answer_falls_back(llm: ChatServer, body: bytes) -> None:
    llm.body = body
    summary = summarize(ended_session())
    assert_extractive(summary, "LLM unavailable")
    assert len(llm.requests) == 1


RAW_REPLIES = {
    "not http": b"HELLO THERE\r\n\r\n",
    "cut short": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    b'Content-Length: 5000\r\n\r\n{"choices": [',
}


@pytest.mark.parametrize("raw", RAW_REPLIES.values(), ids=RAW_REPLIES.keys())
def test_broken_reply_falls_back(llm: ChatServer, raw: bytes) -> None:
    llm.raw_reply = raw
    summary = summarize(ended_session())
    assert_extractive(summary, "LLM unavailable")


def test_unusable_answer_is_still_charged_to_the_budget(llm: ChatServer) -> None:
    llm.content = "I cannot summarize this."
    session = ended_session()
    assert_extractive(summarize(session), "unusable answer")
    assert usage(session.team_id) == (USAGE["total_tokens"], 1)


@pytest.mark.parametrize("reported", [None, [1, 2], {"total_tokens": "many"}])
def test_answer_without_usage_is_estimated(llm: ChatServer, reported: Any) -> None:
    """An endpoint that reports no (usable) token count still spends the budget."""
    llm.usage = reported
    session = ended_session()
    summary = summarize(session)
    assert summary.method == MODEL
    tokens, calls = usage(session.team_id)
    assert calls == 1
    assert tokens == summary.llm_tokens > 50  # the prompt alone is a few hundred characters


def test_missing_or_null_sections_are_empty(llm: ChatServer) -> None:
    llm.content = json.dumps({"request": None, "learned": ["a.", None, "b."]})
    summary = summarize(ended_session())
    assert summary.method == MODEL
    assert summary.request == ""
    assert summary.learned == "a. b."
    assert summary.investigated == ""
    # With no "completed" from the model, the final message stands in for it.
    assert summary.completed == FINAL


def test_timeout_falls_back_in_time(llm: ChatServer, settings: Any) -> None:
    settings.SESSIONHUB["LLM"]["TIMEOUT"] = 0.5
    llm.delay = 3.0
    session = ended_session()
    started = time.monotonic()
    summary = summarize(session)
    elapsed = time.monotonic() - started
    assert_extractive(summary, "LLM unavailable")
    assert "timed out" in summary.fallback_reason.lower()
    assert elapsed < 2.5, f"the summarizer waited {elapsed:.1f}s on a 0.5s timeout"
    assert len(llm.requests) == 1


def test_unreachable_endpoint_falls_back(llm: ChatServer, settings: Any) -> None:
    llm.httpd.shutdown()
    llm.httpd.server_close()  # nothing listens on the port any more
    summary = summarize(ended_session())
    assert_extractive(summary, "LLM unavailable")


def test_spent_budget_means_no_call(llm: ChatServer) -> None:
    session = ended_session()
    budget = session.team.llm_daily_token_budget
    LlmUsage.objects.create(team=session.team, day=timezone.now().date(), tokens=budget, calls=9)
    summary = summarize(session)
    assert_extractive(summary, "budget")
    assert llm.requests == []
    assert usage(session.team_id) == (budget, 9)


def test_budget_is_spent_by_real_answers(llm: ChatServer) -> None:
    """A team whose budget the first answer used up gets extractive summaries after it;
    another team is not affected."""
    team = Team.objects.create(slug="thrifty", name="Thrifty", llm_daily_token_budget=300)
    first = summarize(ended_session(team))
    assert first.method == MODEL
    assert usage(team.pk) == (400, 1)

    second = summarize(ended_session(team))
    assert_extractive(second, "budget")
    assert len(llm.requests) == 1

    other = summarize(ended_session())
    assert other.method == MODEL
    assert len(llm.requests) == 2


def test_resummarize_by_api_after_the_model_recovers(
    llm: ChatServer, api: APIClient, team: Team, django_capture_on_commit_callbacks: Any
) -> None:
    llm.status, llm.body = 503, b"{}"
    session = ended_session(team)
    assert_extractive(summarize(session), "LLM unavailable")

    llm.status, llm.body = 200, None
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(f"/api/v1/sessions/{session.pk}/summarize")
    assert response.status_code == 202, response.content
    summary = Summary.objects.get(session=session)
    assert summary.method == MODEL
    assert summary.fallback_reason == ""
    assert summary.completed == ANSWER["completed"]
