"""The client's log file (~/.sessionhub/hook.log): the hook never writes to the
agent's terminal, so this is where it says what went wrong.
"""

from __future__ import annotations

import os
import time

from .config import sessionhub_dir
from .constants import LOG_MAX_BYTES


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
