"""Claude Code's events, and ``build_event``, which every gateway's event goes
through (the other CLIs' are built in ``gateways``).
"""

from __future__ import annotations

import os
import time

from .constants import CLAUDE_CODE, CLIENT, PREDECESSOR_EVENTS, TRANSCRIPT_EVENTS
from .deadline import Deadline
from .events import _base_meta, _event_name, _same_text, fit_event
from .gateways import build_cli_event
from .logfile import _utc_now, log
from .transcript import (
    api_error_record,
    api_error_state,
    read_transcript,
    transcript_model,
    transcript_predecessor,
    transcript_turn_state,
    transcript_turn_usage,
)


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
