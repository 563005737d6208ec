#!/usr/bin/env python3
"""SessionHub hook client for Claude Code (and for Codex CLI and Gemini CLI).

Claude Code runs this file as a command hook: it reads the hook's JSON on stdin, adds a
``sessionhub`` key (event id, timestamp, git remote, final message, reasoning tail), and
posts it to ``{SESSIONHUB_URL}/api/v1/hooks/claude-code``. When the server cannot be
reached the event goes to a local spool that the next hook call (or ``flush``) sends
first. On ``SessionStart`` (a project-level preamble) and on the session's first
``UserPromptSubmit`` (a preamble chosen by relevance to the prompt) it asks the server for
continuity and prints it as ``hookSpecificOutput.additionalContext``; nothing else is
ever written to stdout in hook mode, and the hook never fails. Codex CLI and Gemini CLI
run it the same way with ``hook --gateway codex`` or ``--gateway gemini-cli`` (their part
is the section "Codex, Gemini" below).

Standard library only, and only cheap modules imported at start-up: hooks run on the
agent's hot path, so everything heavier is imported where it is used.

Subcommands: (none) hook mode, ``install`` (which also registers SessionHub's MCP
server with Claude Code), ``uninstall``, ``status``, ``flush``, ``mcp-headers`` (what
Claude Code runs for the MCP server's Authorization header), ``--version``. Run
``sessionhub_hook.py --help`` for details.
"""

from __future__ import annotations

import json
import os
import sys
import time

# Names for annotations only: the hook starts for every event, and importing typing,
# argparse or collections.abc at run time would cost it milliseconds (mypy reads this
# block as true).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterator, Mapping
    from typing import Any, BinaryIO, TextIO


# --------------------------------------------------------------------------- the queue
#
# The events nobody waits for (tool uses, notifications, subagent ends, PreCompact) come
# several per tool call, and each starts an interpreter on the agent's machine, which
# competes with the agent for the CPU. They run ``sessionhub_hook_queue.py``, a few lines
# that ``install`` writes beside the config from the functions below: it writes stdin as
# it came to a file of its own in the queue folder and exits (no json, no compiling this
# whole file, which alone costs more than the rest). One sender process (``drain``),
# started by the first queued event of a burst and lingering a moment after the last,
# turns queued files into events, moves them into the spool and sends the spool; a
# blocking hook (UserPromptSubmit, Stop, SessionEnd...) moves what is queued first, so
# the server sees a turn's tool uses before its end. A queued file is named by the time
# it was written and 16 random bytes, which also give the event its timestamp and id: an
# event queued twice over a crash is still one event. The hooks of another CLI (Codex CLI,
# Gemini CLI) pass ``--gateway NAME``, which the file's name keeps: ``<time>-<random>.codex.hook``.

QUEUE_SUFFIX = ".hook"
SENDER_FRESH_NS = 3_000_000_000  # a sender whose heartbeat is older is taken for gone
SENDER_LINGER = 2.0  # seconds a sender waits for more events before it exits
CLIENT_PATH = os.path.abspath(__file__)
QUEUE_SCRIPT = "sessionhub_hook_queue.py"


def queue_dir() -> str:
    """Where queued hook events wait for the sender (``SESSIONHUB_QUEUE`` overrides)."""
    folder = os.environ.get("SESSIONHUB_QUEUE") or os.path.join(
        os.path.expanduser("~"), ".sessionhub", "queue"
    )
    return os.path.expanduser(folder)


def queue_event(raw: bytes, start_sender: bool = True, gateway: str = "") -> str:
    """Write one hook's stdin to the queue (atomically, owner-only) and make sure a sender
    runs; returns the queued file's path."""
    folder = queue_dir()
    if not os.path.isdir(folder):
        os.makedirs(folder, mode=0o700, exist_ok=True)
    name = f"{time.time_ns():020d}-{os.urandom(16).hex()}"
    if gateway and gateway.replace("-", "").isalpha():
        name += "." + gateway
    tmp = os.path.join(folder, f".{name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    path = os.path.join(folder, name + QUEUE_SUFFIX)
    os.rename(tmp, path)
    if start_sender and not _sender_alive(folder):
        _start_sender()
    return path


def _sender_alive(folder: str) -> bool:
    try:
        beat = os.stat(os.path.join(folder, ".sender")).st_mtime_ns
    except OSError:
        return False
    return time.time_ns() - beat < SENDER_FRESH_NS


def _start_sender() -> None:
    """Start ``drain`` in a session of its own (it outlives Claude Code); in place where
    there is no fork."""
    if not hasattr(os, "fork"):
        return  # the next blocking hook or ``flush`` sends the queue
    if os.fork():
        return
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        # Our own interpreter and client file, no shell.
        os.execv(sys.executable, [sys.executable, "-S", CLIENT_PATH, "drain"])  # noqa: S606
    finally:
        os._exit(0)


def queue_main() -> None:
    """``hook --queue``: queue stdin; where it cannot be queued (a full disk...), hand it
    to the whole client, which sends it or says why in its log."""
    if os.environ.get("SESSIONHUB_DISABLE", "").strip() in ("1", "true", "yes"):
        return
    raw = sys.stdin.buffer.read()
    if not raw.strip():
        return
    named = sys.argv[1:3] if sys.argv[1:2] == ["--gateway"] else []
    try:
        queue_event(raw, gateway=named[1] if len(named) == 2 else "")
    except Exception:  # noqa: BLE001 - the event must still go somewhere
        read, write = os.pipe()
        if not os.fork():
            os.close(read)
            os.write(write, raw)
            os._exit(0)
        os.close(write)
        os.dup2(read, 0)
        command = [sys.executable, "-S", CLIENT_PATH, "hook", *named]
        os.execv(sys.executable, command)  # noqa: S606


def queue_script_source() -> str:
    """The stand-alone queue hook ``install`` writes: the functions above, verbatim."""
    import inspect

    parts = [
        "# Written by sessionhub_hook.py install: the async Claude Code hooks run this.",
        "import os",
        "import sys",
        "import time",
        f"QUEUE_SUFFIX = {QUEUE_SUFFIX!r}",
        f"SENDER_FRESH_NS = {SENDER_FRESH_NS!r}",
        f"CLIENT_PATH = {CLIENT_PATH!r}",
        *(
            inspect.getsource(f)
            for f in (queue_dir, queue_event, _sender_alive, _start_sender, queue_main)
        ),
        "queue_main()",
    ]
    return "\n\n".join(parts) + "\n"


def queue_script_path() -> str:
    return os.path.join(sessionhub_dir(), QUEUE_SCRIPT)


VERSION = "0.1.0"
CLIENT = f"sessionhub-hook/{VERSION}"

HOOKS_PATH = "/api/v1/hooks/claude-code"
CONTINUITY_PATH = "/api/v1/continuity"
# The CLIs this client serves, by the gateway name a hook passes (``hook --gateway NAME``;
# none is Claude Code), and the endpoint that takes each one's hook bodies.
CLAUDE_CODE = "claude-code"
CODEX = "codex"
GEMINI_CLI = "gemini-cli"
GATEWAY_PATHS = {
    CLAUDE_CODE: HOOKS_PATH,
    CODEX: "/api/v1/hooks/codex",
    GEMINI_CLI: "/api/v1/hooks/gemini-cli",
}
MCP_PATH = "/api/v1/mcp"
# The name the MCP server is registered under: Claude Code calls its tools
# mcp__sessionhub__<tool>.
MCP_SERVER_NAME = "sessionhub"

DEFAULT_TIMEOUT = 2.0
# Time kept back from the network so the spool can still be written before the deadline.
SPOOL_RESERVE = 0.25
FLUSH_COMMAND_TIMEOUT = 30.0

MAX_BATCH_EVENTS = 1000
MAX_BATCH_BYTES = 1 << 20
MAX_RESPONSE_BYTES = 1 << 20

TAIL_CHARS = 2000
TRANSCRIPT_WINDOW = 256 * 1024
TRANSCRIPT_WINDOW_MAX = 4 * 1024 * 1024

LOG_MAX_BYTES = 1 << 20

# Environment variables that make requests go through urllib (it applies proxies).
PROXY_VARIABLES = (
    "https_proxy",
    "http_proxy",
    "HTTPS_PROXY",
    "HTTP_PROXY",
)

# Answers that will not get better by sending the same body again.
PERMANENT_CODES = frozenset({400, 401, 403, 404, 413})
# A refused token is a configuration problem, not a property of the events: they wait in
# the spool (bounded, oldest dropped first) until the token works.
AUTH_CODES = frozenset({401, 403})
SPOOL_MAX_EVENTS = 10_000
# The spool is counted (to keep it bounded) only once it holds this many bytes per event
# allowed (no event's line is shorter): a spool of a few waiting events costs no read.
SPOOL_LINE_MIN_BYTES = 100
WHOAMI_PATH = "/api/v1/whoami"

TRANSCRIPT_EVENTS = frozenset({"Stop", "SubagentStop", "SessionEnd"})
# Events on which the client looks for the earlier session the transcript continues (a
# fork or a resume under a new id writes its transcript at its first turn).
PREDECESSOR_EVENTS = frozenset({"SessionStart", "Stop", "SessionEnd"})
# Strings longer than this are cut before sending, with a marker saying how much: the
# server keeps far less of any one string, and a body over its limit would be refused
# whole (an Edit of a large file carries the whole file in tool_response.originalFile).
MAX_STRING_CHARS = 64 * 1024
MAX_EVENT_BYTES = 2 * 1024 * 1024
# SessionStart sources that get no preamble: after a compaction the conversation goes on,
# and the preamble served at its start is already part of the compacted summary.
NO_PREAMBLE_SOURCES = frozenset({"compact"})

INSTALL_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Notification",
    "Stop",
    "StopFailure",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "SessionEnd",
)
TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})
# Events whose answer nobody reads: registered "async": true, so the agent never waits.
# Not PostCompact: after `/compact` in `claude -p` it is the last hook before SessionEnd,
# and Claude Code 2.1.330 killed it before it could start (the real-CLI test lost it).
# Registered blocking and detached, it costs the agent one interpreter start-up per
# compaction.
ASYNC_EVENTS = frozenset(
    {
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "Notification",
        "SubagentStop",
        "PreCompact",
    }
)
# Events sent from a detached child process (``hook --detach``): Claude Code kills hooks
# still running when it exits (async ones, the fire-and-forget StopFailure); a child in
# its own session outlives that and still sends or spools the event. SessionEnd stays in
# the foreground: Claude Code waits for it (up to its timeout) before it exits, and that
# wait is what gives the hooks fired just before the end the time to hand off.
DETACHED_EVENTS = ASYNC_EVENTS | {"StopFailure", "PostCompact"}
INSTALL_HOOK_TIMEOUT = 10  # seconds; Claude Code's own limit, the client stops well before
OUR_COMMAND_MARKERS = ("sessionhub-hook", "sessionhub_hook")


# --------------------------------------------------------------------------- config


def sessionhub_dir() -> str:
    """Return the client's home folder, ~/.sessionhub."""
    return os.path.join(os.path.expanduser("~"), ".sessionhub")


class Config:
    """Settings from the environment and ~/.sessionhub/config.json (environment wins)."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        home = sessionhub_dir()
        self.config_path = os.path.expanduser(
            env.get("SESSIONHUB_CONFIG") or os.path.join(home, "config.json")
        )
        self.log_path = os.path.join(home, "hook.log")
        self.file_error = ""
        data = self._read_file()
        self.url_source = "env" if env.get("SESSIONHUB_URL") else "config"
        self.token_source = "env" if env.get("SESSIONHUB_TOKEN") else "config"
        self.url = _clean_base_url(env.get("SESSIONHUB_URL") or _str(data.get("url")))
        self.token = (env.get("SESSIONHUB_TOKEN") or _str(data.get("token"))).strip()
        self.timeout = _parse_timeout(env.get("SESSIONHUB_TIMEOUT"), data.get("timeout"))
        spool = env.get("SESSIONHUB_SPOOL") or _str(data.get("spool_path"))
        self.spool_path = os.path.expanduser(spool or os.path.join(home, "spool.jsonl"))
        self.spool_max = _parse_count(
            env.get("SESSIONHUB_SPOOL_MAX_EVENTS"), data.get("spool_max_events"), SPOOL_MAX_EVENTS
        )

    def _read_file(self) -> dict:
        """Load the JSON config file; a missing or broken file counts as empty."""
        try:
            with open(self.config_path, encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            self.file_error = f"cannot read {self.config_path}: {exc}"
            return {}
        return data if isinstance(data, dict) else {}

    @property
    def configured(self) -> bool:
        """Whether both a server URL and a token are known."""
        return bool(self.url and self.token)

    @property
    def hooks_url(self) -> str:
        """Endpoint that takes Claude Code hook payloads."""
        return self.url + HOOKS_PATH

    def hooks_url_for(self, gateway: str) -> str:
        """Endpoint that takes the hook payloads of a gateway (Claude Code's by default)."""
        return self.url + GATEWAY_PATHS.get(gateway, HOOKS_PATH)

    @property
    def continuity_url(self) -> str:
        """Endpoint that answers with the continuity preamble."""
        return self.url + CONTINUITY_PATH


def _str(value: object) -> str:
    """Return value if it is a string, else an empty string."""
    return value if isinstance(value, str) else ""


def _parse_count(env_value: object, file_value: object, default: int) -> int:
    """A positive count from the environment or the config file, else the default."""
    for value in (env_value, file_value):
        try:
            number = int(str(value).strip()) if value not in (None, "") else 0
        except ValueError:
            continue
        if number > 0:
            return number
    return default


def _clean_base_url(url: str) -> str:
    """Normalise the server URL to its base (no trailing slash or API path)."""
    url = url.strip().rstrip("/")
    for suffix in (*GATEWAY_PATHS.values(), CONTINUITY_PATH, MCP_PATH, "/api/v1", "/api"):
        if url.endswith(suffix):
            url = url[: -len(suffix)].rstrip("/")
            break
    return url


def _parse_timeout(*candidates: object) -> float:
    """Pick the first usable timeout (seconds) and keep it within sane bounds."""
    for value in candidates:
        if value is None or value == "":
            continue
        try:
            seconds = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
        if seconds == seconds:  # not NaN
            return min(max(seconds, 0.2), 120.0)
    return DEFAULT_TIMEOUT


# --------------------------------------------------------------------------- logging


def log(message: str, path: str | None = None) -> None:
    """Append one line to the client's log file, rotating it past 1 MB; never raises."""
    try:
        path = path or os.path.join(sessionhub_dir(), "hook.log")
        _ensure_dir(os.path.dirname(path))
        try:
            if os.path.getsize(path) > LOG_MAX_BYTES:
                os.replace(path, path + ".1")
        except OSError:
            pass
        line = f"{_utc_now()} pid={os.getpid()} {message}".replace("\n", " ")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with open(fd, "a", encoding="utf-8", errors="replace") as handle:
            handle.write(line[:4000] + "\n")
    except Exception:  # noqa: S110, BLE001 - the log is best effort by design
        pass


def _ensure_dir(path: str) -> None:
    """Create a private folder if it does not exist yet."""
    if path and not os.path.isdir(path):
        os.makedirs(path, mode=0o700, exist_ok=True)


def _utc_now(now: float | None = None) -> str:
    """UTC time (now by default) as ISO-8601 with milliseconds and a Z."""
    now = time.time() if now is None else now
    millis = int(now * 1000) % 1000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{millis:03d}Z"


# --------------------------------------------------------------------------- deadline


class Deadline:
    """A total time budget: network work stops early so the spool can still be written."""

    def __init__(self, seconds: float, reserve: float = SPOOL_RESERVE) -> None:
        self.start = time.monotonic()
        self.end = self.start + seconds
        self.net_end = self.end - min(reserve, seconds / 4)

    def remaining(self) -> float:
        """Seconds left for the whole run."""
        return self.end - time.monotonic()

    def net_remaining(self) -> float:
        """Seconds left for network calls."""
        return self.net_end - time.monotonic()


# --------------------------------------------------------------------------- transport


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


# --------------------------------------------------------------------------- locking


class FileLock:
    """An exclusive advisory lock on a side file (flock; msvcrt on Windows)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self, wait_until: float | None) -> bool:
        """Take the lock, polling until the monotonic time wait_until (None: try once)."""
        _ensure_dir(os.path.dirname(self.path))
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        while True:
            try:
                _lock_fd(fd)
            except OSError:
                if wait_until is None or time.monotonic() >= wait_until:
                    os.close(fd)
                    return False
                time.sleep(0.005)
                continue
            self.fd = fd
            return True

    def release(self) -> None:
        """Drop the lock."""
        if self.fd is None:
            return
        try:
            _unlock_fd(self.fd)
        finally:
            os.close(self.fd)
            self.fd = None


def _lock_fd(fd: int) -> None:
    """Take a non-blocking exclusive lock on fd, raising OSError when it is held."""
    try:
        import fcntl
    except ImportError:  # Windows
        import msvcrt

        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]  # Windows only
        return
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _unlock_fd(fd: int) -> None:
    """Release a lock taken by _lock_fd."""
    try:
        import fcntl
    except ImportError:
        import msvcrt

        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]  # Windows only
        return
    fcntl.flock(fd, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- spool


class Spool:
    """The JSONL file of events waiting to be sent, one complete posted body per line.

    Two locks: ``.lock`` guards the file's content and is held only for quick reads and
    writes; ``.flush.lock`` is held by the one process that is sending the spool, so two
    hooks never send the same spooled events at once. When the content lock cannot be had
    in time an event goes to a ``.pending-*`` side file that the next flush merges in.
    """

    def __init__(self, path: str, max_events: int = SPOOL_MAX_EVENTS) -> None:
        self.path = path
        self.max_events = max_events
        self.lock_path = path + ".lock"
        self.flush_lock_path = path + ".flush.lock"
        self.pending_prefix = os.path.basename(path) + ".pending-"

    def _pending_files(self) -> list[str]:
        """Side files written while the content lock was busy, oldest first."""
        folder = os.path.dirname(self.path) or "."
        try:
            names = [n for n in os.listdir(folder) if n.startswith(self.pending_prefix)]
        except OSError:
            return []
        paths = [os.path.join(folder, n) for n in names]
        return sorted(paths, key=lambda p: (_mtime(p), p))

    def has_events(self) -> bool:
        """Cheap check (no lock) for anything waiting."""
        try:
            if os.path.getsize(self.path) > 0:
                return True
        except OSError:
            pass
        return bool(self._pending_files())

    def count(self) -> int:
        """Number of waiting events (no lock; for status)."""
        total = 0
        for path in [self.path, *self._pending_files()]:
            try:
                with open(path, "rb") as handle:
                    total += sum(1 for line in handle if line.strip())
            except OSError:
                continue
        return total

    def append(self, events: list[dict], deadline: Deadline) -> None:
        """Add events at the end of the spool, under the content lock."""
        data = "".join(json.dumps(e, ensure_ascii=True) + "\n" for e in events).encode()
        _ensure_dir(os.path.dirname(self.path))
        lock = FileLock(self.lock_path)
        if lock.acquire(time.monotonic() + max(deadline.remaining(), 0.0)):
            try:
                _append_bytes(self.path, data)
                self._bound()
            finally:
                lock.release()
            return
        import uuid

        side = f"{self.path}.pending-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        _append_bytes(side, data)
        log(f"spool busy: {len(events)} event(s) parked in {side}")

    def snapshot(self, deadline: Deadline) -> list[tuple[str, str]] | None:
        """Merge side files, then return (event_id, line) for each waiting event, in order."""
        lock = FileLock(self.lock_path)
        if not lock.acquire(time.monotonic() + max(deadline.remaining(), 0.0)):
            return None
        try:
            self._merge_pending()
            return _read_spool_lines(self.path)
        finally:
            lock.release()

    def _bound(self) -> None:
        """Keep at most ``max_events`` lines, dropping the oldest (call with the content
        lock held). Only a large spool is read: events pile up only while the server is
        away or refuses the token."""
        try:
            if os.path.getsize(self.path) <= self.max_events * SPOOL_LINE_MIN_BYTES:
                return
            with open(self.path, "rb") as handle:
                lines = [line for line in handle.read().splitlines() if line.strip()]
        except OSError:
            return
        dropped = len(lines) - self.max_events
        if dropped <= 0:
            return
        tmp = f"{self.path}.tmp-{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(b"".join(line + b"\n" for line in lines[dropped:]))
        os.replace(tmp, self.path)
        log(f"spool over capacity ({self.max_events} events): dropped the {dropped} oldest")

    def _merge_pending(self) -> None:
        """Move side files into the spool (call with the content lock held)."""
        for side in self._pending_files():
            try:
                with open(side, "rb") as handle:
                    data = handle.read()
                if data and not data.endswith(b"\n"):
                    data += b"\n"
                _append_bytes(self.path, data)
                os.unlink(side)
            except OSError as exc:
                log(f"cannot merge {side}: {exc}")

    def remove(self, event_ids: set[str], deadline: Deadline) -> bool:
        """Rewrite the spool without the given events (temp file + atomic replace)."""
        lock = FileLock(self.lock_path)
        # Removing late is harmless (the server dedupes), so give up rather than overrun.
        if not lock.acquire(time.monotonic() + max(deadline.remaining(), 0.0)):
            return False
        try:
            kept = [line for eid, line in _read_spool_lines(self.path) if eid not in event_ids]
            if not kept:
                if os.path.exists(self.path):
                    os.unlink(self.path)
                return True
            tmp = f"{self.path}.tmp-{os.getpid()}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write("".join(line + "\n" for line in kept).encode())
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
            return True
        finally:
            lock.release()


def _mtime(path: str) -> float:
    """Modification time, or 0 when the file vanished."""
    try:
        return os.path.getmtime(path)
    except OSError:
        return 0.0


def _append_bytes(path: str, data: bytes) -> None:
    """Append bytes to a private file in one write."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _read_spool_lines(path: str) -> list[tuple[str, str]]:
    """Parse the spool: (event_id, raw line) per event, first copy of each id kept."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            raw_lines = handle.read().splitlines()
    except FileNotFoundError:
        return []
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for line in raw_lines:
        line = line.strip()
        if not line:
            continue
        try:
            event = json.loads(line)
            event_id = event["sessionhub"]["event_id"]
        except (ValueError, KeyError, TypeError):
            log(f"dropping unreadable spool line: {line[:200]}")
            continue
        if not isinstance(event_id, str) or event_id in seen:
            continue
        seen.add(event_id)
        out.append((event_id, line))
    return out


# --------------------------------------------------------------------------- transcript


def read_transcript(path: str, sidechain: bool | None = False) -> tuple[str | None, str | None]:
    """Return (final assistant text, reasoning tail) from a Claude Code transcript.

    Only the end of the file is read. ``sidechain`` selects main-conversation lines
    (False), subagent lines (True) or all of them (None).
    """
    try:
        size = os.path.getsize(path)
    except (OSError, TypeError, ValueError):
        return None, None
    window = TRANSCRIPT_WINDOW
    while True:
        records, truncated = _read_tail_records(path, size, window)
        final, tail = _summarise(records, sidechain)
        if (final and tail) or not truncated or window >= TRANSCRIPT_WINDOW_MAX:
            return final, tail
        window *= 4  # a very long last message: look further back, within a cap


def _read_tail_records(
    path: str, size: int, window: int, kinds: tuple[str, ...] = ("assistant",)
) -> tuple[list[dict], bool]:
    """Parse the whole JSON lines of these record types found in the last `window` bytes
    of the file."""
    start = max(0, size - window)
    with open(path, "rb") as handle:
        handle.seek(start)
        data = handle.read(size - start)
    if start > 0:
        newline = data.find(b"\n")
        data = data[newline + 1 :] if newline >= 0 else b""
    records = []
    marks = [f'"{kind}"'.encode() for kind in kinds]
    for line in data.split(b"\n"):
        # Cheap filter: only lines of these types matter, and a half-written last line
        # fails to parse and is skipped.
        if not any(mark in line for mark in marks):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("type") in kinds:
            records.append(record)
    return records, start > 0


def _summarise(records: list[dict], sidechain: bool | None) -> tuple[str | None, str | None]:
    """Join split messages by id, then pick the last text and the thinking tail."""
    order: list[str] = []
    blocks_by_id: dict[str, list[dict]] = {}
    for index, record in enumerate(records):
        if sidechain is not None and bool(record.get("isSidechain")) != sidechain:
            continue
        message = record.get("message")
        if not isinstance(message, dict) or _api_error(record, message):
            continue
        content = message.get("content")
        if isinstance(content, str):
            blocks = [{"type": "text", "text": content}]
        elif isinstance(content, list):
            blocks = [b for b in content if isinstance(b, dict)]
        else:
            continue
        key = str(message.get("id") or record.get("uuid") or f"line-{index}")
        if key not in blocks_by_id:
            blocks_by_id[key] = []
            order.append(key)
        blocks_by_id[key].extend(blocks)

    final = None
    for key in reversed(order):
        texts = [
            b["text"]
            for b in blocks_by_id[key]
            if b.get("type") == "text" and isinstance(b.get("text"), str) and b["text"].strip()
        ]
        if texts:
            final = "\n\n".join(t.strip() for t in texts)
            break

    thoughts: list[str] = []
    collected = 0
    for key in reversed(order):
        for block in reversed(blocks_by_id[key]):
            thought = block.get("thinking") if block.get("type") == "thinking" else None
            if isinstance(thought, str) and thought.strip():
                thoughts.append(thought.strip())
                collected += len(thought)
        if collected > TAIL_CHARS:
            break
    tail = tail_at_word_boundary("\n\n".join(reversed(thoughts)), TAIL_CHARS)
    return final, tail or None


_TAIL_BREAKS = ("\n", ". ", "! ", "? ")
# Words that make a secret nearby recognisable (``password =``, ``Bearer``, ``-----BEGIN``,
# ``docker login -p``...): a cut just after one would keep the secret without them.
_NAMING_WORDS = tuple(
    "pass pwd secret token key auth bearer basic cred begin login discord cookie session".split()
)
TAIL_STRETCH = 4  # a tail may reach back this many times TAIL_CHARS to a paragraph start


def _may_name_a_secret(piece: str) -> bool:
    """Whether a piece of text holds an operator, a quote, a --flag or a naming word."""
    lowered = piece.lower()
    return (
        any(c in piece for c in "=:\"'`")
        or lowered.startswith("-")
        or " -" in lowered
        or any(word in lowered for word in _NAMING_WORDS)
    )


def _api_error(record: dict, message: dict) -> bool:
    """Claude Code's own text for a failed API call ("API Error: ..."): never final words."""
    return bool(record.get("isApiErrorMessage")) or message.get("model") == "<synthetic>"


def api_error_record(path: str) -> dict | None:
    """The newest main-conversation assistant line, when it is Claude Code's text for a
    failed API call (the turn ended with StopFailure); else None."""
    for record in reversed(_transcript_window(path)):
        message = record.get("message")
        if record.get("isSidechain") or not isinstance(message, dict):
            continue
        return record if _api_error(record, message) else None
    return None


def _transcript_window(path: str, kinds: tuple[str, ...] = ("assistant",)) -> list[dict]:
    """The records of these types in the transcript's last TRANSCRIPT_WINDOW bytes; []
    when unreadable."""
    try:
        size = os.path.getsize(path)
        records, _ = _read_tail_records(path, size, TRANSCRIPT_WINDOW, kinds)
    except (OSError, TypeError, ValueError):
        return []
    return records


def transcript_model(path: str) -> str | None:
    """The model of the newest real assistant message (headless sessions name it nowhere
    else)."""
    for record in reversed(_transcript_window(path)):
        message = record.get("message")
        if isinstance(message, dict) and not _api_error(record, message):
            model = message.get("model")
            if isinstance(model, str) and model:
                return model[:200]
    return None


# How much of a transcript's head is read for the session it continues: a forked or
# resumed transcript names it in its first records, but Claude Code may write large
# bookkeeping records (system prompt and tool schemas) before them.
TRANSCRIPT_HEAD = 512 * 1024
CONTINUATION_OPENING = "This session is being continued from a previous conversation"


def transcript_predecessor(path: str, own_id: str) -> str | None:
    """The id of the earlier session a transcript continues, from its first records: a
    ``forkedFrom`` session, a copied record that still names another session (a resume
    that minted a new id copies the conversation so), the session a copied answer was
    requested in (a fork), or the transcript a continuation summary names. None when the
    transcript names no other session (or cannot be read)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(TRANSCRIPT_HEAD)
    except (OSError, TypeError, ValueError):
        return None
    lines = data.split(b"\n")
    if len(data) == TRANSCRIPT_HEAD:
        lines = lines[:-1]  # the last line may be cut
    own = own_id.encode("utf-8", "replace")
    for line in lines:
        # Cheap filter, for the hot path: a record of this session names it in every id it
        # holds; only a record that names something else, or a summary, is parsed.
        if not (
            b"forkedFrom" in line
            or b"continued from a previous" in line
            or (b"essionId" in line and line.count(b"essionId") > line.count(own))
        ):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        found = _named_session(record, own_id)
        if found:
            return found
    return None


def _named_session(record: dict, own_id: str) -> str | None:
    """Another session a transcript record names, if any."""
    forked = record.get("forkedFrom")
    if isinstance(forked, dict) and _other_id(forked.get("sessionId"), own_id):
        return forked["sessionId"]
    if record.get("type") in ("user", "assistant", "system"):
        for key in ("sessionId", "requestSessionId"):
            if _other_id(record.get(key), own_id):
                return record[key]
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        content = " ".join(
            b.get("text", "")
            for b in content
            if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    summary = (
        record.get("type") == "user"
        and isinstance(content, str)
        and (record.get("isCompactSummary") or content.lstrip().startswith(CONTINUATION_OPENING))
    )
    if summary and isinstance(content, str):
        for named in _transcript_ids(content):
            if named != own_id:
                return named
    return None


def _other_id(value: object, own_id: str) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 200 and value != own_id


def _transcript_ids(text: str) -> list[str]:
    """Session ids of the ``<uuid>.jsonl`` transcript paths a text names."""
    found = []
    at = text.find(".jsonl")
    while at != -1:
        candidate = text[max(0, at - 36) : at]
        if _uuid_shaped(candidate):
            found.append(candidate)
        at = text.find(".jsonl", at + 6)
    return found


def _uuid_shaped(text: str) -> bool:
    if len(text) != 36 or any(text[i] != "-" for i in (8, 13, 18, 23)):
        return False
    return all(c in "0123456789abcdefABCDEF" for c in text.replace("-", ""))


INTERRUPTED_PREFIX = "[Request interrupted by user"


def transcript_turn_state(path: str) -> dict | None:
    """How the main conversation's last turn ended, when the transcript says more than
    the hook: an API error Claude Code wrote in the model's place (releases without
    StopFailure fire Stop after it), or the user interrupting the turn. None otherwise."""
    for record in _records_from_the_end(path):
        if record.get("isSidechain"):
            continue
        message = record.get("message")
        if not isinstance(message, dict):
            continue
        if record.get("type") == "user":
            content = message.get("content")
            texts = (
                [content]
                if isinstance(content, str)
                else [b.get("text", "") for b in content or [] if isinstance(b, dict)]
                if isinstance(content, list)
                else []
            )
            if any(isinstance(t, str) and t.startswith(INTERRUPTED_PREFIX) for t in texts):
                return {"interrupted": True}
            if any(isinstance(t, str) and t.strip() for t in texts):
                return None  # a prompt after the last answer: nothing to say of that answer
            continue
        if _api_error(record, message):
            return api_error_state(record)
        return None
    return None


USAGE_FIELDS = (
    ("input_tokens", "input"),
    ("output_tokens", "output"),
    ("cache_read_input_tokens", "cache_read"),
    ("cache_creation_input_tokens", "cache_write"),
)


def transcript_turn_usage(path: str) -> dict | None:
    """The tokens the main conversation's last turn used: the ``usage`` of each assistant
    message since the user's last prompt, summed (input, output, cache reads and writes)
    with the model. Claude Code writes one line per content block of a message, each with
    the message's usage so far: the last line of each message id counts, once."""
    by_message: dict = {}
    model = ""
    for record in _records_from_the_end(path):
        if record.get("isSidechain"):
            continue
        message = record.get("message")
        if not isinstance(message, dict):
            continue
        if record.get("type") == "user":
            content = message.get("content")
            if isinstance(content, str) and content.strip():
                break  # the prompt that opened the turn
            if isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") == "text" for b in content
            ):
                break
            continue
        usage = message.get("usage")
        if not isinstance(usage, dict) or message.get("model") == "<synthetic>":
            continue
        key = message.get("id") or id(record)
        if key not in by_message:  # newest first: the first line met is the message's last
            by_message[key] = usage
            model = model or str(message.get("model") or "")
    if not by_message:
        return None
    total: dict = {name: 0 for _, name in USAGE_FIELDS}
    for usage in by_message.values():
        for field, name in USAGE_FIELDS:
            value = usage.get(field)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                total[name] += value
    total["messages"] = len(by_message)
    if model:
        total["model"] = model[:200]
    return total


def _records_from_the_end(path: str) -> Iterator[dict]:
    """The user and assistant records of the transcript's last TRANSCRIPT_WINDOW bytes,
    newest first, each parsed only when asked for (the caller stops at the first that
    tells it what it wants)."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            handle.seek(max(0, size - TRANSCRIPT_WINDOW))
            data = handle.read()
    except (OSError, TypeError, ValueError):
        return
    lines = data.split(b"\n")
    if size > TRANSCRIPT_WINDOW:
        lines = lines[1:]  # the first line may be cut
    for line in reversed(lines):
        if b'"assistant"' not in line and b'"user"' not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a half-written last line
        if isinstance(record, dict) and record.get("type") in ("assistant", "user"):
            yield record


def api_error_state(record: dict) -> dict:
    """What an API error record says of the error: its kind, HTTP status and type."""
    state: dict = {"api_error": str(record.get("error") or "unknown")[:100]}
    status = record.get("apiErrorStatus")
    if isinstance(status, int) and not isinstance(status, bool):
        state["status"] = status
    kind = record.get("apiErrorType")
    if isinstance(kind, str) and kind:
        state["type"] = kind[:100]
    return state


def tail_at_word_boundary(text: str, limit: int = TAIL_CHARS) -> str:
    """Return the trailing `limit` characters of text, starting on a whole word, but
    never between a secret and what names it (``password = "...``, ``Bearer ...``, a
    key's BEGIN line): when the 200 characters before the cut name one, the tail reaches
    back to the start of the paragraph, else the line, the cut falls in (up to
    TAIL_STRETCH times `limit`) for the server to redact it whole; failing that, it
    starts at the next line or sentence."""
    text = text.strip()
    if len(text) <= limit:
        return text
    start = len(text) - limit
    space = next((i for i in range(start, len(text)) if text[i].isspace()), len(text))
    if text[start - 1].isspace():
        space = start
    kept = text[space:].lstrip()
    first_word = kept.split(None, 1)[0] if kept else ""
    if not _may_name_a_secret(text[max(0, start - 200) : space] + " " + first_word):
        return kept
    floor = max(0, len(text) - TAIL_STRETCH * limit)
    for boundary in ("\n\n", "\n"):
        at = text.rfind(boundary, floor, start)
        if at != -1:
            return text[at:].strip()
    if floor == 0:
        return text
    ends = [(text.find(b, start), len(b)) for b in _TAIL_BREAKS]
    after = [at + size for at, size in ends if at != -1]
    return text[min(after) :].strip() if after else ""


def _normalise_text(text: str) -> str:
    """Collapse whitespace for loose comparison."""
    return " ".join(text.split())


# --------------------------------------------------------------------------- git


def find_git_remote(cwd: str, deadline: Deadline | None = None) -> str | None:
    """The origin URL of the repository around cwd, credentials removed; no git needed."""
    found = _find_git_dir(cwd)
    if not found:
        return None
    git_dir, work_tree = found
    config_dir = git_dir
    try:
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as handle:
            common = handle.read().strip()
        if common:
            config_dir = os.path.normpath(os.path.join(git_dir, common))
    except OSError:
        pass
    try:
        with open(os.path.join(config_dir, "config"), encoding="utf-8", errors="replace") as h:
            text = h.read()
    except OSError:
        return None
    remotes = parse_git_remotes(text)
    url = remotes.get("origin") or next(iter(remotes.values()), None)
    if not url and "[include" in text.lower():
        url = _git_remote_via_git(work_tree, deadline)
    return strip_credentials(url) if url else None


def _find_git_dir(cwd: str) -> tuple[str, str] | None:
    """Walk up from cwd to the nearest .git (folder, or file pointing at the real one)."""
    try:
        current = os.path.abspath(os.path.expanduser(cwd))
    except (TypeError, ValueError):
        return None
    while True:
        dot_git = os.path.join(current, ".git")
        if os.path.isdir(dot_git):
            return dot_git, current
        if os.path.isfile(dot_git):
            try:
                with open(dot_git, encoding="utf-8") as handle:
                    first = handle.readline().strip()
            except OSError:
                return None
            if first.lower().startswith("gitdir:"):
                target = first.split(":", 1)[1].strip()
                return os.path.normpath(os.path.join(current, target)), current
            return None
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def parse_git_remotes(text: str) -> dict[str, str]:
    """Read remote names and URLs from git config text."""
    import re

    remotes: dict[str, str] = {}
    section: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            end = line.find("]")
            header = line[1:end].strip() if end > 0 else ""
            line = line[end + 1 :].strip() if end > 0 else ""
            match = re.match(r'^remote\s+"((?:[^"\\]|\\.)*)"$', header, re.IGNORECASE)
            dotted = re.match(r"^remote\.(.+)$", header, re.IGNORECASE)
            if match:
                section = match.group(1).replace('\\"', '"').replace("\\\\", "\\")
            elif dotted:
                section = dotted.group(1)
            else:
                section = None
        if not line or line[0] in "#;" or section is None:
            continue
        key, sep, value = line.partition("=")
        if not sep or key.strip().lower() != "url" or section in remotes:
            continue
        remotes[section] = _git_config_value(value)
    return remotes


def _git_config_value(value: str) -> str:
    """Unquote a git config value and drop a trailing comment."""
    out = []
    quoted = False
    index = 0
    value = value.strip()
    while index < len(value):
        ch = value[index]
        if ch == '"':
            quoted = not quoted
        elif ch == "\\" and index + 1 < len(value):
            index += 1
            out.append({"n": "\n", "t": "\t"}.get(value[index], value[index]))
        elif ch in "#;" and not quoted:
            break
        else:
            out.append(ch)
        index += 1
    return "".join(out).strip()


def _git_remote_via_git(work_tree: str, deadline: Deadline | None) -> str | None:
    """Ask git itself (only when the config uses includes we do not follow)."""
    budget = 0.3 if deadline is None else min(0.3, deadline.net_remaining())
    if budget <= 0.05:
        return None
    import subprocess

    try:
        done = subprocess.run(  # noqa: S603 - fixed argument list, no shell
            ["git", "-C", work_tree, "config", "--get", "remote.origin.url"],  # noqa: S607
            capture_output=True,
            text=True,
            timeout=budget,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def strip_credentials(url: str) -> str:
    """Remove user:password@ (or a bare token@) from an http(s) remote URL."""
    import re

    url = url.strip()
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/?#]*@)(.*)$", url)
    if not match:
        return url  # scp-like git@host:org/repo has a user name, not a secret
    scheme, userinfo, rest = match.groups()
    if scheme.lower() in ("http://", "https://"):
        return scheme + rest
    user = userinfo[:-1].split(":", 1)[0]  # ssh://git:pw@host keeps only "git"
    return f"{scheme}{user}@{rest}" if user else scheme + rest


# --------------------------------------------------------------------------- events


def build_event(
    hook: dict, deadline: Deadline, queued: str = "", gateway: str = CLAUDE_CODE
) -> dict:
    """Return the hook payload plus the ``sessionhub`` key the server expects; a queued
    event takes its id and time from its queue file's name."""
    meta = _base_meta(hook, deadline, queued)
    if gateway != CLAUDE_CODE:
        return build_cli_event(hook, deadline, meta, gateway)
    name = _event_name(hook)
    path = hook.get("transcript_path")
    path = os.path.expanduser(path) if isinstance(path, str) and path else ""
    session_id = hook.get("session_id")
    if name in PREDECESSOR_EVENTS and path and isinstance(session_id, str):
        earlier = transcript_predecessor(path, session_id)
        if earlier:
            meta["resumed_from"] = earlier
    if name in TRANSCRIPT_EVENTS:
        final, tail = _transcript_extras(hook, deadline)
        last = hook.get("last_assistant_message")
        if isinstance(last, str) and last.strip():
            final = last
        if final:
            meta["final_message"] = final
        if tail:
            meta["reasoning_tail"] = tail
        if path and not hook.get("model"):
            model = transcript_model(path)
            if model:
                meta["model"] = model
        if path and name != "SubagentStop":
            turn = transcript_turn_state(path)
            if turn:
                meta["turn"] = turn
        if path and name == "Stop":
            usage = transcript_turn_usage(path)
            if usage:
                meta["usage"] = usage
    if name == "StopFailure":
        # Named by the failed message, so that the copy SessionEnd sends (Claude Code
        # may kill this hook first) is the same event.
        failed = _failed_turn(hook)
        if failed is not None:
            meta["event_id"] = failed["sessionhub"]["event_id"]
            meta["turn"] = failed["sessionhub"]["turn"]
    meta["client"] = CLIENT
    event = dict(hook)
    event["sessionhub"] = meta
    return fit_event(event)


def _base_meta(hook: dict, deadline: Deadline, queued: str) -> dict:
    """The event id and time (a queued event's from its file's name) and the git remote."""
    if queued:
        stamp, _, random = os.path.basename(queued).partition("-")
        seconds = int(stamp) / 1e9
        meta: dict = {
            "event_id": _uuid4(bytes.fromhex(random[:32])),
            "occurred_at": _utc_now(seconds),
        }
    else:
        meta = {"event_id": _uuid4(), "occurred_at": _utc_now()}
    developer = os_developer()
    if developer:
        meta["developer"] = developer
    cwd = hook.get("cwd")
    if isinstance(cwd, str) and cwd:
        try:
            remote = find_git_remote(cwd, deadline)
        except Exception as exc:  # noqa: BLE001 - an odd repository must not cost the event
            remote = None
            log(f"git remote lookup failed: {exc!r}")
        if remote:
            meta["git_remote"] = remote
    return meta


def os_developer() -> str:
    """Who runs the agent, as ``user@host`` (the OS user and the machine): SessionHub
    shows sessions per developer by it. ``SESSIONHUB_DEVELOPER`` overrides; set it empty
    ("-") to send nothing."""
    chosen = os.environ.get("SESSIONHUB_DEVELOPER", "").strip()
    if chosen:
        return "" if chosen == "-" else chosen[:200]
    user = os.environ.get("USER") or os.environ.get("LOGNAME") or os.environ.get("USERNAME")
    if not user:
        try:
            import pwd

            user = pwd.getpwuid(os.getuid()).pw_name
        except (ImportError, KeyError, OSError, AttributeError):
            user = ""
    try:
        host = os.uname().nodename
    except AttributeError:  # Windows
        host = os.environ.get("COMPUTERNAME", "")
    host = host.split(".")[0]
    if not user:
        return ""
    return f"{user}@{host}"[:200] if host else user[:200]


def _failed_turn(hook: dict) -> dict | None:
    """A StopFailure event for the failed API call the transcript ends with, if it does."""
    path = hook.get("transcript_path")
    if not isinstance(path, str) or not path:
        return None
    record = api_error_record(os.path.expanduser(path))
    if record is None or not isinstance(record.get("uuid"), str):
        return None
    blocks = record["message"].get("content")
    texts = (
        [b.get("text") for b in blocks or [] if isinstance(b, dict)]
        if isinstance(blocks, list)
        else [blocks]
    )
    stamp = record.get("timestamp")
    meta = {
        "event_id": f"stopfailure:{record['uuid']}"[:200],
        "occurred_at": stamp if isinstance(stamp, str) else _utc_now(),
        "client": CLIENT,
        "turn": api_error_state(record),
    }
    event = {k: hook[k] for k in ("session_id", "transcript_path", "cwd") if k in hook}
    event |= {
        "hook_event_name": "StopFailure",
        "error": str(record.get("error") or "unknown"),
        "last_assistant_message": " ".join(t for t in texts if isinstance(t, str)),
        "sessionhub": meta,
    }
    return event


def fit_event(event: dict) -> dict:
    """Cut oversized strings (with a marker saying how much) until the event is small
    enough to send; what was cut is listed in ``sessionhub.trimmed`` (path → characters)."""
    limit = MAX_STRING_CHARS
    trimmed: dict[str, int] = {}
    while True:
        cut = _cut_strings(event, limit, "", trimmed)
        if len(json.dumps(cut, ensure_ascii=True)) <= MAX_EVENT_BYTES or limit <= 1024:
            break
        limit //= 4
    assert isinstance(cut, dict)  # a dict's copy is a dict
    if trimmed:
        cut["sessionhub"]["trimmed"] = trimmed
        total = sum(trimmed.values())
        log(
            f"{_event_name(event) or 'event'}: {total} characters cut from {len(trimmed)} string(s)"
        )
    return cut


# Strings whose end matters more than their middle when they must be cut.
ENDS_KEPT = frozenset({"last_assistant_message", "sessionhub.final_message"})


def _cut_strings(value: object, limit: int, path: str, trimmed: dict[str, int]) -> object:
    """A copy of value with every string longer than limit cut (not sessionhub's own ids)."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        cut = len(value) - limit
        trimmed[path or "$"] = cut
        marker = f"… [sessionhub-hook cut {cut} of {len(value)} characters] …"
        if path in ENDS_KEPT:
            # A final message ends with what was done: its head and its end are kept.
            head = limit // 4
            return value[:head] + marker + value[len(value) - (limit - head) :]
        return value[:limit] + marker[:-2]
    if isinstance(value, dict):
        return {
            k: _cut_strings(v, limit, f"{path}.{k}" if path else str(k), trimmed)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_cut_strings(v, limit, f"{path}[{i}]", trimmed) for i, v in enumerate(value)]
    return value


def _uuid4(random: bytes | None = None) -> str:
    """A random (version 4) UUID, without importing the uuid module on the hot path."""
    raw = bytearray(random or os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _transcript_extras(hook: dict, deadline: Deadline) -> tuple[str | None, str | None]:
    """Final message and reasoning tail for a turn or session end, if readable."""
    name = _event_name(hook)
    path = hook.get("transcript_path")
    sidechain: bool | None = False
    if name == "SubagentStop":
        agent_path = hook.get("agent_transcript_path")
        if isinstance(agent_path, str) and agent_path:
            path, sidechain = agent_path, None
        else:
            sidechain = True  # older versions kept subagent lines in the main file
    if not isinstance(path, str) or not path:
        return None, None
    path = os.path.expanduser(path)
    last = hook.get("last_assistant_message")
    try:
        final, tail = read_transcript(path, sidechain)
        # Claude Code may run Stop before the transcript has the last message: if the
        # payload's message is not there yet, wait a moment (bounded) and read again.
        tries = 0
        while (
            isinstance(last, str)
            and last.strip()
            and name != "SessionEnd"
            and not _same_text(final, last)
            and tries < 2
            and deadline.net_remaining() > 0.5
        ):
            tries += 1
            time.sleep(0.075)
            final, tail = read_transcript(path, sidechain)
        return final, tail
    except Exception as exc:  # noqa: BLE001 - the transcript is optional extra data
        log(f"transcript {path!r} unreadable: {exc!r}")
        return None, None


def _event_name(hook: dict) -> str:
    """The hook's event name, or an empty string when it is missing or odd."""
    name = hook.get("hook_event_name")
    return name if isinstance(name, str) else ""


def _same_text(found: str | None, expected: str) -> bool:
    """Loose match between the transcript's final text and the payload's."""
    if not found:
        return False
    a, b = _normalise_text(found), _normalise_text(expected)
    return a == b or a.endswith(b) or b.endswith(a)


def _parse_hook(raw: bytes) -> dict | None:
    """Decode the hook JSON; anything else (empty, invalid, not an object) gives None."""
    if not raw or not raw.strip():
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        try:
            data = json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            log(f"ignoring stdin that is not JSON ({len(raw)} bytes)")
            return None
    if not isinstance(data, dict):
        log("ignoring stdin JSON that is not an object")
        return None
    return data


def _note_results(reply: Reply, context: str) -> None:
    """Log every event the server rejected (they are not sent again)."""
    data = reply.data
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        return
    for item in results:
        if isinstance(item, dict) and item.get("status") == "rejected":
            log(f"{context}: server rejected event {item.get('event_id')}: {_short(item)}")


# --------------------------------------------------------------------------- sending


def _batches(items: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """Cut spooled lines into batches of at most 1000 events and about 1 MB."""
    out: list[list[tuple[str, str]]] = []
    batch: list[tuple[str, str]] = []
    size = 2
    for item in items:
        item_size = len(item[1]) + 1
        if batch and (len(batch) >= MAX_BATCH_EVENTS or size + item_size > MAX_BATCH_BYTES):
            out.append(batch)
            batch, size = [], 2
        batch.append(item)
        size += item_size
    if batch:
        out.append(batch)
    return out


def _gateway_batches(items: list[tuple[str, str]]) -> list[tuple[str, list[tuple[str, str]]]]:
    """Batches of spooled lines, in order, each of one gateway (each has its endpoint)."""
    runs: list[tuple[str, list[tuple[str, str]]]] = []
    for item in items:
        gateway = _line_gateway(item[1])
        if runs and runs[-1][0] == gateway:
            runs[-1][1].append(item)
        else:
            runs.append((gateway, [item]))
    return [(gateway, batch) for gateway, run in runs for batch in _batches(run)]


def _line_gateway(line: str) -> str:
    """The gateway a spooled event came from (written by ``build_cli_event``)."""
    if '"gateway"' not in line:
        return CLAUDE_CODE
    try:
        gateway = json.loads(line)["sessionhub"].get("gateway")
    except (ValueError, KeyError, TypeError, AttributeError):
        return CLAUDE_CODE
    return gateway if gateway in GATEWAY_PATHS else CLAUDE_CODE


def _send_batch(
    cfg: Config,
    batch: list[tuple[str, str]],
    deadline: Deadline,
    done: set[str],
    gateway: str = CLAUDE_CODE,
) -> str:
    """Send one batch; returns ok, transient or stop. Bad batches are split to find culprits."""
    body = ("[" + ",".join(line for _, line in batch) + "]").encode("utf-8")
    reply = post_json(cfg.hooks_url_for(gateway), cfg.token, body, deadline)
    if reply.kind == "ok":
        _note_results(reply, "spool")
        done.update(eid for eid, _ in batch)
        return "ok"
    if reply.kind == "transient":
        log(f"spool flush deferred: {reply.describe()}")
        return "transient"
    if reply.code in (400, 413):
        if len(batch) > 1:
            middle = len(batch) // 2
            first = _send_batch(cfg, batch[:middle], deadline, done, gateway)
            if first != "ok":
                return first
            return _send_batch(cfg, batch[middle:], deadline, done, gateway)
        log(f"spool: dropping event {batch[0][0]} refused for good: {reply.describe()}")
        done.add(batch[0][0])
        return "ok"
    if reply.code in AUTH_CODES:
        log(f"spool flush refused, token not accepted, events kept: {reply.describe()}")
        return "auth"
    # 404/redirect/bad URL: a configuration problem. Keep the spool for later.
    log(f"spool flush refused, events kept: {reply.describe()}")
    return "stop"


def flush_spool(cfg: Config, spool: Spool, deadline: Deadline) -> str:
    """Send waiting events in order; returns empty, busy, ok, transient, auth (the token
    was refused) or stop."""
    if not spool.has_events():
        return "empty"
    flush_lock = FileLock(spool.flush_lock_path)
    if not flush_lock.acquire(None):
        return "busy"  # another hook is sending the spool right now
    try:
        items = spool.snapshot(deadline)
        if items is None:
            return "busy"
        if not items:
            return "empty"
        done: set[str] = set()
        state = "ok"
        for gateway, batch in _gateway_batches(items):
            state = _send_batch(cfg, batch, deadline, done, gateway)
            if state != "ok":
                break
        if done and not spool.remove(done, deadline):
            log(f"could not update the spool in time; {len(done)} sent event(s) will be resent")
        elif done:
            log(f"spool: {len(done)} waiting event(s) sent")  # so status shows the recovery
        return state
    finally:
        flush_lock.release()


def _queued_files(folder: str) -> list[str]:
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(QUEUE_SUFFIX))
    except OSError:
        return []
    return [os.path.join(folder, n) for n in names]


def move_queue(cfg: Config, spool: Spool, deadline: Deadline, wait: float = 0.0) -> int:
    """Turn queued hook events into events at the end of the spool, oldest first; returns
    how many. One process at a time (``.move.lock``); 0 when another one is at it."""
    folder = queue_dir()
    if not os.path.isdir(folder):
        return 0
    lock = FileLock(os.path.join(folder, ".move.lock"))
    if not lock.acquire(time.monotonic() + wait if wait else None):
        return 0
    try:
        paths = _queued_files(folder)[:MAX_BATCH_EVENTS]
        events = []
        for path in paths:
            try:
                with open(path, "rb") as handle:
                    hook = _parse_hook(handle.read())
            except OSError as exc:
                log(f"cannot read queued event {path}: {exc}")
                continue
            if hook is not None and cfg.configured:
                gateway = _queued_gateway(path)
                events.append(build_event(hook, deadline, queued=path, gateway=gateway))
        if events:
            spool.append(events, Deadline(max(deadline.remaining(), 1.0)))
        for path in paths:  # in the spool now (or unreadable): the server dedupes by id
            _unlink_quietly(path)
        return len(events)
    finally:
        lock.release()


def _queued_gateway(path: str) -> str:
    """The gateway a queued hook named (``<time>-<random>.codex.hook``); Claude Code's
    when it named none."""
    name = os.path.basename(path)[: -len(QUEUE_SUFFIX)]
    gateway = name.partition(".")[2]
    return gateway if gateway in GATEWAY_PATHS else CLAUDE_CODE


def _unlink_quietly(path: str) -> None:
    try:  # noqa: SIM105 - contextlib is one more import on the hook's path
        os.unlink(path)
    except OSError:
        pass


def drain(cfg: Config, linger: float = SENDER_LINGER) -> None:
    """The sender: move the queue into the spool and send it, until nothing has been
    queued for ``linger`` seconds. Only one runs (``.sender.lock``); it keeps the
    ``.sender`` heartbeat fresh so queued hooks know they need not start another."""
    folder = queue_dir()
    _ensure_dir(folder)
    lock = FileLock(os.path.join(folder, ".sender.lock"))
    if not lock.acquire(None):
        return
    beat = os.path.join(folder, ".sender")
    spool = Spool(cfg.spool_path, cfg.spool_max)
    try:
        idle_since = time.monotonic()
        while True:
            _heartbeat(beat)
            moved = move_queue(cfg, spool, Deadline(cfg.timeout), wait=1.0)
            if moved or spool.has_events():
                state = flush_spool(cfg, spool, Deadline(FLUSH_COMMAND_TIMEOUT))
                if state in ("transient", "auth", "stop") and not moved:
                    break  # the server is away: later hooks and ``flush`` retry
            if moved:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since >= linger:
                # Gone first, then one last look: a hook that queued after this look
                # finds no heartbeat and starts a sender of its own.
                _unlink_quietly(beat)
                if not _queued_files(folder):
                    break
            time.sleep(0.05)
    finally:
        _unlink_quietly(beat)
        lock.release()


def _heartbeat(path: str) -> None:
    try:
        os.utime(path)
    except FileNotFoundError:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    except OSError:
        pass


def run_hook(
    raw: bytes, cfg: Config, out: TextIO, deadline: Deadline, gateway: str = CLAUDE_CODE
) -> None:
    """Hook mode: send (or spool) the event, and print the preamble on SessionStart."""
    hook = _parse_hook(raw)
    if hook is None:
        return
    if cfg.file_error:
        log(cfg.file_error)
    if not cfg.configured:
        _log_unconfigured_once()
        return
    event = build_event(hook, deadline, gateway=gateway)
    if gateway != CLAUDE_CODE and cli_event_waits(hook, gateway):
        event = settle_cli_event(hook, event, gateway)
        deadline = Deadline(cfg.timeout)  # the wait was the CLI's work, not the network's
    spool = Spool(cfg.spool_path, cfg.spool_max)
    name = _event_name(hook) or "event"
    event_id = event["sessionhub"]["event_id"]
    events = [event]
    if name == "SessionEnd" and gateway == CLAUDE_CODE:
        # Claude Code may kill the StopFailure hook of a turn that failed just before the
        # end: send it again (same event id; the server keeps one).
        failed = _failed_turn(hook)
        events = [failed, event] if failed is not None else events

    move_queue(cfg, spool, deadline, wait=0.2)  # the turn's tool uses go before it
    state = flush_spool(cfg, spool, deadline)
    if state in ("transient", "auth"):
        # The server is away, or refuses the token the spool was just sent with: do not
        # ask it twice; the events wait behind the spooled ones.
        if state == "auth":
            log(f"{name} {event_id} kept in the spool: the token is refused")
        spool.append(events, deadline)
        return
    sent, posted = events, event
    if name == PROMPT_HOOKS.get(gateway, "UserPromptSubmit"):
        # The answer to this post is read (a manual continue may wait in it); the spooled
        # copy, sent later by whoever flushes, says nothing of the kind.
        marked = dict(event)
        marked["sessionhub"] = {**event["sessionhub"], "reads_context": True}
        sent, posted = [marked if item is event else item for item in events], marked
    body = sent[0] if len(sent) == 1 else sent
    url = cfg.hooks_url_for(gateway)
    reply = post_json(url, cfg.token, json.dumps(body).encode("utf-8"), deadline)
    if reply.kind == "transient":
        log(f"{name} {event_id} spooled: {reply.describe()}")
        spool.append(events, deadline)
        # A slow answer is not an absent server: the continuity request carries the event
        # and starts the session itself when the spooled start has not landed.
        if reply.code == 0 and deadline.net_remaining() > 0.3:
            _maybe_print_preamble(cfg, hook, posted, out, deadline, gateway)
        return
    if reply.kind == "permanent" and reply.code in AUTH_CODES:
        log(
            f"{name} {event_id} kept in the spool, token refused: {reply.describe()}; "
            "fix SESSIONHUB_TOKEN (`sessionhub-hook status` checks it), the next hook "
            "or `sessionhub-hook flush` sends what waits"
        )
        spool.append(events, deadline)
        return
    if reply.kind == "permanent":
        log(f"{name} {event_id} not accepted, not retried: {reply.describe()}")
        return
    _note_results(reply, name)
    _maybe_print_preamble(cfg, hook, posted, out, deadline, gateway, _waiting(reply, hook))


def _waiting(reply: Reply, hook: dict) -> list[str]:
    """The preambles the answer to a prompt hands over for this session: a manual
    continue an admin made while the session ran (delivered once, at its next prompt)."""
    entries = reply.data.get("continuity") if isinstance(reply.data, dict) else None
    if not isinstance(entries, list):
        return []
    found = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        preamble = entry.get("preamble")
        if isinstance(preamble, str) and preamble.strip():
            found.append(preamble)
            log(f"manual continue delivered to {hook.get('session_id')}: {entry.get('record_ids')}")
    return found


def _maybe_print_preamble(
    cfg: Config,
    hook: dict,
    event: dict,
    out: TextIO,
    deadline: Deadline,
    gateway: str = CLAUDE_CODE,
    waiting: list[str] | None = None,
) -> None:
    """Continuity at the moments it is handed over: a project-level preamble at
    SessionStart, at the session's first prompt a preamble chosen by relevance, and at any
    prompt a manual continue waiting for the session (``waiting``); printed as one
    answer."""
    name = _event_name(hook)
    at_start = name == "SessionStart" and str(hook.get("source")) not in NO_PREAMBLE_SOURCES
    at_prompt = name == PROMPT_HOOKS.get(gateway, "UserPromptSubmit")
    texts = list(waiting or [])
    if at_start or (at_prompt and _first_prompt(hook)):
        preamble = _ask_preamble(cfg, hook, deadline, event, gateway)
        if preamble:
            texts.insert(0, preamble)
    if texts:
        context = {"hookEventName": name or "SessionStart", "additionalContext": "\n\n".join(texts)}
        out.write(json.dumps({"hookSpecificOutput": context}) + "\n")
        out.flush()


def _ask_preamble(
    cfg: Config,
    hook: dict,
    deadline: Deadline,
    event: dict | None = None,
    gateway: str = CLAUDE_CODE,
) -> str:
    """Ask for the continuity preamble, to be added the way the hook adds context
    (``hookSpecificOutput.additionalContext`` of SessionStart or of the prompt's hook:
    Claude Code's and Codex CLI's UserPromptSubmit, Gemini CLI's BeforeAgent); empty when
    there is none."""
    session_id = hook.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        return ""
    name = _event_name(hook)
    request: dict = {"source": gateway, "session_id": session_id}
    if event is not None:
        request["event"] = event  # what the start carries: the server can start the session
    prompt = user_prompt(hook, gateway)
    if name == PROMPT_HOOKS.get(gateway, "UserPromptSubmit") and prompt is not None:
        request["prompt"] = prompt[:20_000]
    body = json.dumps(request).encode("utf-8")
    reply = post_json(cfg.continuity_url, cfg.token, body, deadline)
    if reply.kind != "ok":
        log(f"continuity for {session_id} unavailable: {reply.describe()}")
        return ""
    preamble = reply.data.get("preamble") if isinstance(reply.data, dict) else None
    if not isinstance(preamble, str) or not preamble.strip():
        return ""
    return preamble


FIRST_PROMPT_MARKERS_KEPT = 14 * 86400  # seconds


def _first_prompt(hook: dict) -> bool:
    """Whether this is the session's first prompt seen here: a marker file per session,
    created atomically (two hooks racing cannot both be first); old markers are swept."""
    import hashlib

    session_id = hook.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        return False
    folder = os.path.join(sessionhub_dir(), "first-prompt")
    name = hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()[:32]
    try:
        _ensure_dir(folder)
        fd = os.open(os.path.join(folder, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
    except FileExistsError:
        return False
    except OSError as exc:
        log(f"first-prompt marker unavailable: {exc!r}")
        return False
    try:
        cutoff = time.time() - FIRST_PROMPT_MARKERS_KEPT
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.stat().st_mtime < cutoff:
                    os.unlink(entry.path)
    except OSError:
        pass
    return True


def _log_unconfigured_once() -> None:
    """Note once in the log that no URL/token is set; later calls stay silent."""
    marker = os.path.join(sessionhub_dir(), ".unconfigured-logged")
    if os.path.exists(marker):
        return
    log("SESSIONHUB_URL/SESSIONHUB_TOKEN not set (nor in config.json): events are not sent")
    try:
        _ensure_dir(os.path.dirname(marker))
        with open(marker, "w", encoding="utf-8") as handle:
            handle.write(_utc_now() + "\n")
    except OSError:
        pass


# --------------------------------------------------------------------------- install


def hook_entry(event: str, command: str | None = None) -> dict:
    """The settings entry that runs this client for one event.

    By default the exec form (``command`` + ``args``, no shell): the absolute path of the
    interpreter running ``install`` (no PATH lookup, no pyenv shim) with ``-S`` (no site
    packages: the client needs only the standard library) and the absolute path of this
    file. With ``--command CMD`` (a settings file shared with a team) the shell form
    ``CMD`` is written as given: ``CMD hook --queue`` for the async events (queued for the
    sender), ``CMD hook --detach`` for the detached ones.
    """
    queued = event in ASYNC_EVENTS and hasattr(os, "fork")
    mode = "--queue" if queued else "--detach" if event in DETACHED_EVENTS else ""
    if command:
        entry: dict = {"type": "command", "command": f"{command} hook {mode}" if mode else command}
    elif queued:
        args = ["-S", queue_script_path()]
        entry = {"type": "command", "command": os.path.abspath(sys.executable), "args": args}
    else:
        args = ["-S", CLIENT_PATH, "hook", *([mode] if mode else [])]
        entry = {"type": "command", "command": os.path.abspath(sys.executable), "args": args}
    entry["timeout"] = INSTALL_HOOK_TIMEOUT
    if event in ASYNC_EVENTS:
        entry["async"] = True
    return entry


def _is_ours(entry: object) -> bool:
    """Whether a settings hook entry runs this client."""
    if not isinstance(entry, dict) or entry.get("type", "command") != "command":
        return False
    command = entry.get("command")
    args = entry.get("args")
    words = [command] + (args if isinstance(args, list) else [])
    return any(isinstance(w, str) and any(m in w for m in OUR_COMMAND_MARKERS) for w in words)


def merge_hooks(settings: dict, command: str | None = None) -> dict:
    """Add or update this client's entries in a settings dict, keeping all others."""
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError('"hooks" in the settings file is not an object')
    for event in INSTALL_EVENTS:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise ValueError(f'"hooks.{event}" in the settings file is not a list')
        found = False
        emptied = []
        for group in groups:
            entries = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(entries, list):
                continue
            kept = []
            for entry in entries:
                if _is_ours(entry):
                    if found:
                        continue  # a duplicate from an earlier hand edit
                    found = True
                    timeout = entry.get("timeout", INSTALL_HOOK_TIMEOUT)
                    entry.clear()
                    entry.update(hook_entry(event, command), timeout=timeout)
                kept.append(entry)
            if entries and not kept:
                emptied.append(group)
            group["hooks"] = kept
        groups[:] = [g for g in groups if not any(g is e for e in emptied)]
        if not found:
            group = {"hooks": [hook_entry(event, command)]}
            if event in TOOL_EVENTS:
                group = {"matcher": "*", **group}
            groups.append(group)
    return settings


def remove_hooks(settings: dict) -> dict:
    """Remove this client's entries from a settings dict, keeping all others."""
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return settings
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept_groups = []
        for group in groups:
            entries = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(entries, list) and any(_is_ours(e) for e in entries):
                group["hooks"] = [e for e in entries if not _is_ours(e)]
                if not group["hooks"]:
                    continue
            kept_groups.append(group)
        if kept_groups:
            hooks[event] = kept_groups
        elif groups:
            del hooks[event]
    if not hooks:
        del settings["hooks"]
    return settings


def settings_path(scope: str, explicit: str | None) -> str:
    """Where Claude Code's settings live for the chosen scope."""
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    if scope == "project":
        return os.path.abspath(os.path.join(".claude", "settings.json"))
    return os.path.join(os.path.expanduser("~"), ".claude", "settings.json")


def _load_json_file(path: str) -> dict:
    """Read a JSON object from a file; a missing or empty file is an empty object."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return {}
    if not text.strip():
        return {}
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return data


def _write_json_file(path: str, data: dict, mode: int = 0o644) -> bool:
    """Write JSON atomically; returns False when the file already had that content."""
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    try:
        with open(path, encoding="utf-8") as handle:
            if handle.read() == text:
                return False
    except FileNotFoundError:
        pass
    folder = os.path.dirname(path)
    if folder == sessionhub_dir():
        _ensure_dir(folder)
        os.chmod(folder, 0o700)  # config, spool and log are private: so is their folder
    elif folder:
        os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    return True


# --------------------------------------------------------------------------- Codex, Gemini
#
# Codex CLI and Gemini CLI run command hooks much as Claude Code does: the hook's JSON on
# stdin (``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``), context
# returned as ``hookSpecificOutput.additionalContext``. Their hooks pass ``--gateway
# codex`` or ``--gateway gemini-cli``; the event goes to that gateway's endpoint with the
# same spool, deadline and queue. What differs is here: which transcript holds the final
# message, the reasoning and the model (Codex's rollout JSONL under ~/.codex/sessions,
# Gemini CLI's chat recording under ~/.gemini/tmp), which hook carries the prompt, how
# the hooks are registered (``hooks.json`` with Codex's trust of each hook,
# ``settings.json``), and Gemini CLI's PreCompress, which fires before every model call
# whether or not the history is then compressed.

PROMPT_HOOKS = {
    CLAUDE_CODE: "UserPromptSubmit",
    CODEX: "UserPromptSubmit",
    GEMINI_CLI: "BeforeAgent",
}
# Hooks whose event carries what the CLI's transcript says of the turn or the session.
CODEX_TRANSCRIPT_EVENTS = frozenset({"Stop", "SubagentStop", "Interrupt", "SessionEnd"})
GEMINI_TRANSCRIPT_EVENTS = frozenset({"AfterAgent", "SessionEnd"})
# How long Gemini CLI's PreCompress waits for the CLI to show whether it compressed: the
# compression is two model calls; the wait ends as soon as the CLI records either.
GEMINI_COMPRESSION_WAIT = 180.0
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "fish"})

# Each hook the installer registers, and how it runs: in place (the CLI reads its answer
# or it must go before what follows), queued (the answer is never read: a few lines write
# it down for the sender), or detached (the CLI does not wait for it, or waiting is
# long). Codex clamps SessionEnd and Interrupt to 3 s; the client's own deadline is 2 s.
CLI_HOOKS: dict[str, dict[str, str]] = {
    CODEX: {
        "SessionStart": "",
        "UserPromptSubmit": "",
        "PreToolUse": "--queue",
        "PermissionRequest": "--queue",
        "PostToolUse": "--queue",
        "PreCompact": "--queue",
        "PostCompact": "--detach",
        "SubagentStart": "--queue",
        "SubagentStop": "--queue",
        "Stop": "",
        "Interrupt": "--detach",
        "SessionEnd": "",
    },
    GEMINI_CLI: {
        "SessionStart": "",
        "BeforeAgent": "",
        "BeforeTool": "--queue",
        "AfterTool": "--queue",
        "Notification": "--queue",
        "PreCompress": "--detach",
        "AfterAgent": "",
        # Gemini CLI does not wait for SessionEnd: as it exits, the child sends.
        "SessionEnd": "--detach",
    },
}
CLI_NAMES = {CODEX: "Codex CLI", GEMINI_CLI: "Gemini CLI"}

# Noted before a hook detaches, while the CLI still waits for it: the process that started
# the hook (the CLI, or the shell it ran the command in) and, for Gemini CLI's PreCompress,
# how far the chat recording went.
_noted: dict = {"parent": 0, "transcript_size": None}


def remember_cli_process(raw: bytes, gateway: str) -> None:
    """Note what a detached hook needs to know of the moment it was called."""
    _noted["parent"] = os.getppid()
    if gateway == GEMINI_CLI and b"PreCompress" in raw:
        hook = _parse_hook(raw)
        if hook is not None and _event_name(hook) == "PreCompress":
            _noted["transcript_size"] = _file_size(hook.get("transcript_path"))


def build_cli_event(hook: dict, deadline: Deadline, meta: dict, gateway: str) -> dict:
    """The hook body plus the ``sessionhub`` block, for Codex CLI or Gemini CLI."""
    meta["gateway"] = gateway
    name = _event_name(hook)
    try:
        if gateway == CODEX and name in CODEX_TRANSCRIPT_EVENTS | {"PostCompact"}:
            _codex_extras(hook, meta)
        elif gateway == GEMINI_CLI and name in GEMINI_TRANSCRIPT_EVENTS:
            _gemini_extras(hook, meta)
        elif gateway == GEMINI_CLI and name == "PreCompress":
            # Where the recording stood when the hook was called: what the CLI writes
            # after it says whether the history was compressed (``settle_cli_event``).
            size = _noted["transcript_size"]
            meta["transcript_size"] = (
                _file_size(hook.get("transcript_path")) if size is None else size
            )
    except Exception as exc:  # noqa: BLE001 - the transcript is optional extra data
        log(f"{gateway} transcript unreadable: {exc!r}")
    meta["client"] = CLIENT
    event = dict(hook)
    event["sessionhub"] = meta
    return fit_event(event)


def _codex_extras(hook: dict, meta: dict) -> None:
    name = _event_name(hook)
    path = hook.get("transcript_path")
    if name == "SubagentStop" and isinstance(hook.get("agent_transcript_path"), str):
        path = hook["agent_transcript_path"]
    if not isinstance(path, str) or not path:
        return
    found = codex_rollout(os.path.expanduser(path))
    if name == "PostCompact":
        if found["compact_summary"]:
            meta["compact_summary"] = found["compact_summary"]
        return
    last = hook.get("last_assistant_message")
    if found["final"] and not (isinstance(last, str) and last.strip()):
        meta["final_message"] = found["final"]
    if found["tail"]:
        meta["reasoning_tail"] = found["tail"]
    if found["model"] and not hook.get("model"):
        meta["model"] = found["model"]
    if found["tokens"] is not None:
        meta["token_count"] = found["tokens"]


def _gemini_extras(hook: dict, meta: dict) -> None:
    path = hook.get("transcript_path")
    if not isinstance(path, str) or not path:
        return
    found = gemini_chat(os.path.expanduser(path))
    last = hook.get("prompt_response")
    if found["final"] and not (isinstance(last, str) and last.strip()):
        meta["final_message"] = found["final"]
    if found["tail"]:
        meta["reasoning_tail"] = found["tail"]
    if found["model"]:
        meta["model"] = found["model"]


def user_prompt(hook: dict, gateway: str) -> str | None:
    """The user's words in a prompt hook: Gemini CLI puts the context hooks returned (the
    preamble among them) before them as ``<hook_context>`` blocks."""
    prompt = hook.get("prompt")
    if not isinstance(prompt, str):
        return None
    if gateway == GEMINI_CLI:
        import re

        prompt = re.sub(r"\A\s*(?:<hook_context>.*?</hook_context>\s*)+", "", prompt, flags=re.S)
    return prompt


def _jsonl_tail(path: str, window: int = TRANSCRIPT_WINDOW) -> list[dict]:
    """The JSON objects on the whole lines of a JSONL file's last ``window`` bytes."""
    size = os.path.getsize(path)
    start = max(0, size - window)
    with open(path, "rb") as handle:
        handle.seek(start)
        data = handle.read(size - start)
    if start > 0:
        newline = data.find(b"\n")
        data = data[newline + 1 :] if newline >= 0 else b""
    records = []
    for line in data.split(b"\n"):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # blank, or half written
        if isinstance(record, dict):
            records.append(record)
    return records


def _texts_of(parts: object, kinds: tuple[str, ...]) -> list[str]:
    if not isinstance(parts, list):
        return []
    return [
        p["text"]
        for p in parts
        if isinstance(p, dict) and p.get("type") in kinds and isinstance(p.get("text"), str)
    ]


def codex_rollout(path: str) -> dict:
    """What a Codex rollout's end says: the last assistant words (not a compaction's
    summary, which Codex records as the model's answer to its request), the reasoning
    tail, the model, the session's total tokens and the newest compaction's summary."""
    found: dict = {"final": None, "tail": None, "model": None, "tokens": None}
    found["compact_summary"] = None
    reasoning: list[str] = []
    for record in _jsonl_tail(path):
        kind, payload = record.get("type"), record.get("payload")
        if not isinstance(payload, dict):
            continue
        inner = payload.get("type")
        if kind == "turn_context" and isinstance(payload.get("model"), str):
            found["model"] = payload["model"][:200]
        elif kind == "event_msg" and inner == "token_count":
            usage = (payload.get("info") or {}).get("total_token_usage") or {}
            if isinstance(usage.get("total_tokens"), int):
                found["tokens"] = usage["total_tokens"]
        elif kind == "event_msg" and inner == "task_complete":
            last = payload.get("last_agent_message")
            if isinstance(last, str) and last.strip():
                found["final"] = last
        elif kind == "response_item" and inner == "message" and payload.get("role") == "assistant":
            text = "\n\n".join(
                t.strip() for t in _texts_of(payload.get("content"), ("output_text",))
            )
            if text:
                found["final"] = text
        elif kind == "response_item" and inner == "reasoning":
            raw = _texts_of(payload.get("content"), ("reasoning_text", "text"))
            reasoning += raw or _texts_of(payload.get("summary"), ("summary_text",))
        elif kind == "compacted":
            message = payload.get("message")
            found["compact_summary"] = found["final"] or (
                message if isinstance(message, str) else None
            )
            found["final"] = None  # that answer was the summary, not the agent's words
    found["tail"] = tail_at_word_boundary("\n\n".join(t.strip() for t in reasoning if t.strip()))
    found["tail"] = found["tail"] or None
    return found


def gemini_chat(path: str) -> dict:
    """What a Gemini CLI chat recording's end says: the last words of the model, its
    thoughts since the user's last prompt and the model that answered."""
    found: dict = {"final": None, "tail": None, "model": None}
    thoughts: list[str] = []
    seen: dict[str, int] = {}  # a message is written again as it grows: the last copy holds
    for record in _jsonl_tail(path):
        kind = record.get("type")
        if kind == "user" and _gemini_user_words(record.get("content")):
            thoughts, seen = [], {}  # a new prompt: the turn's thoughts start again
        if kind != "gemini":
            continue
        if isinstance(record.get("model"), str) and record["model"]:
            found["model"] = record["model"][:200]
        content = record.get("content")
        text = content if isinstance(content, str) else " ".join(_texts_of(content, ("text",)))
        if text.strip():
            found["final"] = text.strip()
        mine = [
            ": ".join(
                x for x in (t.get("subject"), t.get("description")) if isinstance(x, str) and x
            )
            for t in record.get("thoughts") or []
            if isinstance(t, dict)
        ]
        key = str(record.get("id"))
        if key in seen:
            del thoughts[seen[key] :]
        seen[key] = len(thoughts)
        thoughts += [t for t in mine if t]
    found["tail"] = tail_at_word_boundary("\n\n".join(thoughts)) or None
    return found


def _gemini_user_words(content: object) -> bool:
    """Whether a user record is a prompt (text), not a tool's answer or the CLI's context."""
    if isinstance(content, str):
        return bool(content.strip())
    for part in content if isinstance(content, list) else []:
        text = part.get("text") if isinstance(part, dict) else None
        if (
            isinstance(text, str)
            and text.strip()
            and not text.lstrip().startswith("<session_context>")
        ):
            return True
    return False


def _file_size(path: object) -> int:
    try:
        return os.path.getsize(os.path.expanduser(path)) if isinstance(path, str) else 0
    except OSError:
        return 0


def cli_event_waits(hook: dict, gateway: str) -> bool:
    """Whether the event must wait for the CLI before it is sent: Gemini CLI's
    PreCompress, which is a compaction only if the CLI then compresses."""
    return gateway == GEMINI_CLI and _event_name(hook) == "PreCompress"


def settle_cli_event(hook: dict, event: dict, gateway: str) -> dict:
    """Gemini CLI's PreCompress, once the chat recording shows what followed it: the
    history rewritten with a summary (compressed), or the model's next answer (not)."""
    meta = event["sessionhub"]
    start = meta.pop("transcript_size", 0)
    path = hook.get("transcript_path")
    compacted, summary = False, ""
    if isinstance(path, str) and path:
        compacted, summary = watch_gemini_compression(
            os.path.expanduser(path), start, _cli_pid(), GEMINI_COMPRESSION_WAIT
        )
    meta["compacted"] = compacted
    if summary:
        meta["compact_summary"] = summary
    return fit_event(event)


def watch_gemini_compression(path: str, start: int, pid: int, limit: float) -> tuple[bool, str]:
    """(compressed, summary): read what the CLI records after ``start`` until it decides;
    (False, '') when it exits or ``limit`` seconds pass first."""
    until = time.monotonic() + limit
    offset, pending = start, b""
    while True:
        alive = _process_alive(pid)
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                data = handle.read()
        except OSError:
            data = b""
        offset += len(data)
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            rewritten = record.get("$set")
            messages = rewritten.get("messages") if isinstance(rewritten, dict) else None
            if isinstance(messages, list):
                return True, _gemini_summary(messages)
            if record.get("type") == "gemini":
                return False, ""
        if not alive or time.monotonic() >= until:
            return False, ""
        time.sleep(0.1)


def _gemini_summary(messages: list) -> str:
    """The summary a compression put first in the history: the first user text after the
    CLI's own session context."""
    for message in messages:
        if not isinstance(message, dict) or message.get("type") != "user":
            continue
        content = message.get("content")
        parts = [{"text": content}] if isinstance(content, str) else content
        texts = [
            p["text"].strip()
            for p in (parts if isinstance(parts, list) else [])
            if isinstance(p, dict) and isinstance(p.get("text"), str) and p["text"].strip()
        ]
        text = "\n".join(texts)
        if text and not text.startswith("<session_context>"):
            return text
    return ""


def _cli_pid() -> int:
    """The CLI that started the hook: the parent, or the parent's parent when the parent
    is the shell the CLI ran the hook's command in (0 when unknown)."""
    pid = int(_noted["parent"])
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as handle:
            if handle.read().strip() not in SHELLS:
                return pid
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return pid


def _process_alive(pid: int) -> bool:
    if pid <= 1:
        return True  # unknown: only the time limit ends the wait
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process: it exists
    return True


# Installing into Codex CLI and Gemini CLI.


def add_gateway_options(parser: argparse.ArgumentParser) -> None:
    """``--codex`` / ``--gemini-cli``: install into (or remove from) that CLI instead."""
    which = parser.add_mutually_exclusive_group()
    for gateway, where in ((CODEX, "~/.codex/hooks.json"), (GEMINI_CLI, "~/.gemini/settings.json")):
        which.add_argument(
            f"--{gateway}",
            dest="gateway",
            action="store_const",
            const=gateway,
            help=f"{CLI_NAMES[gateway]}'s hooks ({where}; --project: the same under ./)",
        )
    if parser.prog.endswith(" install"):
        parser.add_argument(
            "--codex-bin",
            metavar="PATH",
            help="the codex command that trusts the hooks (default: codex on PATH)",
        )


def cli_settings_path(gateway: str, scope: str, explicit: str | None) -> str:
    """Where a CLI keeps its hooks for the chosen scope (Codex honours CODEX_HOME)."""
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    folder, name = (".codex", "hooks.json") if gateway == CODEX else (".gemini", "settings.json")
    if scope == "project":
        return os.path.abspath(os.path.join(folder, name))
    if gateway == CODEX and os.environ.get("CODEX_HOME"):
        return os.path.join(os.path.expanduser(os.environ["CODEX_HOME"]), name)
    return os.path.join(os.path.expanduser("~"), folder, name)


def cli_hook_command(gateway: str, mode: str, command: str | None = None) -> str:
    """The shell command a CLI runs for one hook (both run hooks through a shell)."""
    import shlex

    tail = f"--gateway {gateway}"
    if command:
        return f"{command} hook {mode} {tail}" if mode else f"{command} hook {tail}"
    python = shlex.quote(os.path.abspath(sys.executable))
    if mode == "--queue" and hasattr(os, "fork"):
        return f"{python} -S {shlex.quote(queue_script_path())} {tail}"
    mode = "--detach" if mode == "--queue" else mode  # no fork, no queue: the whole client
    words = [python, "-S", shlex.quote(CLIENT_PATH), "hook", *([mode] if mode else []), tail]
    return " ".join(words)


def cli_hook_entry(gateway: str, event: str, command: str | None = None) -> dict:
    """One hook entry: Codex counts its timeout in seconds, Gemini CLI in milliseconds."""
    run = cli_hook_command(gateway, CLI_HOOKS[gateway][event], command)
    if gateway == CODEX:
        return {"type": "command", "command": run, "timeout": INSTALL_HOOK_TIMEOUT}
    return {
        "name": "sessionhub",
        "type": "command",
        "command": run,
        "timeout": INSTALL_HOOK_TIMEOUT * 1000,
    }


def merge_cli_hooks(settings: dict, gateway: str, command: str | None = None) -> dict:
    """Add or update this client's entries in a CLI's hooks, keeping every other hook
    (and, in Gemini CLI's settings.json, every other setting)."""
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError('"hooks" in the settings file is not an object')
    for event in CLI_HOOKS[gateway]:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise ValueError(f'"hooks.{event}" in the settings file is not a list')
        wanted = cli_hook_entry(gateway, event, command)
        found = False
        for group in groups:
            entries = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(entries, list):
                continue
            kept = []
            for entry in entries:
                if _is_ours(entry):
                    if found:
                        continue  # a duplicate from an earlier hand edit
                    found = True
                    entry.clear()
                    entry.update(wanted)
                kept.append(entry)
            group["hooks"] = kept
        groups[:] = [g for g in groups if not (isinstance(g, dict) and g.get("hooks") == [])]
        if not found:
            groups.append({"hooks": [wanted]})
    return settings


def install_cli_hooks(args: argparse.Namespace, out: TextIO) -> None:
    """``install --codex`` / ``--gemini-cli``: write the hooks, then (Codex) trust them."""
    gateway = args.gateway
    path = cli_settings_path(gateway, args.scope or "user", args.settings)
    try:
        current = _load_json_file(path)
    except ValueError as exc:  # Gemini CLI's settings may hold comments: left as they are
        raise ValueError(f"{path} is not plain JSON, so it is left alone ({exc})") from exc
    settings = merge_cli_hooks(current, gateway, args.hook_command)
    if not args.hook_command:
        write_queue_script()
    changed = _write_json_file(path, settings)
    out.write(f"{'updated' if changed else 'unchanged'}: {path}\n")
    out.write(f"hook command: {cli_hook_command(gateway, '', args.hook_command)}\n")
    if gateway == CODEX:
        codex_trust_hooks(path, args.codex_bin, out)


def codex_trust_hooks(hooks_file: str, codex_bin: str | None, out: TextIO) -> None:
    """Trust this client's hooks in Codex, as its /hooks screen does: Codex runs a hook
    only once its exact definition is trusted, and remembers that by the definition's
    hash in config.toml (``hooks.state``). Codex's own app server lists the hooks with
    their hashes and writes the trust; the other hooks are left as they are."""
    import shutil

    codex = codex_bin or shutil.which("codex")
    manual = (
        "open codex, type /hooks and trust the SessionHub hooks "
        "(Codex skips a hook nobody trusted, without a word)"
    )
    if not codex:
        out.write(f"codex is not on PATH: {manual}, or run install again with --codex-bin\n")
        return
    try:
        trusted, total = _codex_trust(codex, hooks_file)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        out.write(f"could not trust the hooks through {codex} ({exc}): {manual}\n")
        return
    if total and trusted == total:
        out.write(f"trusted in Codex: {total} hook(s)\n")
    else:
        out.write(f"Codex lists {trusted} of {total} hook(s) as trusted: {manual}\n")


def _codex_trust(codex: str, hooks_file: str) -> tuple[int, int]:
    """(hooks of this client trusted, hooks of this client found) in ``hooks_file``."""
    import subprocess
    import threading

    proc = subprocess.Popen(  # noqa: S603 - the codex the user named, no shell
        [codex, "app-server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    timer = threading.Timer(60, proc.kill)
    timer.start()
    stdin, stdout = proc.stdin, proc.stdout
    assert stdin is not None and stdout is not None  # piped above
    calls = iter(range(1, 100))

    def call(method: str, params: dict) -> dict:
        ident = next(calls)
        stdin.write(json.dumps({"id": ident, "method": method, "params": params}) + "\n")
        stdin.flush()
        for line in stdout:
            message = json.loads(line)
            if message.get("id") != ident:
                continue  # a notification
            if "error" in message:
                raise ValueError(f"{method}: {message['error']}")
            return message["result"]
        raise ValueError(f"{method}: codex app-server closed")

    def ours() -> list[dict]:
        listed = call("hooks/list", {"cwds": [os.getcwd()]})["data"]
        return [
            h
            for entry in listed
            for h in entry.get("hooks") or []
            if os.path.realpath(str(h.get("sourcePath"))) == os.path.realpath(hooks_file)
            and any(m in str(h.get("command")) for m in OUR_COMMAND_MARKERS)
        ]

    try:
        call("initialize", {"clientInfo": {"name": "sessionhub-hook", "version": VERSION}})
        stdin.write(json.dumps({"method": "initialized"}) + "\n")
        stdin.flush()
        pending = {h["key"]: {"trusted_hash": h["currentHash"]} for h in ours()}
        if pending:
            edit = {"keyPath": "hooks.state", "mergeStrategy": "upsert", "value": pending}
            call("config/batchWrite", {"edits": [edit]})
        found = ours()
        return sum(1 for h in found if h.get("trustStatus") == "trusted"), len(found)
    finally:
        timer.cancel()
        stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


# --------------------------------------------------------------------------- MCP server
#
# ``install`` also registers SessionHub's MCP endpoint with Claude Code, so the agent can
# search its team's memory mid-session. The entry names no token: Claude Code runs its
# ``headersHelper`` (this client's ``mcp-headers``) when it connects, which prints the
# Authorization header from the same config file and environment the hooks read. The
# token stays in one place, and a new token from ``install --token`` reaches both.


def mcp_config_path(scope: str, explicit: str | None) -> str:
    """Where Claude Code keeps MCP servers for the scope: ~/.claude.json (user scope) or
    the project's .mcp.json (project scope, a file to commit)."""
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    if scope == "project":
        return os.path.abspath(".mcp.json")
    return os.path.join(os.path.expanduser("~"), ".claude.json")


def mcp_entry(url: str, command: str | None = None) -> dict:
    """The MCP server entry: Streamable HTTP at the server's endpoint, headers from this
    client (``CMD mcp-headers`` with ``--command``, else this interpreter and file)."""
    if command:
        helper = f"{command} mcp-headers"
    else:
        import shlex

        words = [os.path.abspath(sys.executable), "-S", CLIENT_PATH, "mcp-headers"]
        helper = " ".join(shlex.quote(word) for word in words)
    return {"type": "http", "url": _clean_base_url(url) + MCP_PATH, "headersHelper": helper}


def _is_our_mcp(entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    helper = entry.get("headersHelper")
    return isinstance(helper, str) and any(m in helper for m in OUR_COMMAND_MARKERS)


def merge_mcp(config: dict, entry: dict) -> tuple[dict, bool]:
    """Add or update the SessionHub entry under ``mcpServers``; (config, done). A server
    of that name that this client did not write is left alone."""
    servers = config.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise ValueError('"mcpServers" in the MCP config file is not an object')
    current = servers.get(MCP_SERVER_NAME)
    if current is not None and not _is_our_mcp(current):
        return config, False
    servers[MCP_SERVER_NAME] = entry
    return config, True


def remove_mcp(config: dict) -> dict:
    """Remove the SessionHub entry this client wrote, keeping every other server."""
    servers = config.get("mcpServers")
    if isinstance(servers, dict) and _is_our_mcp(servers.get(MCP_SERVER_NAME)):
        del servers[MCP_SERVER_NAME]
    return config


def mcp_headers(cfg: Config) -> dict:
    """What ``mcp-headers`` prints: the Authorization header, or nothing without a token
    (Claude Code then shows the server as needing authentication)."""
    return {"Authorization": f"Bearer {cfg.token}"} if cfg.token else {}


def _install_mcp(args: argparse.Namespace, out: TextIO) -> None:
    cfg = Config()
    path = mcp_config_path(args.scope or "user", args.mcp_config)
    if not cfg.url:
        out.write(f"MCP server not registered: no SessionHub URL yet ({path})\n")
        return
    existing = _load_json_file(path)
    mode = 0o600
    if os.path.exists(path):
        mode = os.stat(path).st_mode & 0o777
    config, done = merge_mcp(existing, mcp_entry(cfg.url, args.hook_command))
    if not done:
        out.write(
            f"MCP server not registered: {path} already has a server named "
            f"{MCP_SERVER_NAME!r} that this client did not write\n"
        )
        return
    changed = _write_json_file(path, config, mode=mode)
    out.write(
        f"{'updated' if changed else 'unchanged'}: {path} (MCP server {MCP_SERVER_NAME!r} at "
        f"{cfg.url + MCP_PATH}; its tools are mcp__{MCP_SERVER_NAME}__*)\n"
    )


# --------------------------------------------------------------------------- CLI


def _parser() -> argparse.ArgumentParser:
    """Build the argument parser (only for subcommands; hook mode never imports argparse)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="sessionhub-hook",
        description="Claude Code (and Codex CLI, Gemini CLI) hook client for SessionHub. "
        "Without a subcommand it reads one hook event on stdin and sends it.",
    )
    parser.add_argument("--version", action="version", version=f"sessionhub-hook {VERSION}")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("hook", help="hook mode (the default): read one event on stdin")
    install = sub.add_parser("install", help="add the hook entries to Claude Code's settings")
    uninstall = sub.add_parser("uninstall", help="remove the hook entries again")
    for p in (install, uninstall):
        scope = p.add_mutually_exclusive_group()
        scope.add_argument(
            "--user",
            dest="scope",
            action="store_const",
            const="user",
            help="~/.claude/settings.json (default)",
        )
        scope.add_argument(
            "--project",
            dest="scope",
            action="store_const",
            const="project",
            help="./.claude/settings.json",
        )
        p.add_argument("--settings", metavar="PATH", help="an explicit settings.json path")
        add_gateway_options(p)
        p.add_argument(
            "--mcp-config",
            metavar="PATH",
            help="where the MCP server entry goes (default: ~/.claude.json, or ./.mcp.json "
            "with --project)",
        )
        p.add_argument(
            "--no-mcp",
            action="store_true",
            help="leave Claude Code's MCP servers alone",
        )
    install.add_argument("--url", help="SessionHub base URL, saved in the config file")
    install.add_argument(
        "--token", help="API token (scope ingest) saved in the config file; - reads it from stdin"
    )
    install.add_argument(
        "--command",
        dest="hook_command",
        metavar="CMD",
        help="the command to register (default: found automatically)",
    )
    sub.add_parser("mcp-headers", help="print the MCP server's headers (Claude Code runs it)")
    sub.add_parser("status", help="show the configuration and the spool")
    sub.add_parser("flush", help="send the spooled events now")
    return parser


def cmd_install(args: argparse.Namespace, out: TextIO) -> None:
    """Write the hook entries (and, with --url/--token, the config file)."""
    if getattr(args, "gateway", None):
        install_cli_hooks(args, out)  # Codex CLI or Gemini CLI
    else:
        path = settings_path(args.scope or "user", args.settings)
        settings = merge_hooks(_load_json_file(path), args.hook_command)
        if not args.hook_command:
            write_queue_script()
        changed = _write_json_file(path, settings)
        out.write(f"{'updated' if changed else 'unchanged'}: {path}\n")
        example = hook_entry("PostToolUse", args.hook_command)
        shown = " ".join([example["command"], *example.get("args", [])])
        out.write(f"hook command: {shown} (async for {', '.join(sorted(ASYNC_EVENTS))})\n")
    if args.url or args.token:
        cfg = Config()
        data = _load_json_file(cfg.config_path)
        if args.url:
            data["url"] = args.url.strip()
        if args.token:
            from_stdin = args.token.strip() == "-"
            token = sys.stdin.readline() if from_stdin else args.token
            data["token"] = token.strip()
        _write_json_file(cfg.config_path, data, mode=0o600)
        out.write(f"config written: {cfg.config_path} (mode 600)\n")
    if not getattr(args, "gateway", None) and not args.no_mcp:
        _install_mcp(args, out)  # Claude Code's MCP servers
    cfg = Config()
    if not cfg.configured:
        out.write(
            "note: no URL/token yet; set SESSIONHUB_URL and SESSIONHUB_TOKEN or run "
            "install again with --url and --token\n"
        )


def write_queue_script() -> None:
    """(Re)write the queue hook beside the config, owner-only, atomically."""
    path = queue_script_path()
    _ensure_dir(os.path.dirname(path))
    tmp = f"{path}.tmp-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(queue_script_source())
    os.replace(tmp, path)


def cmd_uninstall(args: argparse.Namespace, out: TextIO) -> None:
    """Remove this client's hook entries and (for Claude Code) its MCP server, leaving
    every other one alone."""
    gateway = getattr(args, "gateway", None)
    if gateway:
        path = cli_settings_path(gateway, args.scope or "user", args.settings)
    else:
        path = settings_path(args.scope or "user", args.settings)
    if not os.path.exists(path):
        out.write(f"nothing to do: {path} does not exist\n")
    else:
        changed = _write_json_file(path, remove_hooks(_load_json_file(path)))
        out.write(f"{'updated' if changed else 'unchanged'}: {path}\n")
    mcp_path = mcp_config_path(args.scope or "user", args.mcp_config)
    if not gateway and not args.no_mcp and os.path.exists(mcp_path):
        mode = os.stat(mcp_path).st_mode & 0o777
        changed = _write_json_file(mcp_path, remove_mcp(_load_json_file(mcp_path)), mode=mode)
        out.write(f"{'updated' if changed else 'unchanged'}: {mcp_path}\n")


def server_check(cfg: Config, deadline: Deadline) -> str:
    """Ask the server who the token is (``whoami``): one line saying whether it works."""
    if not cfg.configured:
        return "not asked: set SESSIONHUB_URL and SESSIONHUB_TOKEN"
    reply = post_json(cfg.url + WHOAMI_PATH, cfg.token, b"{}", deadline)
    data = reply.data if isinstance(reply.data, dict) else {}
    if reply.kind == "ok":
        scopes = ", ".join(str(s) for s in data.get("scopes") or [])
        works = "ok" if "ingest" in scopes or "admin" in scopes else "WARNING: no ingest scope"
        return f"{works}: token {data.get('token')!s} ({scopes}) of team {data.get('team')!s}" + (
            f" [{data.get('team_name')}]" if data.get("team_name") else ""
        )
    if reply.code in AUTH_CODES:
        message = data.get("message") or reply.describe()
        return (
            f"TOKEN REFUSED (HTTP {reply.code}: {message}); events are kept in the spool "
            "until the token works"
        )
    if reply.code == 404:
        return f"no SessionHub answers at {cfg.url} (HTTP 404): check SESSIONHUB_URL"
    if reply.code:
        return f"answered with an error: {reply.describe()}; events wait in the spool"
    return f"not reachable: {reply.describe()}"


def cmd_status(out: TextIO) -> None:
    """Print the configuration (never the token), whether the server takes the token,
    and the spool size."""
    cfg = Config()
    spool = Spool(cfg.spool_path, cfg.spool_max)
    lines = [
        f"sessionhub-hook {VERSION}",
        f"url:     {cfg.url or '(not set)'}" + (f" [{cfg.url_source}]" if cfg.url else ""),
        f"token:   {'set' if cfg.token else 'not set'}"
        + (f" [{cfg.token_source}]" if cfg.token else ""),
        f"config:  {cfg.config_path}" + ("" if os.path.exists(cfg.config_path) else " (absent)"),
        f"server:  {server_check(cfg, Deadline(max(cfg.timeout, 5.0)))}",
        f"timeout: {cfg.timeout:g} s",
        f"spool:   {cfg.spool_path} ({spool.count()} event(s) waiting, "
        f"at most {cfg.spool_max} kept)",
        f"queue:   {queue_dir()} ({len(_queued_files(queue_dir()))} hook(s) not yet spooled)",
        f"log:     {cfg.log_path}",
    ]
    last = _last_log_line(cfg.log_path)
    if last:
        lines.append(f"last log line: {last}")
    if cfg.file_error:
        lines.append(f"warning: {cfg.file_error}")
    out.write("\n".join(lines) + "\n")


def _last_log_line(path: str) -> str:
    """The newest line of the log, or an empty string."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 4096))
            lines = handle.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""


def cmd_flush(out: TextIO) -> None:
    """Send the whole spool now, with a longer time budget than a hook has."""
    cfg = Config()
    if not cfg.configured:
        out.write("not configured: set SESSIONHUB_URL and SESSIONHUB_TOKEN\n")
        return
    spool = Spool(cfg.spool_path, cfg.spool_max)
    deadline = Deadline(max(cfg.timeout, FLUSH_COMMAND_TIMEOUT))
    while move_queue(cfg, spool, deadline, wait=1.0):  # queued hooks first, oldest first
        pass
    before = spool.count()
    state = "ok"
    while state == "ok" and spool.has_events() and deadline.net_remaining() > 0:
        state = flush_spool(cfg, spool, deadline)
    after = spool.count()
    message = {
        "busy": "another process is sending the spool; try again in a moment",
        "transient": "the server is not reachable right now; events kept",
        "auth": "the server refused the token; events kept until it works "
        "(check it with `sessionhub-hook status`)",
        "stop": "the server refused the batch (see the log); events kept",
    }.get(state, "done")
    out.write(f"sent {max(before - after, 0)}, waiting {after}: {message}\n")


def main(
    argv: list[str] | None = None, stdin: BinaryIO | None = None, stdout: TextIO | None = None
) -> int:
    """Entry point for hook mode and the subcommands; always returns 0."""
    try:
        args = sys.argv[1:] if argv is None else list(argv)
        out = stdout if stdout is not None else sys.stdout
        if args == ["drain"]:
            drain(Config())
            return 0
        if args == ["mcp-headers"]:
            out.write(json.dumps(mcp_headers(Config())) + "\n")
            return 0
        mode = hook_mode(args)
        if mode is not None and mode[0] == "--queue":
            raw = _read_all(stdin or sys.stdin)
            if raw.strip():
                try:
                    named = "" if mode[1] == CLAUDE_CODE else mode[1]
                    queue_event(raw, start_sender=stdin is None, gateway=named)
                except OSError as exc:
                    log(f"cannot queue the event, sending it now: {exc}")
                    run_hook(raw, Config(), out, Deadline(Config().timeout), mode[1])
            return 0
        if mode is not None:
            if os.environ.get("SESSIONHUB_DISABLE", "").strip() in ("1", "true", "yes"):
                return 0
            cfg = Config()
            deadline = Deadline(cfg.timeout)
            source = stdin if stdin is not None else sys.stdin
            if stdin is None and hasattr(source, "isatty") and source.isatty():
                sys.stderr.write(
                    "sessionhub-hook: expects a Claude Code hook event on stdin (see --help)\n"
                )
                return 0
            raw = _read_all(source)
            remember_cli_process(raw, mode[1])
            if mode[0] == "--detach" and stdin is None and _detach():
                return 0  # the parent: Claude Code sees the hook done at once
            run_hook(raw, cfg, out, deadline, mode[1])
            return 0
        import contextlib

        with contextlib.redirect_stdout(out):  # --help and --version go to `out` too
            options = _parser().parse_args(args)
        if options.command == "install":
            cmd_install(options, out)
        elif options.command == "uninstall":
            cmd_uninstall(options, out)
        elif options.command == "status":
            cmd_status(out)
        elif options.command == "flush":
            cmd_flush(out)
        else:
            _parser().print_help(out)
        return 0
    except SystemExit:  # argparse's --help, --version and usage errors
        return 0
    except BaseException as exc:  # noqa: BLE001 - the hook must never fail the agent
        log(f"unexpected error: {exc!r}")
        if args_are_cli(argv):
            sys.stderr.write(f"sessionhub-hook: {exc}\n")
        return 0


def _detach() -> bool:
    """Fork a child in a session of its own that does the sending; True in the parent.

    The child closes the hook's stdin, stdout and stderr (Claude Code waits for them to
    close) and is not in the hook's process group, so Claude Code exiting or killing the
    hook does not reach it. Without fork (Windows) the hook runs in place.
    """
    if not hasattr(os, "fork"):
        return False
    try:
        pid = os.fork()
    except OSError:
        return False
    if pid:
        return True
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
    except OSError:
        pass
    return False


def args_are_cli(argv: list[str] | None) -> bool:
    """Whether main was called for a subcommand (errors may then go to stderr)."""
    args = sys.argv[1:] if argv is None else argv
    return bool(args) and hook_mode(list(args)) is None


def hook_mode(args: list[str]) -> tuple[str, str] | None:
    """(mode, gateway) of a hook-mode call: ``[hook [--queue|--detach] [--gateway NAME]]``
    (no arguments is hook mode too); None for a subcommand. The mode is '' (in place),
    ``--queue`` or ``--detach``; the gateway is Claude Code's unless named."""
    if not args:
        return "", CLAUDE_CODE
    if args[0] != "hook":
        return None
    rest, gateway = args[1:], CLAUDE_CODE
    if rest[-2:-1] == ["--gateway"]:
        gateway, rest = rest[-1], rest[:-2]
        if gateway not in GATEWAY_PATHS:
            return None
    if rest in ([], ["--queue"], ["--detach"]):
        return (rest[0] if rest else ""), gateway
    return None


def _read_all(source: BinaryIO | TextIO) -> bytes:
    """Read stdin fully as bytes, whether given a text or a binary stream."""
    stream = getattr(source, "buffer", source)
    data = stream.read()
    if isinstance(data, str):
        return data.encode("utf-8", "replace")
    return data or b""


if __name__ == "__main__":
    sys.exit(main())
