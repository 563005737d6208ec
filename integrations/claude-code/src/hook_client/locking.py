"""Advisory file locks (flock; msvcrt on Windows) that keep two hooks from writing
or sending the spool at once.
"""

from __future__ import annotations

import os
import time

from .logfile import _ensure_dir


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
