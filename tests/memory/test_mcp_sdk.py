"""The official MCP Python SDK's client (``mcp`` 2.x) against the endpoint over real HTTP:
the handshake era (``mode="legacy"``: ``initialize``, then requests) and the per-request
era it tries first (``mode="auto"``: ``server/discover``, then requests with the
envelope). Its own validation of every answer is the check that the endpoint speaks the
protocol as the SDK does."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from memory.models import McpCall
from sessionhub.models import Team
from tests.factories import AgentFactory, SessionFactory, SummaryFactory

pytestmark = pytest.mark.django_db(transaction=True)


async def _session(url: str, token: str, mode: str, calls: Any) -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        return await calls(client)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_sdk_client_lists_and_calls_the_tools(
    live_server: Any, token: str, team: Team, mode: str
) -> None:
    session = SessionFactory(agent=AgentFactory(team=team), external_id="sdk-1")
    SummaryFactory(session=session, request="Decide the retry policy for the webhook queue")

    async def calls(client: Client) -> Any:
        tools = await client.list_tools()
        found = await client.call_tool("search_memory", {"query": "webhook retry policy"})
        wrong = await client.call_tool("get_session", {"session_id": "nope"})
        return tools, found, wrong

    tools, found, wrong = asyncio.run(_session(f"{live_server.url}/api/v1/mcp", token, mode, calls))
    assert [t.name for t in tools.tools] == [
        "search_memory",
        "get_session",
        "get_timeline",
        "recent_sessions",
        "list_pins",
    ]
    assert not found.is_error
    answer = json.loads(found.content[0].text)
    assert answer["hits"][0]["session_id"] == str(session.pk)
    assert found.structured_content == answer
    assert wrong.is_error and "no session" in wrong.content[0].text
    record = McpCall.objects.get(tool="search_memory")
    assert list(record.returned.all()) == [session]
    assert record.client  # the SDK names itself (clientInfo or its user agent)


def test_the_sdk_client_is_told_a_bad_token(live_server: Any) -> None:
    async def calls(client: Client) -> Any:
        return await client.list_tools()

    with pytest.raises((MCPError, httpx2.HTTPStatusError, ExceptionGroup)):
        asyncio.run(
            _session(f"{live_server.url}/api/v1/mcp", "shub_deadbeef_wrong", "legacy", calls)
        )
