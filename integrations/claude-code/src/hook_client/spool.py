"""The local spool: events that could not be sent wait here, in order, until a later
hook, the sender or ``flush`` sends them.
"""

from __future__ import annotations

import json
import os
import time

from .constants import SPOOL_LINE_MIN_BYTES, SPOOL_MAX_EVENTS
from .deadline import Deadline
from .locking import FileLock
from .logfile import _ensure_dir, log


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
