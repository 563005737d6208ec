"""``POST /api/v1/mcp``: the MCP endpoint, a plain synchronous Django view.

It runs where the rest of SessionHub runs (the web server's threads, the embedded runserver)
with no event loop and no server of its own, and so with no database connection of its
own per tool call (docs/integrations.md, "Memory on demand", compares it with the SDK's
Streamable HTTP manager). The token is the team's API token (scope ``read``); every refusal is a
JSON-RPC error body with the HTTP status the protocol asks for, never a 500.

The calling session is known when the client names it (``X-SessionHub-Source`` and
``X-SessionHub-Session``: the OpenClaw plugin does) and otherwise linked later from the
tool-use id Claude Code sends in ``_meta`` (``claudecode/toolUseId``), when that tool use
reaches SessionHub through the hooks (``memory/pipeline.py``).
"""

from __future__ import annotations

import logging
import time
from types import SimpleNamespace
from typing import Any

import orjson
from django.conf import settings
from django.db import DatabaseError, DataError, InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions

from sessionhub.authentication import ApiTokenAuthentication, TokenUser
from sessionhub.models import ApiToken
from sessionhub.throttling import TokenRateThrottle

from .. import recall
from . import protocol
from .audit import mcp_call_record
from .tools import TOOLS, Answer, Context, ToolError, tools_for

logger = logging.getLogger(__name__)

SERVER = {"name": "sessionhub", "title": "SessionHub team memory", "version": "1.0.0"}
INSTRUCTIONS = (
    "SessionHub keeps your team's memory of earlier agent sessions (Claude Code, OpenClaw "
    "and others): what was asked, decided, done and left open. search_memory finds "
    "sessions by a few words; get_session and get_timeline read one by its id; "
    "recent_sessions shows a project's latest work and open tasks; list_pins shows an "
    "agent's pins. Answers are short and name ids: ask for more by id."
)
TOOL_USE_ID_KEY = "claudecode/toolUseId"
_JSON = "application/json"


def _response(body: Any, status: int = 200, **headers: str) -> HttpResponse:
    response = HttpResponse(
        orjson.dumps(body) if body is not None else b"", status=status, content_type=_JSON
    )
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def _error(
    status: int, code: int, message: str, request_id: Any = None, data: Any = None, **headers: str
) -> HttpResponse:
    return _response(protocol.error_body(request_id, code, message, data), status, **headers)


def _retry_after() -> str:
    return str(settings.SESSIONHUB["RETRY_AFTER_SECONDS"])


@method_decorator(csrf_exempt, name="dispatch")
class McpEndpoint(View):
    """The endpoint: POST only (a stateless server has no stream for a GET to open)."""

    def post(self, request: HttpRequest) -> HttpResponse:
        return mcp_answer(request)

    def http_method_not_allowed(self, request: HttpRequest, *args: Any, **kw: Any) -> HttpResponse:
        return _error(405, protocol.INVALID_REQUEST, "This endpoint takes POST only", Allow="POST")


def mcp_answer(request: HttpRequest) -> HttpResponse:
    """One MCP request: authenticate, check, dispatch, answer."""
    started = time.perf_counter()
    try:
        return _serve(request, started)
    except (OperationalError, InterfaceError):
        logger.warning("MCP request: database unavailable")
        return _error(
            503,
            protocol.UNAVAILABLE,
            "The database is unavailable; retry later",
            Retry_After=_retry_after(),
        )
    except DatabaseError:
        logger.exception("MCP request: database error")
        return _error(
            503,
            protocol.UNAVAILABLE,
            "SessionHub could not answer; retry later",
            Retry_After=_retry_after(),
        )
    except Exception:
        logger.exception("MCP request failed")
        return _error(200, protocol.INTERNAL_ERROR, "Internal error")


def _authenticate(request: HttpRequest) -> ApiToken | HttpResponse:
    challenge = 'Bearer realm="sessionhub"'
    try:
        found = ApiTokenAuthentication().authenticate(request)  # type: ignore[arg-type]
    except exceptions.AuthenticationFailed as exc:
        return _error(401, protocol.UNAUTHORIZED, str(exc.detail), WWW_Authenticate=challenge)
    if found is None:
        return _error(
            401,
            protocol.UNAUTHORIZED,
            "Authorization: Bearer <SessionHub API token> is required",
            WWW_Authenticate=challenge,
        )
    token = found[1]
    if not token.has_scope("read"):
        return _error(
            403, protocol.FORBIDDEN, "This token lacks the read scope the memory tools need"
        )
    throttle = TokenRateThrottle()
    if not throttle.allow_request(SimpleNamespace(user=TokenUser(token)), None):  # type: ignore[arg-type]
        wait = int(throttle.wait() or 1)
        return _error(
            429,
            protocol.RATE_LIMITED,
            "Too many requests",
            data={"retry_after_seconds": wait},
            Retry_After=str(wait),
        )
    return token


def _serve(request: HttpRequest, started: float) -> HttpResponse:
    token = _authenticate(request)
    if isinstance(token, HttpResponse):
        return token
    if not protocol.accepts_json(request.headers.get("Accept", "")):
        return _error(406, protocol.INVALID_REQUEST, "Not Acceptable: accept application/json")
    content_type = request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
    if content_type != _JSON:
        return _error(415, protocol.INVALID_REQUEST, "Content-Type must be application/json")
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > settings.SESSIONHUB["MCP"]["MAX_BODY_BYTES"]:
        return _error(413, protocol.INVALID_REQUEST, "Request body is too large")
    try:
        message = orjson.loads(request.body)
    except orjson.JSONDecodeError:
        return _error(400, protocol.PARSE_ERROR, "Parse error")
    if protocol.is_notification(message):
        return _response(None, 202)
    headers = {name.lower(): value for name, value in request.headers.items()}
    try:
        exchange = protocol.classify(message, headers)
    except protocol.RpcError as exc:
        request_id = message.get("id") if isinstance(message, dict) else None
        if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
            request_id = None
        return _error(exc.status or 400, exc.code, exc.message, request_id, exc.data)
    try:
        result = _dispatch(request, token, exchange, started)
    except protocol.RpcError as exc:
        status = exc.status or exchange.status_of(exc.code)
        return _error(status, exc.code, exc.message, exchange.id, exc.data)
    return _response(protocol.result_body(exchange, result, SERVER))


def _capabilities() -> dict[str, Any]:
    return {"tools": {"listChanged": False}}


def _dispatch(
    request: HttpRequest, token: ApiToken, exchange: protocol.Exchange, started: float
) -> dict[str, Any]:
    method = exchange.method
    if method == "tools/list":
        tools = {"tools": [t.definition() for t in tools_for(token)]}
        return {**tools, "cacheScope": "private", "ttlMs": 0} if exchange.modern else tools
    if method == "tools/call":
        return _call(request, token, exchange, started)
    if exchange.modern and method == "server/discover":
        return {
            "supportedVersions": list(protocol.MODERN_VERSIONS),
            "capabilities": _capabilities(),
            "instructions": INSTRUCTIONS,
            "cacheScope": "private",
            "ttlMs": 0,
        }
    if not exchange.modern and method == "initialize":
        return {
            "protocolVersion": protocol.negotiated(exchange.params.get("protocolVersion")),
            "capabilities": _capabilities(),
            "serverInfo": SERVER,
            "instructions": INSTRUCTIONS,
        }
    if not exchange.modern and method == "ping":
        return {}
    raise protocol.RpcError(protocol.METHOD_NOT_FOUND, "Method not found", data=method)


def _call(
    request: HttpRequest, token: ApiToken, exchange: protocol.Exchange, started: float
) -> dict[str, Any]:
    params = exchange.params
    name = params.get("name")
    arguments = params.get("arguments")
    if not isinstance(name, str) or not name:
        raise protocol.RpcError(protocol.INVALID_PARAMS, "tools/call needs the tool's name")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise protocol.RpcError(protocol.INVALID_PARAMS, "arguments must be an object")
    meta = params.get("_meta")
    tool_use_id = meta.get(TOOL_USE_ID_KEY) if isinstance(meta, dict) else None
    tool_use_id = tool_use_id if isinstance(tool_use_id, str) else ""
    named = recall.caller_named(
        token=token,
        source=request.headers.get("X-SessionHub-Source", ""),
        session_id=request.headers.get("X-SessionHub-Session", "")[:200],
    )
    now = timezone.now()
    tool = TOOLS.get(name)
    is_error = True
    answer = Answer({})
    if tool is None:
        text = f"Unknown tool: {name[:100]}"
    elif tool not in tools_for(token):
        text = f"This token lacks the scope {name} needs ({', '.join(tool.scopes)})"
    else:
        try:
            answer = tool.run(Context(token=token, now=now, named=named), arguments)
        except ToolError as exc:
            text = f"{name}: {exc}"
        except DataError:
            # A value the database cannot compare (a NUL, an offset out of range).
            text = f"{name}: a value in the arguments is out of range"
        except (OperationalError, InterfaceError):
            raise  # the database is away: 503, nothing recorded
        except Exception:
            logger.exception("MCP tool %s failed", name)
            answer = Answer({})
            text = f"{name}: SessionHub could not answer this call (the error is logged)"
        else:
            is_error = False
            text = _fit(answer.data)
    client = exchange.client or request.headers.get("User-Agent", "")
    mcp_call_record(
        token=token,
        session=named,
        client=client,
        tool=name,
        arguments=arguments,
        tool_use_id=tool_use_id,
        returned=answer.sessions,
        returned_pins=answer.pins,
        answer=text,
        is_error=is_error,
        duration_ms=(time.perf_counter() - started) * 1000,
        created_at=now,
    )
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": is_error}
    if not is_error and len(text) == len(_json(answer.data)):
        result["structuredContent"] = answer.data
    return result


def _json(data: Any) -> str:
    return orjson.dumps(data).decode()


def _fit(data: dict[str, Any]) -> str:
    """The answer as compact JSON within the answer budget: the longest list is cut from
    its end until it fits (and says so), a last resort cuts the text."""
    limit = settings.SESSIONHUB["MCP"]["ANSWER_MAX_CHARS"]
    text = _json(data)
    while len(text) > limit:
        lists = [(len(_json(v)), k) for k, v in data.items() if isinstance(v, list) and v]
        if not lists:
            return text[: limit - 1] + "…"
        _, key = max(lists)
        data = {**data, key: data[key][:-1], "truncated": True}
        text = _json(data)
    return text
