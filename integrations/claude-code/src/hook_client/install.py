"""Installing into Claude Code: the hook entries of its settings.json, the JSON
files they live in, and the queue script written beside the config.
"""

from __future__ import annotations

import json
import os
import sys

from .config import sessionhub_dir
from .constants import (
    ASYNC_EVENTS,
    DETACHED_EVENTS,
    INSTALL_EVENTS,
    INSTALL_HOOK_TIMEOUT,
    OUR_COMMAND_MARKERS,
    TOOL_EVENTS,
)
from .logfile import _ensure_dir
from .queue_script import CLIENT_PATH
from .queue_template import QUEUE_SCRIPT_CLIENT_LINE, QUEUE_SCRIPT_SOURCE

QUEUE_SCRIPT = "sessionhub_hook_queue.py"


def queue_script_path() -> str:
    return os.path.join(sessionhub_dir(), QUEUE_SCRIPT)


def queue_script_source() -> str:
    """The stand-alone queue hook ``install`` writes: the queue module as the build put it
    in QUEUE_SCRIPT_SOURCE, with the client's path in place of the line that finds it."""
    return QUEUE_SCRIPT_SOURCE.replace(
        QUEUE_SCRIPT_CLIENT_LINE, f"CLIENT_PATH = {CLIENT_PATH!r}", 1
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
