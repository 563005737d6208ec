"""The production web server's launcher (sessionhub/serve.py): its options from the
environment, the process environment kept out of requests, the access log. The server
itself runs in the reliability tests (tests/reliability/helpers.py, ``web_as_deployed``)
and in tests/lifecycle/test_outages.py."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from typing import Any

import pytest

from sessionhub import serve


def _recorder() -> tuple[list[dict[str, Any]], Any]:
    seen: list[dict[str, Any]] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.append(dict(environ))
        start_response("201 Created", [("Content-Type", "text/plain"), ("Content-Length", "2")])
        return [b"ok"]

    return seen, app


def _request(app: Any, **environ: Any) -> tuple[str, bytes]:
    statuses: list[str] = []
    body = b"".join(app(environ, lambda status, headers, exc_info=None: statuses.append(status)))
    return statuses[0], body


def _environ(process: dict[str, str], **request: Any) -> dict[str, Any]:
    """What Granian hands the application: the process environment, then the request."""
    return {
        **process,
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/api/v1/sessions",
        "QUERY_STRING": "",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "wsgi.input": io.BytesIO(b""),
        **request,
    }


def test_the_process_environment_never_reaches_a_request() -> None:
    process = {
        "DATABASE_URL": "postgres://sessionhub:hunter2-db-password@db/sessionhub",
        "SECRET_KEY": "not-for-requests",
        "SESSIONHUB_LLM_API_KEY": "sk-not-for-requests",
        "PATH": "/usr/bin",
    }
    seen, app = _recorder()
    served = serve.wrapped(app, process)
    status, body = _request(
        served, **_environ(process, HTTP_AUTHORIZATION="Bearer x", CONTENT_TYPE="text/plain")
    )
    assert (status, body) == ("201 Created", b"ok")
    environ = seen[0]
    assert not set(process) & set(environ)
    # The request's own keys stay, headers and the WSGI ones included.
    assert environ["HTTP_AUTHORIZATION"] == "Bearer x"
    assert environ["CONTENT_TYPE"] == "text/plain"
    assert environ["PATH_INFO"] == "/api/v1/sessions"
    assert "wsgi.input" in environ


def test_a_process_variable_named_like_a_request_key_does_not_take_the_requests_away() -> None:
    process = {"CONTENT_TYPE": "text/html", "HTTP_PROXY": "http://proxy:3128"}
    seen, app = _recorder()
    served = serve.wrapped(app, process)
    _request(served, **_environ(process, CONTENT_TYPE="application/json"))
    # The request's own Content-Type stays; the deployment's proxy variable is no header.
    assert seen[0]["CONTENT_TYPE"] == "application/json"
    assert "HTTP_PROXY" not in seen[0]
    # A client that does send that header keeps it.
    _request(served, **_environ(process, HTTP_PROXY="sent-by-the-client"))
    assert seen[1]["HTTP_PROXY"] == "sent-by-the-client"


def test_access_log_lines_carry_the_redacted_path_and_no_query_string(
    tmp_path: Any,
) -> None:
    log = tmp_path / "access.log"
    _, app = _recorder()
    served = serve.wrapped(app, {"SESSIONHUB_ACCESS_LOG": str(log)})
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    try:
        _request(
            served,
            **_environ(
                {},
                REQUEST_METHOD="POST",
                PATH_INFO=f"/api/v1/sessions/{token}",
                QUERY_STRING="session_key=sk-live-should-never-be-logged",
            ),
        )
        _request(served, **_environ({}))
    finally:
        for handler in serve.access_logger.handlers:
            handler.close()
        serve.access_logger.handlers = []
        serve.access_logger.propagate = True
    lines = log.read_text().splitlines()
    assert len(lines) == 2
    assert token not in lines[0] and "sk-live" not in lines[0] and "?" not in lines[0]
    assert '"POST /api/v1/sessions/' in lines[0]
    assert lines[0].split('" ', 1)[1].startswith("201 2 ")
    assert lines[1].startswith("127.0.0.1 [")
    assert '"GET /api/v1/sessions HTTP/1.1" 201 2 ' in lines[1]


def test_without_an_access_log_nothing_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    _, app = _recorder()
    with caplog.at_level(logging.INFO, logger="sessionhub.access"):
        _request(serve.wrapped(app, {}), **_environ({}))
    assert not [r for r in caplog.records if r.name == "sessionhub.access"]


def test_server_options_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from granian.constants import Interfaces

    monkeypatch.setenv("SESSIONHUB_WEB_BIND", "127.0.0.1:9123")
    monkeypatch.setenv("SESSIONHUB_WEB_WORKERS", "2")
    monkeypatch.setenv("SESSIONHUB_WEB_THREADS", "6")
    monkeypatch.setenv("SESSIONHUB_WEB_LIFETIME", "0")
    monkeypatch.delenv("SESSIONHUB_WEB_MAX_RSS", raising=False)
    options = serve.server_options()
    assert options["interface"] is Interfaces.WSGI
    assert (options["address"], options["port"]) == ("127.0.0.1", 9123)
    assert (options["workers"], options["blocking_threads"]) == (2, 6)
    assert options["workers_lifetime"] is None  # 0: never replaced for age
    assert options["workers_max_rss"] == 1024
    assert options["respawn_failed_workers"] is True
    assert options["target"] == "sessionhub.serve:worker_application" and options["factory"]
    # The target resolves to the factory the server calls in each process.
    module, _, name = options["target"].partition(":")
    assert getattr(__import__(module, fromlist=[name]), name) is serve.worker_application


def test_server_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("BIND", "WORKERS", "THREADS", "LIFETIME", "MAX_RSS"):
        monkeypatch.delenv(f"SESSIONHUB_WEB_{name}", raising=False)
    options = serve.server_options()
    assert (options["address"], options["port"]) == ("0.0.0.0", 8000)  # noqa: S104
    # A process per core the server may run on, four request threads in each.
    assert options["workers"] == len(os.sched_getaffinity(0))
    assert options["blocking_threads"] == 4
    assert options["workers_lifetime"] == 6 * 3600
    # A request head past 16 KB is refused by the server (431), never parsed by Django.
    assert options["http1_settings"].max_buffer_size == 16 * 1024


def test_a_server_narrowed_to_one_core_starts_one_process() -> None:
    # A cpuset or taskset leaves the server fewer cores than the machine has.
    found = subprocess.run(
        [
            "taskset",
            "-c",
            "0",
            sys.executable,
            "-c",
            "from sessionhub.serve import server_options; print(server_options()['workers'])",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if k != "SESSIONHUB_WEB_WORKERS"},
    )
    assert found.stdout.strip() == "1"


def test_the_launcher_gives_its_processes_the_request_deadlines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import granian.server

    seen: dict[str, str | None] = {}

    class Server:
        def __init__(self, **options: Any) -> None:
            pass

        def serve(self) -> None:
            for name in ("DB_STATEMENT_TIMEOUT", "BROKER_SOCKET_TIMEOUT"):
                seen[name] = os.environ.get(name)

    for name in ("DB_STATEMENT_TIMEOUT", "BROKER_SOCKET_TIMEOUT", "BROKER_CONNECT_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(granian.server, "Server", Server)
    serve.main()
    assert seen == {"DB_STATEMENT_TIMEOUT": "30", "BROKER_SOCKET_TIMEOUT": "0.25"}
    # An operator's own value is kept.
    monkeypatch.setenv("DB_STATEMENT_TIMEOUT", "0")
    serve.main()
    assert seen["DB_STATEMENT_TIMEOUT"] == "0"


def _database_options(**env: str) -> dict[str, Any]:
    """The default database's OPTIONS as settings build them from this environment, in
    a fresh interpreter (settings are read once per process)."""
    code = (
        "import json, django; from django.conf import settings; django.setup(); "
        "print(json.dumps(settings.DATABASES['default']['OPTIONS']))"
    )
    clean = {k: v for k, v in os.environ.items() if k != "DB_STATEMENT_TIMEOUT"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={
            **clean,
            "DJANGO_SETTINGS_MODULE": "sessionhub.settings",
            "SECRET_KEY": "x" * 50,
            "DEBUG": "0",
            **env,
        },
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_statement_timeout_is_a_startup_option_of_postgresql_connections() -> None:
    url = "postgres://u@db:5432/sessionhub"
    assert _database_options(DATABASE_URL=url, DB_STATEMENT_TIMEOUT="2.5")["options"] == (
        "-c statement_timeout=2500"
    )
    assert "options" not in _database_options(DATABASE_URL=url, DB_STATEMENT_TIMEOUT="0")
    assert "options" not in _database_options(DATABASE_URL=url)  # off outside the web server
    # Options the URL already gives are kept, and its own timeout wins.
    with_path = url + "?options=-c%20search_path%3Dhub"
    assert _database_options(DATABASE_URL=with_path, DB_STATEMENT_TIMEOUT="30")["options"] == (
        "-c search_path=hub -c statement_timeout=30000"
    )
    own = url + "?options=-c%20statement_timeout%3D5000"
    assert _database_options(DATABASE_URL=own, DB_STATEMENT_TIMEOUT="30")["options"] == (
        "-c statement_timeout=5000"
    )
    # SQLite has no such option.
    sqlite = _database_options(DATABASE_URL="sqlite:////tmp/x.sqlite3", DB_STATEMENT_TIMEOUT="30")
    assert "options" not in sqlite


# --- an answer given before the body was read ----------------------------------------------


def _reading(amount: int | None, *, size: int = -1) -> Any:
    """An application that reads ``amount`` bytes of the body (None: reads until the end,
    ``size`` at a time) and answers 200."""

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        stream = environ["wsgi.input"]
        if amount is None:
            while stream.read(size):
                pass
        elif amount:
            stream.read(amount)
        start_response("200 OK", [("Content-Length", "0")])
        return [b""]

    return app


def _answer_headers(app: Any, body: bytes, **environ: Any) -> list[tuple[str, str]]:
    answered: list[list[tuple[str, str]]] = []
    request = {"wsgi.input": io.BytesIO(body), **environ}
    b"".join(app(request, lambda status, headers, exc_info=None: answered.append(headers)))
    return answered[0]


CLOSE = ("Connection", "close")


@pytest.mark.parametrize(
    ("amount", "closes"),
    [(0, True), (5, True), (10, False), (None, False)],
    ids=["nothing read", "part read", "all read", "read to the end"],
)
def test_an_answer_before_the_whole_declared_body_was_read_closes_the_connection(
    amount: int | None, closes: bool
) -> None:
    app = serve.closing_after_unread_bodies(_reading(amount))
    headers = _answer_headers(app, b"0123456789", CONTENT_LENGTH="10")
    assert (CLOSE in headers) is closes
    assert headers[0] == ("Content-Length", "0")  # the application's own headers stay


@pytest.mark.parametrize(
    ("amount", "size", "closes"),
    [(0, -1, True), (4, -1, True), (None, 4, False), (None, -1, False)],
    ids=["nothing read", "part read", "read in pieces to the end", "read whole"],
)
def test_a_chunked_body_counts_as_read_once_a_read_came_back_short(
    amount: int | None, size: int, closes: bool
) -> None:
    app = serve.closing_after_unread_bodies(_reading(amount, size=size))
    headers = _answer_headers(app, b"0123456789", HTTP_TRANSFER_ENCODING="chunked")
    assert (CLOSE in headers) is closes


@pytest.mark.parametrize(
    "declared",
    [{}, {"CONTENT_LENGTH": ""}, {"CONTENT_LENGTH": "0"}, {"CONTENT_LENGTH": "ten"}],
    ids=["no length", "empty length", "zero", "not a number"],
)
def test_a_request_without_a_body_is_left_alone(declared: dict[str, str]) -> None:
    seen, recorder = _recorder()
    app = serve.closing_after_unread_bodies(recorder)
    stream = io.BytesIO(b"")
    answered: list[list[tuple[str, str]]] = []
    request = {"wsgi.input": stream, **declared}
    b"".join(app(request, lambda status, headers, exc_info=None: answered.append(headers)))
    assert seen[0]["wsgi.input"] is stream  # not even wrapped
    assert CLOSE not in answered[0]


def test_the_server_runs_the_application_closing_after_unread_bodies() -> None:
    app = serve.wrapped(_reading(0), {})
    assert CLOSE in _answer_headers(app, b"{}", CONTENT_LENGTH="2")
    app = serve.wrapped(_reading(None), {})
    assert CLOSE not in _answer_headers(app, b"{}", CONTENT_LENGTH="2")
