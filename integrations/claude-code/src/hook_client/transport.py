"""One JSON POST to the server within the deadline: a plain socket for http://,
``http.client`` for https://, urllib only when the environment names a proxy.
"""

from __future__ import annotations

import json
import os

from .constants import CLIENT, MAX_RESPONSE_BYTES, PROXY_VARIABLES
from .deadline import Deadline

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class Reply:
    """Outcome of one POST: kind is ok, transient or permanent."""

    def __init__(self, kind: str, code: int = 0, data: object = None, error: str = "") -> None:
        self.kind = kind
        self.code = code
        self.data = data
        self.error = error

    def describe(self) -> str:
        """Short text for the log."""
        if self.code:
            detail = self.error or _short(self.data)
            return f"HTTP {self.code} {detail}".strip()
        return self.error or self.kind


def _short(data: object, limit: int = 300) -> str:
    """Compact one-line rendering of a server answer."""
    if data is None:
        return ""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=True)
    return text[:limit]


def classify(code: int) -> str:
    """Map an HTTP status to ok, transient or permanent."""
    if 200 <= code < 300:
        return "ok"
    if code == 429 or code >= 500 or code == 408:
        return "transient"
    return "permanent"


def post_json(url: str, token: str, body: bytes, deadline: Deadline) -> Reply:
    """POST a JSON body, never running past the deadline (a worker thread enforces it)."""
    budget = deadline.net_remaining()
    if budget <= 0.02:
        return Reply("transient", error="no time left")
    import threading

    results: list[tuple[int, bytes]] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(_urlopen_post(url, token, body, budget))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            errors.append(exc)

    worker = threading.Thread(target=work, name="sessionhub-post", daemon=True)
    worker.start()
    worker.join(budget)
    if worker.is_alive():
        # The socket timeout is per operation, so a slow server could keep us longer;
        # the daemon thread is abandoned and dies with the process.
        return Reply("transient", error=f"timed out after {budget:.2f}s")
    if errors:
        exc = errors[0]
        if isinstance(exc, ValueError):  # bad URL or header: a configuration error
            return Reply("permanent", error=f"cannot build the request to {url!r}: {exc}")
        return Reply("transient", error=f"{type(exc).__name__}: {exc}")
    code, raw = results[0]
    data: object = None
    if raw:
        try:
            data = json.loads(raw)
        except ValueError:
            data = raw[:300].decode("utf-8", "replace")
    kind = classify(code)
    error = ""
    if 300 <= code < 400:
        error = "redirected: point SESSIONHUB_URL at the final address"
    return Reply(kind, code=code, data=data, error=error)


def _urlopen_post(url: str, token: str, body: bytes, timeout: float) -> tuple[int, bytes]:
    """Do the HTTP request; redirects are not followed (they drop POST bodies).

    Plain ``http.client`` is used: importing ``urllib.request`` (email, tempfile, ...)
    would cost more than the rest of the hook. urllib is used only when the environment
    names a proxy, since only urllib honours ``*_proxy`` and ``no_proxy``.
    """
    if not url.lower().startswith(("http://", "https://")):
        raise ValueError("the URL must start with http:// or https://")
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json",
        "User-Agent": CLIENT,
        "Connection": "close",
    }
    timeout = max(timeout, 0.05)
    if any(os.environ.get(name) for name in PROXY_VARIABLES):
        return _urllib_post(url, headers, body, timeout)
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if not parts.hostname:
        raise ValueError("the URL names no host")
    port = parts.port  # ValueError when it is not a number
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    https = parts.scheme.lower() == "https"
    if not https:
        return _socket_post(parts.hostname, port or 80, target, headers, body, timeout)
    import http.client

    connection_class = http.client.HTTPSConnection if https else http.client.HTTPConnection
    connection = connection_class(parts.hostname, port, timeout=timeout)
    try:
        try:
            connection.request("POST", target, body=body, headers=headers)
        except http.client.InvalidURL as exc:
            raise ValueError(str(exc)) from exc
        response = connection.getresponse()
        return response.status, response.read(MAX_RESPONSE_BYTES)
    finally:
        connection.close()


def _socket_post(
    host: str, port: int, target: str, headers: dict, body: bytes, timeout: float
) -> tuple[int, bytes]:
    """Plain-HTTP POST over a socket: ``http.client`` imports email and ssl, which cost
    more than the rest of a hook's start-up. One request, ``Connection: close``."""
    import socket

    if any(c in target or c in host for c in "\r\n "):
        raise ValueError("the URL has spaces or line breaks")
    lines = [f"POST {target} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(request)
        chunks, size = [], 0
        while size <= MAX_RESPONSE_BYTES + 65536:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    raw = b"".join(chunks)
    head, _, content = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    fields = status_line.split(" ", 2)
    if len(fields) < 2 or not fields[0].startswith("HTTP/") or not fields[1].isdigit():
        raise OSError(f"not an HTTP answer: {status_line[:80]!r}")
    found = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in header_lines)}
    if found.get("transfer-encoding", "").lower() == "chunked":
        content = _unchunk(content)
    elif found.get("content-length", "").isdigit():
        content = content[: int(found["content-length"])]
    return int(fields[1]), content[:MAX_RESPONSE_BYTES]


def _unchunk(data: bytes) -> bytes:
    """Decode a chunked body (as far as it is complete)."""
    out = []
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
        except ValueError:
            break
        if size == 0:
            break
        out.append(rest[:size])
        data = rest[size + 2 :]
    return b"".join(out)


def _urllib_post(url: str, headers: dict, body: bytes, timeout: float) -> tuple[int, bytes]:
    """The same request through urllib, which applies the environment's proxy settings."""
    import urllib.error
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    request = urllib.request.Request(  # noqa: S310 - the scheme is checked by the caller
        url, data=body, method="POST", headers=headers
    )
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=timeout) as response:
            return response.status, response.read(MAX_RESPONSE_BYTES)
    except urllib.error.HTTPError as exc:
        try:
            raw = exc.read(MAX_RESPONSE_BYTES)
        except Exception:  # noqa: BLE001 - the status code is what matters
            raw = b""
        return exc.code, raw
