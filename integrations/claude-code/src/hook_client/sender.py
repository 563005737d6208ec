"""Sending: the spool in batches (one gateway's endpoint each), the queue moved into
the spool, and the sender process (``drain``) the queued hooks start.
"""

from __future__ import annotations

import json
import os
import time

from .claude_code import build_event
from .config import Config
from .constants import (
    AUTH_CODES,
    CLAUDE_CODE,
    FLUSH_COMMAND_TIMEOUT,
    GATEWAY_PATHS,
    MAX_BATCH_BYTES,
    MAX_BATCH_EVENTS,
)
from .deadline import Deadline
from .events import _note_results, _parse_hook
from .locking import FileLock
from .logfile import _ensure_dir, log
from .queue_script import QUEUE_SUFFIX, queue_dir
from .spool import Spool
from .transport import post_json

SENDER_LINGER = 2.0  # seconds a sender waits for more events before it exits


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
