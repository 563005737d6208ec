"""Slow and stalled clients against the production front: deploy/nginx.conf before the
web server (``python -m sessionhub.serve``, as the Dockerfile runs it) on PostgreSQL and
Redis, the processes docker-compose runs, started here.

200 uploads announce a body and stop sending. While they are held open, /healthz and
single-event ingest keep answering; then nginx drops each stalled upload at its body
timeout without passing a byte of it to the application. Errors nginx answers itself
(413, 414, 431, 502) are in the API's one error shape. Latency figures are in
bench/slow_clients.py and docs/reliability.md; nothing here is timed.
"""

from __future__ import annotations

import json
import select
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import requests
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher

from lifecycle.models import LifecycleEvent
from sessionhub.services import api_token_create, team_get_or_create

from .helpers import (
    REPO,
    Nginx,
    current_database_url,
    redis_server,
    service_env,
    stop_process,
    web_as_deployed,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("real_services"),
]

STALLED = 200
# Far below nginx's 10 s body timeout: an answer that waited for the stalled uploads to
# be dropped would miss it. A liveness bound, not a latency figure.
ANSWER_WITHIN = 5.0


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[dict[str, Any]]:
    with redis_server() as redis:
        env = service_env(
            DATABASE_URL=current_database_url(),
            REDIS_URL=redis.url,
            STATIC_ROOT=str(tmp_path / "static"),
        )
        # As the Dockerfile does: pages name their static files through the manifest.
        subprocess.run(
            [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
            cwd=REPO,
            env=env,
            check=True,
            timeout=300,
        )
        with ExitStack() as started:  # whatever started is stopped, whatever failed after
            web, web_port = web_as_deployed(env, tmp_path / "web.log", workers=2)
            started.callback(stop_process, web)
            front = Nginx(web_port, tmp_path / "nginx.log")
            started.callback(front.close)
            front.start()
            yield {
                "url": front.url,
                "port": front.port,
                "web": web,
                "web_port": web_port,
                "nginx": front,
            }


def _event(n: int) -> dict[str, Any]:
    return {
        "event_id": f"slow-{n}-{uuid.uuid4().hex[:8]}",
        "kind": "prompt",
        "occurred_at": datetime.now(UTC).isoformat(),
        "agent_id": "slowtest",
        "session_id": "slow-clients-session",
        "text": f"prompt {n}",
    }


def _stall(port: int, path: str, headers: dict[str, str], announced: int) -> socket.socket:
    """Send a request head that announces ``announced`` bytes, then a tenth of them."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {announced}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    sock.sendall(head.encode() + b'{"event_id": "' + b"x" * (announced // 10))
    sock.setblocking(False)
    return sock


def _assert_error_shape(response: requests.Response, status: int, code: str) -> None:
    assert response.status_code == status, (response.status_code, response.text[:300])
    assert response.headers["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"message", "code", "extra"}, body
    assert body["code"] == code and body["extra"] == {}


def test_stalled_uploads_do_not_stall_anyone_else(stack: dict[str, Any]) -> None:
    team = team_get_or_create(slug="acme", name="Acme")
    _, token = api_token_create(team=team, name="gw", scopes=["ingest", "read"])
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    url, port = stack["url"], stack["port"]

    # 180 stalled event uploads with a valid token, 20 stalled logins (no token needed).
    stalled = [_stall(port, "/api/v1/events", auth, 4000) for _ in range(STALLED - 20)]
    stalled += [
        _stall(port, "/accounts/login/", {"Content-Type": "application/x-www-form-urlencoded"}, 500)
        for _ in range(20)
    ]

    answered: list[str] = []
    with requests.Session() as http:
        for n in range(40):
            health = http.get(f"{url}/healthz", timeout=ANSWER_WITHIN)
            assert health.status_code == 200, health.text
            assert health.json()["status"] == "ok"
            event = _event(n)
            posted = http.post(
                f"{url}/api/v1/events", data=json.dumps(event), headers=auth, timeout=ANSWER_WITHIN
            )
            assert posted.status_code == 200, posted.text
            assert posted.json()["accepted"] == 1
            answered.append(event["event_id"])
    # Every stalled upload was still open while the others were answered.
    readable, _, _ = select.select(stalled, [], [], 0)
    assert readable == [], "a stalled upload was answered before its timeout"

    # nginx drops each stalled upload at its body timeout: connection closed, no answer
    # (nginx sends nothing on a body timeout), never a 2xx.
    closed = 0
    deadline = time.monotonic() + 60
    pending = list(stalled)
    while pending and time.monotonic() < deadline:
        readable, _, _ = select.select(pending, [], [], 1)
        for sock in readable:
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                data = b""
            assert not data.startswith(b"HTTP/1.1 2"), data[:200]
            closed += 1
            pending.remove(sock)
            sock.close()
    for sock in pending:
        sock.close()
    assert closed == STALLED, f"{STALLED - closed} stalled uploads still open after 60 s"

    # Nothing of the stalled uploads reached the application; every answered event is
    # stored once.
    stored = list(LifecycleEvent.objects.filter(team=team).values_list("event_id", flat=True))
    assert sorted(stored) == sorted(answered)
    access = stack["nginx"].log.read_text()
    assert access.count('"POST /api/v1/events" 408') == STALLED - 20
    assert access.count('"POST /accounts/login/" 408') == 20


def test_errors_of_the_front_are_in_the_one_error_shape(stack: dict[str, Any]) -> None:
    url = stack["url"]
    with requests.Session() as http:
        # A body past client_max_body_size, refused from its Content-Length alone.
        big = http.post(
            f"{url}/api/v1/events",
            data=b"[" + b" " * (7 * 1024 * 1024) + b"]",
            headers={"Content-Type": "application/json"},
            timeout=30,
        )
        _assert_error_shape(big, 413, "payload_too_large")
        _assert_error_shape(http.get(f"{url}/api/v1/{'a' * 9000}", timeout=10), 414, "uri_too_long")
        _assert_error_shape(
            http.get(f"{url}/healthz", headers={"X-Big": "b" * 9000}, timeout=10),
            431,
            "headers_too_large",
        )
        # The application's own errors pass through untouched.
        _assert_error_shape(http.get(f"{url}/api/v1/nothing-here", timeout=10), 404, "not_found")
        refused = http.get(f"{url}/api/v1/sessions", timeout=10)
        assert refused.status_code == 401 and refused.json()["code"] == "not_authenticated"

    # The application is away: nginx answers 502 in the same shape, with Retry-After.
    stop_process(stack["web"])
    gone = requests.get(f"{url}/healthz", timeout=10)
    _assert_error_shape(gone, 502, "bad_gateway")
    assert gone.headers["Retry-After"] == "5"


def test_a_dashboard_login_works_through_the_front(stack: dict[str, Any]) -> None:
    """The browser's Origin names the front's host and port: nginx must pass the Host
    header with its port, or Django's CSRF check refuses every form."""
    # Hashed as production checks it (the test settings hash with MD5 for speed).
    hashed = PBKDF2PasswordHasher().encode("pw-for-tests-123", "saltsaltsalt")
    get_user_model().objects.create(username="alice", password=hashed)
    url = stack["url"]
    with requests.Session() as http:
        page = http.get(f"{url}/accounts/login/", timeout=10)
        assert page.status_code == 200
        token = page.text.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
        answer = http.post(
            f"{url}/accounts/login/",
            data={
                "username": "alice",
                "password": "pw-for-tests-123",
                "csrfmiddlewaretoken": token,
            },
            # The CSRF cookie is Secure (production settings) and this is plain HTTP:
            # send it by hand, as a browser would over TLS.
            headers={
                "Origin": url,
                "Referer": f"{url}/accounts/login/",
                "Cookie": f"csrftoken={page.cookies['csrftoken']}",
            },
            allow_redirects=False,
            timeout=10,
        )
    assert answer.status_code == 302, answer.text[:500]


def _in_time_wait(port: int) -> set[tuple[int, int]]:
    """(local, remote) ports of the machine's IPv4 TCP sockets in TIME_WAIT at either end
    of ``port``. The side that closed a connection first is the one left in TIME_WAIT."""
    found = set()
    for row in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = row.split()
        if fields[3] != "06":  # TIME_WAIT
            continue
        local, remote = (int(address.rsplit(":", 1)[1], 16) for address in fields[1:3])
        if port in (local, remote):
            found.add((local, remote))
    return found


def test_nginx_lets_go_of_an_idle_upstream_connection_before_the_web_server_does(
    stack: dict[str, Any],
) -> None:
    """The web server closes a kept-alive connection after 10 s without a request (its
    header-read timeout). nginx keeps its upstream connections for reuse: one it reused
    just as the server closed it would lose the request it carried, and nginx does not
    retry a POST, so the client would get a 502. nginx must close first."""
    web_port = stack["web_port"]
    before = _in_time_wait(web_port)
    with requests.Session() as http:
        assert http.get(f"{stack['url']}/healthz", timeout=10).status_code == 200
    time.sleep(12)  # past both sides' idle limits
    closed = _in_time_wait(web_port) - before
    assert closed, "the upstream connection nginx kept is neither closed nor reused"
    # nginx's end (an ephemeral port, the web server's as remote) closed it.
    assert {remote for _local, remote in closed} == {web_port}, closed


# --- honest size answers (issue 33) -----------------------------------------------------------

OVERSIZE_TRIES = 100
INGEST_PATHS = ("/api/v1/events", "/api/v1/hooks/claude-code", "/api/v1/hooks/openclaw")


def _raw(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes, read the whole answer (nginx closes after an error)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), headers, body


def test_every_oversize_body_gets_413_and_nginx_errors_are_json(
    stack: dict[str, Any], tmp_path: Path
) -> None:
    """Between the application's limit and past it, on every ingest endpoint, with a
    Content-Length or chunked: always 413 in the one error shape (before, nginx let bodies
    up to 6 MiB through and a quarter of them came back 502 "retry later")."""
    from django.conf import settings

    limit = settings.SESSIONHUB["MAX_BODY_BYTES"]
    url = stack["url"]
    team = team_get_or_create(slug="acme", name="Acme")
    _, token = api_token_create(team=team, name="gw", scopes=["ingest", "read"])
    statuses: dict[int, int] = {}
    with requests.Session() as http:
        http.headers["Authorization"] = f"Bearer {token}"
        for n in range(OVERSIZE_TRIES):
            size = limit + 1 + (n * 10007) % (1024 * 1024)  # 5 MiB + 1 up to 6 MiB
            body = b'{"event_id": "' + b"x" * (size - 16) + b'"}'
            assert len(body) == size
            path = INGEST_PATHS[n % len(INGEST_PATHS)]
            headers = {"Content-Type": "application/json"}
            if n % 10 == 9:  # chunked: no length announced, refused while read
                sent: Any = (body[i : i + 65536] for i in range(0, len(body), 65536))
            else:
                sent = body
            response = http.post(url + path, data=sent, headers=headers, timeout=60)
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            _assert_error_shape(response, 413, "payload_too_large")
        # A body of exactly the limit is still the application's to judge (400: no JSON
        # event in it, not a size refusal).
        exact = http.post(
            url + "/api/v1/events",
            data=b'{"event_id": "' + b"x" * (limit - 16) + b'"}',
            headers={"Content-Type": "application/json"},
            timeout=60,
        )
        assert exact.status_code != 413, exact.text[:300]
    assert statuses == {413: OVERSIZE_TRIES}

    port = stack["port"]
    for request, status, code in (
        (b"TRACE / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 405, "method_not_allowed"),
        (
            b"POST /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip\r\n\r\n",
            501,
            "not_implemented",
        ),
        (b"GET / HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n", 505, "http_version_not_supported"),
    ):
        got, headers, body = _raw(port, request)
        assert got == status, (request, got, body[:300])
        assert headers.get("Content-Type", "").startswith("application/json"), headers
        answer = json.loads(body)
        assert answer == {"message": answer["message"], "code": code, "extra": {}}


def test_the_hook_client_drops_what_can_never_fit_and_sends_the_rest(
    stack: dict[str, Any], tmp_path: Path
) -> None:
    """The real hook client's spool holds an event past the server's limit between two
    ordinary ones: `flush` gets 413 through nginx, splits the batch, drops that one event
    with a log line and delivers the others, and a second flush has nothing left to send
    (it never retries the body forever)."""
    from django.conf import settings

    from tests.integrations.test_hook_client_e2e import CLIENT, HookClient

    team = team_get_or_create(slug="acme", name="Acme")
    _, token = api_token_create(team=team, name="gw", scopes=["ingest", "read"])
    hook = HookClient(tmp_path / "client", stack["url"], token)
    hook.spool.parent.mkdir(parents=True, exist_ok=True)
    session = "5d3c9a55-0000-4000-8000-0000000000aa"

    def line(n: int, pad: int = 0) -> str:
        event = {
            "session_id": session,
            "transcript_path": "/nonexistent/transcript.jsonl",
            "cwd": "/nonexistent/project",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": f"echo {n}", "pad": "p" * pad},
            "tool_use_id": f"toolu_{n}",
            "sessionhub": {"event_id": f"spooled-{n}", "client": "test"},
        }
        return json.dumps(event)

    huge = settings.SESSIONHUB["MAX_BODY_BYTES"] + 4096
    hook.spool.write_text("\n".join([line(1), line(2, pad=huge), line(3)]) + "\n")
    started = time.monotonic()
    hook.run(None, "flush")
    assert time.monotonic() - started < 60
    log = hook.log()
    assert "spooled-2" in log and "refused for good" in log, log[-2000:]
    assert not hook.spool.exists() or hook.spool.read_text().strip() == ""
    stored = set(LifecycleEvent.objects.filter(team=team).values_list("event_id", flat=True))
    assert {"spooled-1", "spooled-3"} <= {e.split("~")[0] for e in stored}, stored
    assert not any(e.startswith("spooled-2") for e in stored)
    hook.run(None, "flush")  # nothing left: nothing sent again
    assert hook.log().count("refused for good") == 1
    assert CLIENT.exists()
