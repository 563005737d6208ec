"""The queue: what the events nobody waits for run, and what ``install`` turns into
the stand-alone queue script.

The events nobody waits for (tool uses, notifications, subagent ends, PreCompact) come
several per tool call, and each starts an interpreter on the agent's machine, which
competes with the agent for the CPU. They run ``sessionhub_hook_queue.py``, a few lines
that ``install`` writes beside the config from this module (the build copies it, verbatim,
into the queue script's text): it writes stdin as it came to a file of its own in the
queue folder and exits (no json, no compiling the whole client, which alone costs more
than the rest). One sender process (``drain``), started by the first queued event of a
burst and lingering a moment after the last, turns queued files into events, moves them
into the spool and sends the spool; a blocking hook (UserPromptSubmit, Stop,
SessionEnd...) moves what is queued first, so the server sees a turn's tool uses before
its end. A queued file is named by the time it was written and 16 random bytes, which also
give the event its timestamp and id: an event queued twice over a crash is still one
event. The hooks of another CLI (Codex CLI, Gemini CLI) pass ``--gateway NAME``, which the
file's name keeps: ``<time>-<random>.codex.hook``.

Only os, sys and time here, and nothing from the rest of the package: the queue script is
this module alone.
"""

from __future__ import annotations

import os
import sys
import time

QUEUE_SUFFIX = ".hook"
SENDER_FRESH_NS = 3_000_000_000  # a sender whose heartbeat is older is taken for gone
CLIENT_PATH = os.path.abspath(__file__)


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
