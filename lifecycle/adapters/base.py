"""What every adapter produces: a validated, canonical event ready to be stored."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from django.conf import settings
from django.utils.dateparse import parse_datetime

from lifecycle.models import EndReason
from sessionhub.text.redaction import keyed_form, redact_identifier

EVENT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/+=\-]{0,199}$")
MAX_ID_LENGTH = 200
MAX_STORED_STRING = 8192


class EventInvalid(Exception):
    """One event that cannot be accepted: which field, and why."""

    def __init__(self, field: str, reason: str, code: str = "invalid") -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
        self.code = code


@dataclass(frozen=True, slots=True)
class NormalizedEvent:
    """A gateway event mapped onto SessionHub's canonical shape."""

    event_id: str
    kind: str
    source: str
    occurred_at: datetime
    agent_external_id: str = ""
    agent_name: str = ""
    session_external_id: str = ""
    session_key: str = ""
    hook: str = ""
    phase: str = ""
    channel: str = ""
    cwd: str = ""
    project: str = ""
    # Who ran the session: the OS user@host the client reports, else the token's gateway.
    developer: str = ""
    facts: dict[str, Any] = field(default_factory=dict)
    payload: dict[str, Any] = field(default_factory=dict)


# --- small validators shared by the adapters --------------------------------------------


KeyPath = tuple[str, ...]


def first_present(payload: Any, paths: Sequence[KeyPath]) -> Any:
    """The value at the first of these key paths that ``payload`` holds (a JSON null is
    held), or None: how an adapter's ``TOOL_INPUT`` is read in Python, as
    ``lifecycle.adapters.tool_input_sql`` reads it in the database."""
    for path in paths:
        value = payload
        for key in path:
            if not isinstance(value, dict) or key not in value:
                break
            value = value[key]
        else:
            return value
    return None


def require_dict(value: Any, name: str, *, optional: bool = False) -> dict[str, Any]:
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        raise EventInvalid(name, "must be a JSON object", "wrong_type")
    return value


def opt_str(container: dict[str, Any], key: str, name: str, *, max_length: int = 1000) -> str:
    """An optional string field; '' when absent or null."""
    value = container.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise EventInvalid(name, "must be a string", "wrong_type")
    if len(value) > max_length:
        raise EventInvalid(name, f"must be at most {max_length} characters", "too_long")
    return value


def identifier(value: Any, name: str, *, required: bool = True) -> str:
    """A session/agent/event identifier: printable, no whitespace, at most 200 chars."""
    if value is None or value == "":
        if required:
            raise EventInvalid(name, "is required", "required")
        return ""
    if not isinstance(value, str):
        raise EventInvalid(name, "must be a string", "wrong_type")
    if len(value) > MAX_ID_LENGTH:
        raise EventInvalid(name, f"must be at most {MAX_ID_LENGTH} characters", "too_long")
    # Every whitespace character but the ASCII space is unprintable: one test each.
    if not value.isprintable() or " " in value:
        raise EventInvalid(name, "must be printable with no whitespace", "invalid_id")
    return value


def event_identifier(value: Any, name: str = "event_id") -> str:
    ident = identifier(value, name)
    if not EVENT_ID_RE.match(ident):
        raise EventInvalid(name, "must be 1-200 of A-Z a-z 0-9 . _ : @ / + = -", "invalid_id")
    return ident


# --- identifiers as keys ------------------------------------------------------------------
#
# An identifier (event id, session id, session key, agent id, hook name) is a key: the
# same raw value must always give the same stored value, and two raw values two stored
# values. Redaction alone breaks the second (two secrets, one marker), so an identifier
# is stored in its keyed form: itself when it holds no secret, else its redacted form plus
# a keyed hash of the raw value (``sessionhub.text.redaction.keyed_form``). The adapters validate
# raw values, then key them; nothing downstream sees the raw identifier.


def as_key(raw: str, *, limit: int = MAX_ID_LENGTH) -> str:
    """An identifier as it is stored, looked up and shown ('' stays '')."""
    return keyed_form(raw, limit=limit) if raw else ""


def shown(raw: str) -> str:
    """A display string made from a raw one (a working directory, a remote): redacted
    whole as an identifier, before anything is derived."""
    return redact_identifier(raw) if raw else ""


def opt_count(value: Any, name: str) -> int | None:
    """A non-negative count that fits a 32-bit column."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise EventInvalid(name, "must be an integer", "wrong_type")
    if not 0 <= value < 2**31:
        raise EventInvalid(name, "out of range", "out_of_range")
    return value


USAGE_KEYS = ("input", "output", "cache_read", "cache_write")
_USAGE_MAX = 2**40  # far past any turn; keeps a sum within a bigint


def usage_facts(value: Any) -> dict[str, Any] | None:
    """A turn's token usage as the clients send it (``input``, ``output``, ``cache_read``,
    ``cache_write``, ``model``): counts that are not plain non-negative integers are
    left out, never a reason to refuse the event; None when nothing is left."""
    if not isinstance(value, dict):
        return None
    usage: dict[str, Any] = {}
    for key in USAGE_KEYS:
        count = value.get(key)
        if type(count) is int and 0 <= count < _USAGE_MAX:
            usage[key] = count
    if not usage:
        return None
    model = value.get("model")
    if isinstance(model, str) and model.strip():
        usage["model"] = model.strip()[:200]
    return usage


def check_time(moment: datetime, name: str, now: datetime) -> datetime:
    """Refuse timestamps implausibly far in the past or future."""
    limits = settings.SESSIONHUB
    if moment > now + limits["MAX_CLOCK_SKEW"]:
        raise EventInvalid(name, "is too far in the future", "time_out_of_range")
    if moment < now - limits["MAX_EVENT_AGE"]:
        raise EventInvalid(name, "is too far in the past", "time_out_of_range")
    return moment


def parse_iso_time(value: Any, name: str, now: datetime) -> datetime:
    if not isinstance(value, str):
        raise EventInvalid(name, "must be an ISO-8601 string", "wrong_type")
    try:
        moment = parse_datetime(value)
    except ValueError:
        moment = None
    if moment is None:
        raise EventInvalid(name, "must be an ISO-8601 date-time", "invalid_time")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    # In UTC once it is known to be in range: PostgreSQL refuses offsets past ±15:59,
    # which ISO-8601 allows, and one such event must not fail its whole batch.
    return check_time(moment, name, now).astimezone(UTC)


def parse_epoch_ms(value: Any, name: str, now: datetime) -> datetime:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EventInvalid(name, "must be epoch milliseconds", "wrong_type")
    try:
        moment = datetime.fromtimestamp(value / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise EventInvalid(name, "is out of range", "time_out_of_range") from exc
    return check_time(moment, name, now)


_HASH_PIECE = 2000  # bytes: below hashlib's HASHLIB_GIL_MINSIZE (2048)


def derive_event_id(source: str, body: Any) -> str:
    """A stable id for a payload that came without one, so a retried delivery matches.

    sha256 of the source and the body as JSON with sorted keys and no spaces (the
    standard library's ``json.dumps(sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)``), so the same body gives the same id whatever its key order.
    """
    digest = hashlib.sha256(source.encode())
    digest.update(b"\n")
    canonical = memoryview(canonical_json(body))
    # Fed in pieces under 2 KB: hashlib lets go of the GIL for larger ones, and taking it
    # back behind the other threads of a gthread worker costs up to the 5 ms switch
    # interval, for a hash that takes microseconds.
    for start in range(0, len(canonical), _HASH_PIECE):
        digest.update(canonical[start : start + _HASH_PIECE])
    return f"sha256:{digest.hexdigest()[:40]}"


def derived_key(source: str, body: Any) -> str:
    """``as_key(derive_event_id(source, body))``, which is the derived id itself: no
    anchor of redaction can occur in ``sha256:`` and lowercase hex, and a string with no
    uppercase letter holds no random-looking run (``tests/lifecycle/test_derived_keys``
    holds both for the current rules), so the keyed form is skipped."""
    return derive_event_id(source, body)


def canonical_json(body: Any) -> bytes:
    """``json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``
    as UTF-8, byte for byte, several times sooner.

    orjson writes the same bytes for everything a JSON body holds but floats (it spells
    some of them differently: ``0.00001`` for ``1e-05``); bodies holding a float, or
    anything orjson refuses (integers past 64 bits, lone surrogates, non-string keys),
    go through the standard library, so ids stored before orjson was used still match.
    """
    if not _holds_float(body):
        try:
            return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # orjson.JSONEncodeError
            pass
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode()


def _holds_float(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            continue
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, float):
            return True
    return False


_UNTRIMMED = (int, float, bool, type(None))


def trim_strings(value: Any, limit: int = MAX_STORED_STRING) -> Any:
    """Cap every string of a payload: the log keeps what happened, not whole files."""
    if isinstance(value, str):
        if len(value) > limit:
            return value[:limit] + f"… [{len(value) - limit} more characters]"
        return value
    # Short strings and numbers are kept inline: no call for the items of nearly every
    # payload. Containers are still copied, as they always were.
    if isinstance(value, dict):
        return {
            k: v
            if (type(v) is str and len(v) <= limit) or type(v) in _UNTRIMMED
            else trim_strings(v, limit)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [
            v
            if (type(v) is str and len(v) <= limit) or type(v) in _UNTRIMMED
            else trim_strings(v, limit)
            for v in value
        ]
    return value


_END_REASON_ALIASES = {
    "idle": EndReason.IDLE_TIMEOUT,
    "daily": EndReason.DAILY_RESET,
    "command": EndReason.USER_COMMAND,
    "user": EndReason.USER_COMMAND,
    "crash": EndReason.CRASHED,
}


def end_reason(raw: str) -> str:
    """Map a gateway's end reason onto the one enum (raw words kept beside it)."""
    word = (raw or "").strip().lower()
    if not word:
        return EndReason.UNKNOWN
    if word in EndReason.values:
        return word
    return _END_REASON_ALIASES.get(word, EndReason.UNKNOWN)


_GIT_SCP = re.compile(r"^(?:[\w.\-]+@)?([\w.\-]+):(?!//)(.+)$")


def normalize_git_remote(remote: str) -> str:
    """``git@github.com:acme/api.git`` or ``https://github.com/acme/api`` → ``github.com/acme/api``.

    Credentials in the URL never survive.
    """
    remote = remote.strip()
    if not remote or any(c.isspace() for c in remote):
        # No remote URL holds whitespace: "Authorization: Basic ..." from a git config is
        # kept as it is, for redaction to recognise, not rewritten into "authorization/ ...".
        return remote
    if "://" in remote:
        rest = remote.split("://", 1)[1]
        rest = rest.rsplit("@", 1)[-1] if "@" in rest.split("/", 1)[0] else rest
        host, _, path = rest.partition("/")
        host = (
            host.split(":", 1)[0] if host.count(":") == 1 and host.split(":")[1].isdigit() else host
        )
    else:
        match = _GIT_SCP.match(remote)
        if not match:
            return remote
        host, path = match.group(1), match.group(2)
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[:-4]
    return f"{host.lower()}/{path}" if path else host.lower()
