"""The MCP endpoint at the API level: the protocol in both eras, its refusals (a JSON-RPC
error with the status the protocol asks for, never a 500), each tool's answer, the record
of every call, and another team's rows never seen."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from lifecycle.models import EventKind, Session, SessionStatus, Source
from memory.mcp.audit import mcp_call_record
from memory.models import McpCall, SessionFeatures
from sessionhub.models import ApiToken, Team
from tests.factories import (
    AgentFactory,
    EventFactory,
    ObservationFactory,
    PinFactory,
    SessionFactory,
    SummaryFactory,
    TailFactory,
)

pytestmark = pytest.mark.django_db

URL = "/api/v1/mcp"
MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "test-client", "version": "1.2"},
}


class Mcp:
    """A client of the endpoint for one token, in one era."""

    def __init__(self, raw: str, era: str = "modern", headers: dict[str, str] | None = None):
        self.raw, self.era, self.extra = raw, era, headers or {}
        self.client = Client()

    def post(self, body: Any, **headers: str) -> Any:
        merged = {
            "HTTP_AUTHORIZATION": f"Bearer {self.raw}",
            "HTTP_ACCEPT": "application/json, text/event-stream",
            **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in self.extra.items()},
            **headers,
        }
        content = body if isinstance(body, (str, bytes)) else json.dumps(body)
        return self.client.post(URL, content, content_type="application/json", **merged)

    def request(self, method: str, params: dict[str, Any] | None = None, **headers: str) -> Any:
        params = dict(params or {})
        if self.era == "modern":
            params["_meta"] = {**META, **params.get("_meta", {})}
            headers = {
                "HTTP_MCP_PROTOCOL_VERSION": MODERN,
                "HTTP_MCP_METHOD": method,
                **({"HTTP_MCP_NAME": params["name"]} if "name" in params else {}),
                **headers,
            }
        else:
            headers = {"HTTP_MCP_PROTOCOL_VERSION": "2025-11-25", **headers}
        return self.post({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}, **headers)

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        response = self.request("tools/call", {"name": tool, "arguments": arguments})
        assert response.status_code == 200, response.content
        result = response.json()["result"]
        result["data"] = json.loads(result["content"][0]["text"]) if not result["isError"] else None
        return result


@pytest.fixture
def mcp(token: str) -> Mcp:
    return Mcp(token)


def _session(team: Team, name: str, **kw: Any) -> Session:
    agent = kw.pop("agent", None) or AgentFactory(team=team)
    return SessionFactory(agent=agent, external_id=name, **kw)


def _remember(
    session: Session,
    request: str,
    *,
    topics: list[str] | None = None,
    pending: list[dict[str, str]] | None = None,
    **summary: Any,
) -> None:
    SummaryFactory(session=session, request=request, **summary)
    SessionFeatures.objects.create(
        team_id=session.team_id,
        session=session,
        hot_topics=topics or [],
        pending_tasks=pending or [],
    )


# --- the protocol -----------------------------------------------------------------------------


def test_modern_discover_and_tools_list(mcp: Mcp) -> None:
    found = mcp.request("server/discover")
    assert found.status_code == 200
    result = found.json()["result"]
    assert result["supportedVersions"] == [MODERN]
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "sessionhub"
    listed = mcp.request("tools/list").json()["result"]
    names = [t["name"] for t in listed["tools"]]
    assert names == ["search_memory", "get_session", "get_timeline", "recent_sessions", "list_pins"]
    assert (listed["cacheScope"], listed["ttlMs"], listed["resultType"]) == (
        "private",
        0,
        "complete",
    )
    for tool in listed["tools"]:
        assert tool["description"] and tool["inputSchema"]["type"] == "object"
        assert tool["annotations"]["readOnlyHint"] is True


def test_handshake_era_initialize_ping_and_list(token: str) -> None:
    mcp = Mcp(token, era="handshake")
    init = mcp.post(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}},
        }
    )
    assert init.status_code == 200
    result = init.json()["result"]
    assert result["protocolVersion"] == "2025-06-18"
    assert result["serverInfo"]["name"] == "sessionhub" and result["instructions"]
    assert "Mcp-Session-Id" not in init  # stateless: every request stands alone
    unknown = mcp.post(
        {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "1999"}}
    )
    assert unknown.json()["result"]["protocolVersion"] == "2025-11-25"
    assert mcp.request("ping").json() == {"jsonrpc": "2.0", "id": 7, "result": {}}
    listed = mcp.request("tools/list").json()["result"]
    assert "resultType" not in listed and len(listed["tools"]) == 5
    missing = mcp.request("resources/list")
    assert missing.status_code == 200  # the handshake era answers errors in a 200
    assert missing.json()["error"]["code"] == -32601


def test_notifications_are_accepted_without_an_answer(mcp: Mcp) -> None:
    response = mcp.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert response.status_code == 202
    assert response.content == b""


@pytest.mark.parametrize(
    ("body", "headers", "status", "code"),
    [
        ("{not json", {}, 400, -32700),
        ([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], {}, 400, -32600),
        ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, {}, 400, -32600),
        ({"jsonrpc": "2.0", "id": True, "method": "ping"}, {}, 400, -32600),
        ({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}, {}, 400, -32602),
        # The per-request era: its envelope, and headers that must agree with it.
        (
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
            {"HTTP_MCP_PROTOCOL_VERSION": MODERN, "HTTP_MCP_METHOD": "tools/list"},
            400,
            -32602,
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}},
            {"HTTP_MCP_PROTOCOL_VERSION": MODERN, "HTTP_MCP_METHOD": "tools/call"},
            400,
            -32020,
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": META}},
            {"HTTP_MCP_PROTOCOL_VERSION": MODERN, "HTTP_MCP_METHOD": "ping"},
            404,
            -32601,
        ),
    ],
)
def test_refusals_are_json_rpc_errors(
    mcp: Mcp, body: Any, headers: dict[str, str], status: int, code: int
) -> None:
    response = mcp.post(body, **headers)
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == code
    assert response.json()["jsonrpc"] == "2.0"


def test_an_unsupported_version_names_the_supported_ones(mcp: Mcp) -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    response = mcp.post(
        {"jsonrpc": "2.0", "id": "x", "method": "tools/list", "params": {"_meta": meta}},
        HTTP_MCP_PROTOCOL_VERSION="2099-01-01",
        HTTP_MCP_METHOD="tools/list",
    )
    assert response.status_code == 400
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": "x",
        "error": {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": [MODERN], "requested": "2099-01-01"},
        },
    }


def test_http_level_refusals(mcp: Mcp, make_token: Callable[..., Any], team: Team) -> None:
    assert Client().get(URL).status_code == 405
    nobody = Client().post(URL, "{}", content_type="application/json")
    assert nobody.status_code == 401
    assert nobody["WWW-Authenticate"].startswith("Bearer")
    assert nobody.json()["error"]["code"] == -32001
    wrong = Mcp("shub_deadbeef_not-a-real-token").request("tools/list")
    assert wrong.status_code == 401
    _, ingest_only = make_token(team, scopes=("ingest",), name="ingest-only")
    refused = Mcp(ingest_only).request("tools/list")
    assert refused.status_code == 403 and "read scope" in refused.json()["error"]["message"]
    assert mcp.request("tools/list", HTTP_ACCEPT="text/html").status_code == 406
    plain = Client().post(
        URL, "{}", content_type="text/plain", HTTP_AUTHORIZATION=f"Bearer {mcp.raw}"
    )
    assert plain.status_code == 415
    big = mcp.post({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "a" * 300_000}})
    assert big.status_code == 413
    assert not McpCall.objects.exists()


def test_a_revoked_token_is_refused(mcp: Mcp, team: Team) -> None:
    token = ApiToken.objects.get(team=team)
    token.revoke()
    assert mcp.request("tools/list").status_code == 401


def test_tool_errors_are_results_the_model_can_read(mcp: Mcp) -> None:
    unknown = mcp.call("no_such_tool")
    assert unknown["isError"] and unknown["content"][0]["text"] == "Unknown tool: no_such_tool"
    missing = mcp.call("search_memory")
    assert missing["isError"] and "query is required" in missing["content"][0]["text"]
    wrong = mcp.call("search_memory", query="billing", limit=500)
    assert wrong["isError"] and "limit must be from 1 to 20" in wrong["content"][0]["text"]
    when = mcp.call("search_memory", query="billing", since="last tuesday")
    assert when["isError"] and "ISO date" in when["content"][0]["text"]
    nobody = mcp.call("get_session", session_id="nope")
    assert nobody["isError"] and "no session 'nope'" in nobody["content"][0]["text"]
    no_name = mcp.request("tools/call", {"arguments": {}})
    assert no_name.status_code == 400
    assert no_name.json()["error"]["code"] == -32602
    # Every tools/call with a name is recorded, errors too.
    assert McpCall.objects.filter(is_error=True).count() == 5


# --- search -------------------------------------------------------------------------------------


def test_search_finds_the_sessions_that_speak_of_it_best_first(mcp: Mcp, team: Team) -> None:
    now = timezone.now()
    exact = _session(
        team, "exact", started_at=now - timedelta(days=20), ended_at=now - timedelta(days=20)
    )
    _remember(
        exact,
        "Decide the retry policy for the webhook dispatcher",
        learned="We settled on exponential backoff with jitter for webhook retries.",
    )
    partial = _session(team, "partial", started_at=now - timedelta(hours=3))
    _remember(partial, "Tune the webhook timeouts")
    unrelated = _session(team, "unrelated", started_at=now - timedelta(hours=1))
    _remember(unrelated, "Rename the invoice columns")
    found = mcp.call("search_memory", query="webhook retry policy")
    assert not found["isError"]
    hits = found["data"]["hits"]
    assert [h["session_id"] for h in hits] == [str(exact.pk), str(partial.pk)]
    best = hits[0]
    assert best["matched"] == ["webhook", "retry", "policy"]
    assert "summary" in best["found_in"]
    assert "backoff" in best["snippet"] or "retry policy" in best["snippet"]
    assert found["data"]["terms"] == ["webhook", "retry", "policy"]
    assert found["structuredContent"] == found["data"]
    record = McpCall.objects.get()
    assert record.tool == "search_memory"
    assert record.arguments == {"query": "webhook retry policy"}
    assert set(record.returned.all()) == {exact, partial}
    assert record.answer == found["content"][0]["text"]
    assert record.answer_chars == len(record.answer)
    assert record.client == "test-client 1.2"
    assert record.requested_by.startswith("token:") and record.session is None


def test_search_reads_prompts_final_messages_tool_uses_and_pins(mcp: Mcp, team: Team) -> None:
    prompted = _session(team, "prompted")
    EventFactory(session=prompted, kind=EventKind.PROMPT, facts={"text": "Migrate the ledger"})
    ended = _session(team, "ended")
    TailFactory(session=ended, final_message="The ledger migration is done.")
    tools = _session(team, "tools")
    _remember(tools, "Clean up", investigated="Edit src/ledger/migrate.py")
    ObservationFactory(session=tools, tool_name="Edit", input_digest="src/ledger/migrate.py")
    pinned = _session(team, "pinned")
    PinFactory(
        agent=pinned.agent, origin_session=pinned, label="ledger", content="Migrate in batches"
    )
    found = mcp.call("search_memory", query="ledger migrate", limit=10)["data"]
    by_id = {h["session_id"]: h for h in found["hits"]}
    assert "prompt" in by_id[str(prompted.pk)]["found_in"]
    assert "final_message" in by_id[str(ended.pk)]["found_in"]
    assert by_id[str(tools.pk)]["snippet"]
    assert "pin" in by_id[str(pinned.pk)]["found_in"]
    assert by_id[str(pinned.pk)]["pin_ids"]


def test_search_filters_by_project_agent_and_time(mcp: Mcp, team: Team) -> None:
    now = timezone.now()
    api = AgentFactory(team=team, name="api (alice)", project="git.example.com/acme/api")
    web = AgentFactory(team=team, name="web (bob)", project="git.example.com/acme/web")
    old = _session(team, "old", agent=api, started_at=now - timedelta(days=40))
    Session.objects.filter(pk=old.pk).update(last_event_at=now - timedelta(days=40))
    _remember(old, "Cache the catalog")
    new = _session(team, "new", agent=api, started_at=now - timedelta(hours=2))
    _remember(new, "Cache the catalog pages")
    other = _session(team, "other", agent=web, started_at=now - timedelta(hours=1))
    _remember(other, "Cache the catalog images")

    def ids(**filters: Any) -> set[str]:
        result = mcp.call("search_memory", query="catalog cache", **filters)
        assert not result["isError"], result
        return {h["session_id"] for h in result["data"]["hits"]}

    assert ids() == {str(old.pk), str(new.pk), str(other.pk)}
    assert ids(project="api") == {str(old.pk), str(new.pk)}
    assert ids(project="git.example.com/acme/web") == {str(other.pk)}
    assert ids(agent="web (bob)") == {str(other.pk)}
    assert ids(agent=str(api.pk), since="7d") == {str(new.pk)}
    assert ids(until=(now - timedelta(days=30)).date().isoformat()) == {str(old.pk)}
    missing = mcp.call("search_memory", query="catalog", agent="nobody")
    assert missing["isError"] and "no agent" in missing["content"][0]["text"]


def test_a_query_of_stop_words_says_so(mcp: Mcp) -> None:
    result = mcp.call("search_memory", query="what did we do there")
    assert result["data"]["hits"] == [] and "no searchable words" in result["data"]["note"]


def test_a_secret_in_a_query_is_never_stored(mcp: Mcp) -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    mcp.call("search_memory", query=f"token {secret}")
    record = McpCall.objects.get()
    assert secret not in json.dumps(record.arguments)
    assert secret not in record.answer


# --- one session, the project, the pins ------------------------------------------------------


def test_get_session_answers_its_memory(mcp: Mcp, team: Team) -> None:
    session = _session(team, "gw-session-1")
    _remember(
        session,
        "Rotate the signing keys",
        completed="Rotated them in staging",
        topics=["signing", "keys"],
        pending=[{"id": "task-12", "text": "TODO task-12 rotate production"}],
    )
    TailFactory(session=session, text="I should check production next", final_message="Done.")
    EventFactory(
        session=session, kind=EventKind.TURN_END, facts={"failed": True, "error": "overloaded"}
    )
    pin = PinFactory(agent=session.agent, label="keys", content="Keep the old key a week")
    data = mcp.call("get_session", session_id=str(session.pk))["data"]
    assert data["session_id"] == str(session.pk) and data["external_id"] == "gw-session-1"
    assert data["summary"]["request"] == "Rotate the signing keys"
    assert data["pending_tasks"] == ["TODO task-12 rotate production"]
    assert data["final_message"] == "Done."
    assert data["reasoning_tail"] == "I should check production next"
    assert "the last turn failed: overloaded" in data["outcome"]
    assert data["agent_pins"][0]["pin_id"] == pin.pk
    by_gateway_id = mcp.call("get_session", session_id="gw-session-1")["data"]
    assert by_gateway_id["session_id"] == str(session.pk)
    record = McpCall.objects.filter(tool="get_session").first()
    assert record is not None and record.returned_pins == [pin.pk]


def test_get_timeline_pages(mcp: Mcp, team: Team) -> None:
    session = _session(team, "long")
    now = timezone.now()
    for n in range(5):
        EventFactory(
            session=session,
            kind=EventKind.PROMPT,
            facts={"text": f"step {n}"},
            occurred_at=now + timedelta(seconds=n),
        )
    first = mcp.call("get_timeline", session_id=str(session.pk), limit=3)["data"]
    assert [e["what"] for e in first["events"]] == [
        "prompt: step 0",
        "prompt: step 1",
        "prompt: step 2",
    ]
    rest = mcp.call("get_timeline", session_id=str(session.pk), after=first["next_after"])["data"]
    assert [e["what"] for e in rest["events"]] == ["prompt: step 3", "prompt: step 4"]
    assert "next_after" not in rest


def test_recent_sessions_and_open_tasks(mcp: Mcp, team: Team) -> None:
    now = timezone.now()
    agent = AgentFactory(team=team, project="git.example.com/acme/billing")
    older = _session(team, "older", agent=agent, started_at=now - timedelta(days=2))
    _remember(
        older,
        "Start the export",
        pending=[
            {"id": "task-1", "text": "TODO task-1 the csv export"},
            {"id": "task-2", "text": "TODO task-2 the parquet export"},
        ],
    )
    newer = _session(team, "newer", agent=agent, started_at=now - timedelta(hours=1))
    _remember(newer, "Finish the csv export")
    SessionFeatures.objects.filter(session=newer).update(done_tasks=["task-1"])
    data = mcp.call("recent_sessions", project="billing")["data"]
    assert [s["session_id"] for s in data["sessions"]] == [str(newer.pk), str(older.pk)]
    assert data["sessions"][0]["request"] == "Finish the csv export"
    assert data["open_tasks"] == [
        {"task": "TODO task-2 the parquet export", "session_id": str(older.pk)}
    ]
    unknown = mcp.call("recent_sessions")
    assert unknown["isError"] and "name the project" in unknown["content"][0]["text"]


def test_the_asking_session_named_by_the_client(token: str, team: Team) -> None:
    agent = AgentFactory(team=team, source=Source.OPENCLAW, project="/srv/bot")
    asking = _session(team, "oc-1", agent=agent, status=SessionStatus.ACTIVE)
    _session(team, "oc-0", agent=agent)
    pin = PinFactory(agent=agent, label="tone", content="Answer briefly")
    mcp = Mcp(token, headers={"X-SessionHub-Source": "openclaw", "X-SessionHub-Session": "oc-1"})
    recent = mcp.call("recent_sessions")["data"]
    assert recent["project"] == "/srv/bot"
    assert recent["asking_session"] == {
        "session_id": str(asking.pk),
        "how_known": "named by the client",
    }
    pins = mcp.call("list_pins")["data"]
    assert [p["pin_id"] for p in pins["pins"]] == [pin.pk]
    assert set(McpCall.objects.values_list("session_id", flat=True)) == {asking.pk}


def test_without_a_name_the_tokens_latest_open_session_is_a_guess(token: str, team: Team) -> None:
    gateway = ApiToken.objects.get(team=team).gateway_name
    agent = AgentFactory(team=team, external_id=f"{gateway}:/home/dev/src/api", project="api")
    live = _session(team, "live", agent=agent, status=SessionStatus.ACTIVE)
    pins = Mcp(token).call("list_pins")["data"]
    assert pins["asking_session"]["how_known"] == "this token's latest active session"
    assert pins["agent_id"] == str(agent.pk)
    # A guess is never recorded as the caller: the record waits for the tool use's id.
    assert McpCall.objects.get().session is None
    assert live.pk


# --- isolation --------------------------------------------------------------------------------


def test_another_teams_rows_are_never_seen(
    mcp: Mcp, team: Team, other_team: Team, make_token: Callable[..., Any]
) -> None:
    theirs = _session(other_team, "theirs")
    _remember(theirs, "The secret merger plan for the webhook vendor")
    TailFactory(session=theirs, final_message="webhook vendor merger")
    EventFactory(session=theirs, kind=EventKind.PROMPT, facts={"text": "webhook vendor merger"})
    PinFactory(agent=theirs.agent, origin_session=theirs, label="merger", content="webhook")
    ours = _session(team, "ours")
    _remember(ours, "Webhook vendor retries")
    found = mcp.call("search_memory", query="webhook vendor merger", limit=20)["data"]
    assert [h["session_id"] for h in found["hits"]] == [str(ours.pk)]
    assert "pins" not in found
    for tool, args in (
        ("get_session", {"session_id": str(theirs.pk)}),
        ("get_session", {"session_id": "theirs"}),
        ("get_timeline", {"session_id": str(theirs.pk)}),
        ("list_pins", {"agent": str(theirs.agent.pk)}),
    ):
        refused = mcp.call(tool, **args)
        assert refused["isError"], (tool, refused)
    assert mcp.call("recent_sessions", project=theirs.project)["data"]["sessions"] == []
    assert not McpCall.objects.filter(returned=theirs).exists()
    assert not McpCall.objects.filter(team=other_team).exists()
    # Their own token sees theirs and none of ours.
    _, raw = make_token(other_team)
    theirs_found = Mcp(raw).call("search_memory", query="webhook vendor")["data"]
    assert [h["session_id"] for h in theirs_found["hits"]] == [str(theirs.pk)]
    assert McpCall.objects.filter(team=other_team).count() == 1


# --- the record ---------------------------------------------------------------------------------


def test_a_tool_use_links_its_call_to_the_session(api: Any, team: Team) -> None:
    token = ApiToken.objects.get(team=team)
    record = mcp_call_record(
        token=token,
        session=None,
        client="claude-code 2.1.330",
        tool="search_memory",
        arguments={"query": "x"},
        tool_use_id="toolu_01ABC",
        returned=[],
        returned_pins=[],
        answer="{}",
        is_error=False,
        duration_ms=1.0,
        created_at=timezone.now(),
    )
    hook = {
        "session_id": "cc-linked",
        "transcript_path": "/tmp/cc-linked.jsonl",
        "cwd": "/home/dev/src/api",
        "hook_event_name": "PostToolUse",
        "tool_name": "mcp__sessionhub__search_memory",
        "tool_input": {"query": "x"},
        "tool_response": {"content": []},
        "tool_use_id": "toolu_01ABC",
    }
    start = {**hook, "hook_event_name": "SessionStart", "source": "startup"}
    for body in (start, hook):
        response = api.post("/api/v1/hooks/claude-code", body, format="json")
        assert response.status_code == 200, response.content
    from memory.pipeline import session_process

    session = Session.objects.get(external_id="cc-linked")
    session_process(str(session.pk))
    record.refresh_from_db()
    assert record.session == session


# --- never a 500 --------------------------------------------------------------------------------


def test_a_failing_tool_is_a_tool_error_and_recorded(
    mcp: Mcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory.mcp import tools

    def broken(ctx: Any, args: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setitem(
        tools.TOOLS, "list_pins", dataclasses.replace(tools.TOOLS["list_pins"], run=broken)
    )
    result = mcp.call("list_pins", agent="x")
    assert result["isError"] and "could not answer" in result["content"][0]["text"]
    assert McpCall.objects.get().is_error


def test_the_database_away_is_a_503_with_retry_after(
    mcp: Mcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import OperationalError

    from memory.mcp import views

    def away(*args: Any, **kw: Any) -> Any:
        raise OperationalError("connection refused")

    monkeypatch.setattr(views, "_serve", away)
    response = mcp.request("tools/list")
    assert response.status_code == 503 and response["Retry-After"]
    assert response.json()["error"]["code"] == -32050


def test_a_token_past_its_rate_limit_is_a_429(mcp: Mcp, settings: Any) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"token": "2/min"},
    }
    statuses = [mcp.request("tools/list").status_code for _ in range(4)]
    assert statuses[:2] == [200, 200] and statuses[-1] == 429
    limited = mcp.request("tools/list")
    assert limited["Retry-After"] and limited.json()["error"]["code"] == -32029


def test_answers_hold_what_was_stored_redacted_never_a_secret(mcp: Mcp, api: Any) -> None:
    """Secrets in a session's prompt, tool input and final message are redacted when
    stored; what the tools hand out is what was stored."""
    from memory.pipeline import session_process

    github = "ghp_" + "R8x2Kq9Lm4Np7Vb3Cz6Hf1Jw5Td0Ys2Ug8Ae"
    aws = "AKIAYS7BUZSBKMUIV3NR"
    base = {"agent_id": "ops", "session_id": "leaky"}
    events = [
        {**base, "event_id": "l1", "kind": "session_start"},
        {**base, "event_id": "l2", "kind": "prompt", "text": f"Rotate the deploy key {aws}"},
        {
            **base,
            "event_id": "l3",
            "kind": "tool_use",
            "tool_name": "Bash",
            "tool_input": {"command": f"gh auth login --with-token {github}"},
        },
        {**base, "event_id": "l4", "kind": "turn_end", "final_message": f"Rotated; {github}"},
        {**base, "event_id": "l5", "kind": "session_end", "reason": "new"},
    ]
    assert api.post("/api/v1/events", events, format="json").status_code == 200
    session = Session.objects.get(external_id="leaky")
    session_process(str(session.pk))
    answers = [
        mcp.call("search_memory", query="rotate deploy key"),
        mcp.call("get_session", session_id=str(session.pk)),
        mcp.call("get_timeline", session_id=str(session.pk)),
        mcp.call("recent_sessions", project=session.project or "ops"),
    ]
    assert str(session.pk) in answers[0]["content"][0]["text"]
    for answer in answers:
        text = answer["content"][0]["text"]
        assert github not in text and aws not in text, text
    for record in McpCall.objects.all():
        assert github not in record.answer and aws not in record.answer
