"""What every gateway's event is made of: its id and time, the developer and git
remote, the cut of oversized strings, and the parsing of a hook's stdin.
"""

from __future__ import annotations

import json
import os

from .constants import MAX_EVENT_BYTES, MAX_STRING_CHARS
from .deadline import Deadline
from .git import find_git_remote
from .logfile import _utc_now, log
from .transcript import _normalise_text
from .transport import Reply, _short


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
