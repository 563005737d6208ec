"""SessionHub's production web server: ``python -m sessionhub.serve``.

Granian (a Rust HTTP server) runs the WSGI application in a few processes, each with a
few threads for requests that wait on PostgreSQL. Its HTTP parsing, connection handling
and thread hand-over cost a small fraction of a pure-Python server's per request, which
matters for ingestion: thousands of small requests whose own work is a fraction of a
millisecond. nginx stays in front (deploy/nginx.conf) and holds slow clients.

Settings, from the environment:

``SESSIONHUB_WEB_BIND``
    ``host:port`` to listen on (``0.0.0.0:8000``).
``SESSIONHUB_WEB_WORKERS`` / ``SESSIONHUB_WEB_THREADS``
    processes (one per core the process may run on) and request threads in each (4).
    Four threads cover a process's waits on PostgreSQL; a process more than the cores
    only shares them, and cost 5-8% more CPU per hook request (docs/benchmarks.md).
``SESSIONHUB_WEB_LIFETIME``
    seconds after which a process is replaced by a fresh one (6 hours; 0 never), so no
    leak can grow without bound; ``SESSIONHUB_WEB_MAX_RSS`` (MiB, 1024; 0 no limit)
    replaces one whose memory grows past it sooner.
``SESSIONHUB_ACCESS_LOG``
    a file (``-`` for standard output) for one line per request: method, redacted path,
    status, bytes and milliseconds, never the query string (off by default: nginx
    keeps the deployment's access log).
``SESSIONHUB_SWITCH_INTERVAL``
    seconds a thread holds the interpreter lock before handing it over (0.001).
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

# The keys of a request's environ that are the request's own (PEP 3333 and CGI).
_REQUEST_KEYS = frozenset(
    {
        "REQUEST_METHOD",
        "SCRIPT_NAME",
        "PATH_INFO",
        "QUERY_STRING",
        "CONTENT_TYPE",
        "CONTENT_LENGTH",
        "SERVER_NAME",
        "SERVER_PORT",
        "SERVER_PROTOCOL",
        "SERVER_SOFTWARE",
        "REMOTE_ADDR",
        "REMOTE_PORT",
        "GATEWAY_INTERFACE",
        "RAW_URI",
    }
)

access_logger = logging.getLogger("sessionhub.access")


def without_process_environment(
    app: Callable[..., Iterable[bytes]], inherited: Mapping[str, str]
) -> Callable[..., Any]:
    """Take the process's environment variables out of each request's environ.

    Granian starts every request's environ from a copy of ``os.environ`` (as CGI did).
    The process's environment holds the database URL, the secret key and the broker's
    password; nothing of the request needs them, and an error report that shows a
    request's environ must not show them. A variable named like a header (``HTTP_PROXY``
    in many deployments) would read as one the client sent: it goes too, unless the
    request itself carried that header (a different value).
    """
    leaked = tuple(
        (key, value)
        for key, value in inherited.items()
        if key not in _REQUEST_KEYS and not key.startswith("wsgi.")
    )

    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        for key, value in leaked:
            if environ.get(key) == value:
                del environ[key]
        return app(environ, start_response)

    return application


def with_access_log(app: Callable[..., Iterable[bytes]]) -> Callable[..., Any]:
    """One line per answered request on ``sessionhub.access``: the client's address, the
    time, the method, the path redacted (a client may paste a token where an id goes),
    never the query string, the status, the body's bytes and the milliseconds taken."""
    from sessionhub.text.redaction import redact_identifier

    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        started = time.perf_counter()
        seen: dict[str, Any] = {}

        def recording_start_response(status: str, headers: Any, exc_info: Any = None) -> Any:
            seen["status"] = status.split(" ", 1)[0]
            seen["length"] = next(
                (value for name, value in headers if name.lower() == "content-length"), "-"
            )
            return start_response(status, headers, exc_info)

        answer = app(environ, recording_start_response)
        access_logger.info(
            '%s [%s] "%s %s %s" %s %s %.0fms',
            environ.get("REMOTE_ADDR", "-"),
            time.strftime("%d/%b/%Y:%H:%M:%S %z"),
            environ.get("REQUEST_METHOD", "-"),
            redact_identifier(environ.get("PATH_INFO", "")),
            environ.get("SERVER_PROTOCOL", "-"),
            seen.get("status", "-"),
            seen.get("length", "-"),
            (time.perf_counter() - started) * 1000,
        )
        return answer

    return application


def closing_after_unread_bodies(app: Callable[..., Iterable[bytes]]) -> Callable[..., Any]:
    """``Connection: close`` on an answer given before the request's body was all read.

    A refusal (401, 403, 406, 413, 429) answers without reading the body. The server then
    closes the connection after the answer, as the unread rest would be taken for the next
    request, but the answer did not say so: a client that kept the connection sent its
    next request down it and got no answer (measured: a body sent 1 ms after its head,
    every time). Saying it lets the client open a new connection instead. The rest of the
    body is not read to keep the connection: a client that never sent it would hold a
    request thread for as long as it liked (the server gives a body no deadline).
    """

    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        declared = environ.get("CONTENT_LENGTH") or ""
        chunked = not declared and "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        length = _length(declared)
        if not chunked and length <= 0:
            return app(environ, start_response)
        body = _CountedInput(environ["wsgi.input"])
        environ["wsgi.input"] = body

        def answer(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            read_all = body.ended if chunked else body.taken >= length
            if not read_all:
                headers = [*headers, ("Connection", "close")]
            return start_response(status, headers, exc_info)

        return app(environ, answer)

    return application


def _length(declared: str) -> int:
    try:
        return int(declared)
    except ValueError:
        return 0


class _CountedInput:
    """A request's ``wsgi.input`` that counts what was read from it, and whether a read
    met its end (fewer bytes than asked for)."""

    __slots__ = ("_stream", "ended", "taken")

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.taken = 0
        self.ended = False

    def read(self, size: int | None = -1, /) -> bytes:
        data: bytes = self._stream.read(size)
        self._took(data, size)
        return data

    def readline(self, size: int | None = -1, /) -> bytes:
        data: bytes = self._stream.readline(size)
        self._took(data, size)
        return data

    def _took(self, data: bytes, size: int | None) -> None:
        self.taken += len(data)
        if not data or size is None or size < 0 or len(data) < size:
            self.ended = True


def worker_application() -> Callable[..., Any]:
    """The application one server process runs (Granian calls this once per process)."""
    from sessionhub.wsgi import application

    app = wrapped(application, os.environ)
    # The application's objects live as long as the process: the collector stops walking
    # them (fewer, shorter pauses mid-request), and a thread waiting for the interpreter
    # lock gets it sooner than after the 5 ms default.
    gc.collect()
    gc.freeze()
    sys.setswitchinterval(float(os.environ.get("SESSIONHUB_SWITCH_INTERVAL", "0.001")))
    return app


def wrapped(app: Callable[..., Any], environment: Mapping[str, str]) -> Callable[..., Any]:
    """``app`` as the server runs it: the process's environment kept out of requests, an
    answer given before the body was read closing the connection, and the access log when
    ``SESSIONHUB_ACCESS_LOG`` names a file (``-``: standard output)."""
    log = environment.get("SESSIONHUB_ACCESS_LOG", "")
    if log:
        handler = logging.StreamHandler(sys.stdout) if log == "-" else logging.FileHandler(log)
        handler.setFormatter(logging.Formatter("%(message)s"))
        access_logger.handlers = [handler]
        access_logger.setLevel(logging.INFO)
        access_logger.propagate = False
        app = with_access_log(app)
    return without_process_environment(closing_after_unread_bodies(app), dict(environment))


def cores() -> int:
    """The cores this process may run on (a cpuset or ``taskset`` narrows them)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return multiprocessing.cpu_count()


def _int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


def server_options() -> dict[str, Any]:
    """Granian's options from the environment (module docstring)."""
    from granian.constants import Interfaces
    from granian.http import HTTP1Settings

    host, _, port = os.environ.get("SESSIONHUB_WEB_BIND", "0.0.0.0:8000").rpartition(":")
    lifetime = _int("SESSIONHUB_WEB_LIFETIME", 6 * 3600)
    max_rss = _int("SESSIONHUB_WEB_MAX_RSS", 1024)
    return {
        "target": "sessionhub.serve:worker_application",
        "factory": True,
        "interface": Interfaces.WSGI,
        "address": host.strip("[]") or "0.0.0.0",  # noqa: S104
        "port": int(port),
        "workers": _int("SESSIONHUB_WEB_WORKERS", cores()),
        "blocking_threads": _int("SESSIONHUB_WEB_THREADS", 4),
        # A request head past 16 KB is refused before it reaches Django. The head's 10 s
        # also bound a kept-alive connection's wait for its next request: deploy/nginx.conf
        # keeps its idle upstream connections for less (tests/reliability/test_slow_clients).
        "http1_settings": HTTP1Settings(max_buffer_size=16 * 1024, header_read_timeout=10_000),
        "websockets": False,
        "respawn_failed_workers": True,
        "respawn_interval": 1.0,
        "workers_lifetime": lifetime or None,
        "workers_max_rss": max_rss or None,
        "workers_kill_timeout": 20,
        "log_access": False,
    }


def main() -> None:
    from granian.server import Server

    # Web processes only publish to the broker (after commit, a few bytes): a hung Redis
    # must not hold a request for the worker's 2 s. The server's processes inherit these
    # and their settings read them.
    os.environ.setdefault("BROKER_CONNECT_TIMEOUT", "0.25")
    os.environ.setdefault("BROKER_SOCKET_TIMEOUT", "0.25")
    # The request deadline: no statement of a request runs past 30 s (a request that
    # waits that long on the database answers 503 and its thread is free again).
    os.environ.setdefault("DB_STATEMENT_TIMEOUT", "30")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sessionhub.settings")
    Server(**server_options()).serve()


if __name__ == "__main__":
    main()
