"""Hook mode: one hook's event sent (or spooled), and the continuity preamble printed
when one is handed over (SessionStart, the session's first prompt, a manual continue).
"""

from __future__ import annotations

import json
import os
import time

from .claude_code import _failed_turn, build_event
from .config import Config, sessionhub_dir
from .constants import AUTH_CODES, CLAUDE_CODE, NO_PREAMBLE_SOURCES
from .deadline import Deadline
from .events import _event_name, _note_results, _parse_hook
from .gateways import PROMPT_HOOKS, cli_event_waits, settle_cli_event, user_prompt
from .logfile import _ensure_dir, _utc_now, log
from .sender import flush_spool, move_queue
from .spool import Spool
from .transport import Reply, post_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO


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
