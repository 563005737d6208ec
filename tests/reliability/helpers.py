"""Small tools the reliability tests share: ports, waiting, seeding, and processes that
are started here and stopped here (never the machine's own PostgreSQL or Redis)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests
from django.conf import settings
from django.db import connection

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(check: Callable[[], Any], timeout: float = 30, every: float = 0.2) -> Any:
    """Call ``check`` until it returns something truthy; that value, or AssertionError."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout}s (last value: {last!r})")


def wait_http(url: str, timeout: float = 30) -> None:
    def up() -> bool:
        try:
            requests.get(url, timeout=1)
            return True
        except requests.RequestException:
            return False

    wait_until(up, timeout)


def current_database_url() -> str:
    """A DATABASE_URL for the current (test) database, for subprocesses to share it."""
    params = settings.DATABASES["default"]
    user = params.get("USER") or "postgres"
    password = f":{params['PASSWORD']}" if params.get("PASSWORD") else ""
    host = params.get("HOST") or "127.0.0.1"
    port = params.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{connection.settings_dict['NAME']}"


def needs_postgres_and_redis() -> str | None:
    """Why a test with real services cannot run here, or None."""
    if connection.vendor != "postgresql":
        return "!!! needs PostgreSQL (DATABASE_URL) !!!"
    if not settings.REDIS_URL:
        return "!!! needs Redis (REDIS_URL) !!!"
    if not shutil.which("redis-server"):
        return "!!! needs redis-server on PATH !!!"
    return None


class RedisServer:
    """A private redis-server on a free port: the tests stop and start it at will."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="sessionhub-redis-")
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.dir,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self.answers, 10, 0.05)

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.3) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@contextmanager
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.close()


class TcpProxy:
    """A TCP forwarder 127.0.0.1:<port> → target, which can cut every connection and
    refuse new ones for a while: a database restart as the clients see it."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", self.port))
        self._listener.listen(128)
        self._listener.settimeout(0.2)
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._refusing = False
        self._stopped = False
        self.cuts = 0
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)
        self._thread.start()

    def _accept_loop(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self._refusing:
                client.close()  # as good as "connection refused" for a client mid-handshake
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=3)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets |= {client, upstream}
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                self._close(sock)

    def _close(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()

    def cut(self) -> None:
        """Drop every open connection and refuse new ones until :meth:`restore`."""
        self._refusing = True
        self.cuts += 1
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            self._close(sock)

    def restore(self) -> None:
        self._refusing = False

    def close(self) -> None:
        self._stopped = True
        self.cut()
        self._listener.close()


def stop_process(process: subprocess.Popen[Any], timeout: float = 15) -> None:
    """Stop a process this test started: SIGTERM to its group, then SIGKILL."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def service_env(**extra: str) -> dict[str, str]:
    """The environment of a SessionHub process as production runs it (no test settings)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "sessionhub.settings",
            "DEBUG": "0",
            "SECRET_KEY": "reliability-" + "k" * 50,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "SECURE_SSL_REDIRECT": "0",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


NGINX_CONF = REPO / "deploy" / "nginx.conf"


def render_nginx_conf(*, listen_port: int, upstream_port: int, workdir: Path) -> str:
    """deploy/nginx.conf as this machine runs it: only the lines marked ``deployment:``
    change (listen address, upstream, pid and temporary paths). A marked line that no
    longer matches fails here, so the test never runs a configuration of its own."""
    text = NGINX_CONF.read_text()
    swaps = [
        ("server web:8000;", f"server 127.0.0.1:{upstream_port};", 1),
        ("listen 8080;", f"listen 127.0.0.1:{listen_port};", 1),
        ("pid /tmp/nginx.pid;", f"pid {workdir}/nginx.pid;", 1),
        ("_temp_path /tmp/nginx-", f"_temp_path {workdir}/nginx-", 5),
    ]
    for old, new, count in swaps:
        found = text.count(old)
        if found != count:
            raise AssertionError(f"deploy/nginx.conf: expected {count} x {old!r}, found {found}")
        text = text.replace(old, new)
    return text


class Nginx:
    """deploy/nginx.conf in front of a local upstream, in the foreground, as a child."""

    def __init__(self, upstream_port: int, log: Path) -> None:
        binary = shutil.which("nginx") or (
            "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
        )
        if binary is None:
            raise AssertionError("!!! nginx is not installed (.ci/run installs Debian's nginx) !!!")
        self.binary = binary
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="sessionhub-nginx-"))
        self.dir.chmod(0o755)  # nginx's workers may run as another user
        self.conf = self.dir / "nginx.conf"
        self.conf.write_text(
            render_nginx_conf(listen_port=self.port, upstream_port=upstream_port, workdir=self.dir)
        )
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        checked = subprocess.run(
            [self.binary, "-t", "-p", str(self.dir), "-c", str(self.conf)],
            capture_output=True,
            text=True,
            check=False,
        )
        if checked.returncode != 0:
            raise AssertionError(f"nginx refuses deploy/nginx.conf:\n{checked.stderr}")
        self.process = subprocess.Popen(
            [self.binary, "-p", str(self.dir), "-c", str(self.conf), "-g", "daemon off;"],
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

        def listening() -> bool:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.3).close()
                return True
            except OSError:
                return False

        wait_until(listening, 15, 0.05)

    def close(self) -> None:
        if self.process is not None:
            stop_process(self.process)
        shutil.rmtree(self.dir, ignore_errors=True)


def web_as_deployed(
    env: dict[str, str], log: Path, *, workers: int = 2
) -> tuple[subprocess.Popen[bytes], int]:
    """The web server as the Dockerfile runs it (``python -m sessionhub.serve``) on a free
    port of 127.0.0.1; returns the process (its own group) and the port."""
    port = free_port()
    env = {
        **env,
        "SESSIONHUB_WEB_BIND": f"127.0.0.1:{port}",
        "SESSIONHUB_WEB_WORKERS": str(workers),
        "SESSIONHUB_WEB_THREADS": env.get("SESSIONHUB_WEB_THREADS", "4"),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "sessionhub.serve"],
        cwd=REPO,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    wait_http(f"http://127.0.0.1:{port}/healthz", timeout=60)
    return process, port
