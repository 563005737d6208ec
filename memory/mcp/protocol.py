"""The MCP wire protocol over Streamable HTTP, as the official Python SDK (``mcp`` 2.x)
speaks it, served statelessly: one JSON-RPC request in one POST, one JSON answer.

Two eras share the endpoint, told apart as the SDK's session manager tells them (by the
``MCP-Protocol-Version`` header):

* the handshake era (``2024-11-05`` … ``2025-11-25``, and a request with no version
  header): ``initialize`` answers with the negotiated version, ``ping`` with ``{}``; no
  ``Mcp-Session-Id`` is issued, so every request stands alone. Errors of a request the
  server understood are JSON-RPC errors in a 200 answer, as the SDK's stateless JSON
  mode gives them;
* the per-request era (``2026-07-28``, Claude Code's first choice): no handshake,
  ``server/discover`` instead; each request carries its envelope in ``params._meta``
  (protocol version, client capabilities) and mirrors it in headers (``Mcp-Method``,
  ``Mcp-Name``), every result says ``resultType: "complete"`` and names the server in
  its ``_meta``. Errors carry the HTTP status the SDK maps them to (400, or 404 for an
  unknown method).

Pure functions over the request's body and headers: no database, no Django. The view
(``views.py``) authenticates, calls :func:`classify`, dispatches the method and wraps the
answer with :func:`result_body` or :func:`error_body`. ``tests/memory/test_mcp.py`` holds
both eras request by request, ``tests/memory/test_mcp_sdk.py`` against the SDK's own
client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS = ("2026-07-28",)
LATEST_HANDSHAKE = HANDSHAKE_VERSIONS[-1]

PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"

# JSON-RPC and MCP error codes.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
UNSUPPORTED_PROTOCOL_VERSION = -32022
# Server-defined codes (JSON-RPC reserves -32000 to -32099 for them).
UNAUTHORIZED = -32001
FORBIDDEN = -32003
RATE_LIMITED = -32029
UNAVAILABLE = -32050

# The HTTP status of a per-request-era error, by code (the SDK's table).
_MODERN_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}


class RpcError(Exception):
    """A JSON-RPC error with the HTTP status it is answered with."""

    def __init__(
        self, code: int, message: str, *, data: Any = None, status: int | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.status = status


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request as the protocol reads it."""

    era: str  # "handshake" or "modern"
    version: str
    method: str
    id: str | int | None
    params: dict[str, Any]
    client: str

    @property
    def modern(self) -> bool:
        return self.era == "modern"

    def status_of(self, code: int) -> int:
        """The HTTP status an error of this request is answered with."""
        return _MODERN_STATUS.get(code, 200) if self.modern else 200


def accepts_json(accept: str) -> bool:
    """Whether an ``Accept`` header admits ``application/json`` (wildcards included)."""
    if not accept.strip():
        return True
    types = {part.split(";", 1)[0].strip().lower() for part in accept.split(",")}
    return bool(types & {"application/json", "application/*", "*/*"})


def is_notification(message: Any) -> bool:
    """A JSON-RPC notification: an object without an ``id`` member (answered 202)."""
    return isinstance(message, dict) and "id" not in message


def _client_of(info: Any) -> str:
    if not isinstance(info, Mapping):
        return ""
    return " ".join(str(info.get(k) or "") for k in ("name", "version")).strip()[:200]


def classify(message: Any, headers: Mapping[str, str]) -> Exchange:
    """Validate a request's envelope and tell its era; ``headers`` keyed in lower case.

    Raises :class:`RpcError` (with its HTTP status) for what the SDK refuses: a body that
    is not one request, a per-request-era envelope that is missing, disagrees with its
    headers, or names a version this server does not speak.
    """
    if (
        not isinstance(message, dict)
        or message.get("jsonrpc") != "2.0"
        or not isinstance(message.get("method"), str)
        or not _valid_id(message.get("id"))
    ):
        raise RpcError(
            INVALID_REQUEST,
            "Body must be a single JSON-RPC request or notification object",
            status=400,
        )
    request_id = message["id"]
    method = message["method"]
    params = message.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, "params must be an object", status=400)
    header_version = headers.get("mcp-protocol-version")
    if header_version is None or header_version in HANDSHAKE_VERSIONS:
        client = ""
        if method == "initialize":
            client = _client_of(params.get("clientInfo"))
        return Exchange("handshake", header_version or "", method, request_id, params, client)
    meta = params.get("_meta")
    if not isinstance(meta, Mapping) or not (
        PROTOCOL_VERSION_KEY in meta and CLIENT_CAPABILITIES_KEY in meta
    ):
        raise RpcError(
            INVALID_PARAMS,
            f"params._meta must be an object carrying the {PROTOCOL_VERSION_KEY!r} and "
            f"{CLIENT_CAPABILITIES_KEY!r} envelope keys",
            status=400,
        )
    version = meta[PROTOCOL_VERSION_KEY]
    if header_version != version:
        raise RpcError(
            HEADER_MISMATCH,
            "mcp-protocol-version header does not match the request envelope's protocol version",
            status=400,
        )
    if headers.get("mcp-method") != method:
        raise RpcError(
            HEADER_MISMATCH,
            "mcp-method header does not match the request body's method",
            status=400,
        )
    if (
        method == "tools/call"
        and params.get("name") is not None
        and headers.get("mcp-name") != params.get("name")
    ):
        raise RpcError(
            HEADER_MISMATCH,
            "mcp-name header does not match the request body's 'name' parameter",
            status=400,
        )
    if version not in MODERN_VERSIONS:
        raise RpcError(
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            data={"supported": list(MODERN_VERSIONS), "requested": str(version)[:100]},
            status=400,
        )
    return Exchange(
        "modern", version, method, request_id, params, _client_of(meta.get(CLIENT_INFO_KEY))
    )


def _valid_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def negotiated(requested: Any) -> str:
    """The handshake version answered to an ``initialize``: the client's when known."""
    return requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE


def result_body(
    exchange: Exchange, result: dict[str, Any], server: dict[str, str]
) -> dict[str, Any]:
    """A JSON-RPC answer; a per-request-era result says it is complete and names the
    server."""
    if exchange.modern:
        result = {**result, "resultType": "complete"}
        meta = result.get("_meta")
        result["_meta"] = {**(meta if isinstance(meta, dict) else {}), SERVER_INFO_KEY: server}
    return {"jsonrpc": "2.0", "id": exchange.id, "result": result}


def error_body(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC error (``id`` null when the request's id could not be read)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}
