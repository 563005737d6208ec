"""Installing into Codex CLI and Gemini CLI: their hook entries (``hooks.json``
with Codex's trust of each hook, Gemini CLI's ``settings.json``).
"""

from __future__ import annotations

import json
import os
import sys

from .constants import CODEX, GEMINI_CLI, INSTALL_HOOK_TIMEOUT, OUR_COMMAND_MARKERS, VERSION
from .install import (
    _is_ours,
    _load_json_file,
    _write_json_file,
    queue_script_path,
    write_queue_script,
)
from .queue_script import CLIENT_PATH

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import TextIO

# Each hook the installer registers, and how it runs: in place (the CLI reads its answer
# or it must go before what follows), queued (the answer is never read: a few lines write
# it down for the sender), or detached (the CLI does not wait for it, or waiting is
# long). Codex clamps SessionEnd and Interrupt to 3 s; the client's own deadline is 2 s.
CLI_HOOKS: dict[str, dict[str, str]] = {
    CODEX: {
        "SessionStart": "",
        "UserPromptSubmit": "",
        "PreToolUse": "--queue",
        "PermissionRequest": "--queue",
        "PostToolUse": "--queue",
        "PreCompact": "--queue",
        "PostCompact": "--detach",
        "SubagentStart": "--queue",
        "SubagentStop": "--queue",
        "Stop": "",
        "Interrupt": "--detach",
        "SessionEnd": "",
    },
    GEMINI_CLI: {
        "SessionStart": "",
        "BeforeAgent": "",
        "BeforeTool": "--queue",
        "AfterTool": "--queue",
        "Notification": "--queue",
        "PreCompress": "--detach",
        "AfterAgent": "",
        # Gemini CLI does not wait for SessionEnd: as it exits, the child sends.
        "SessionEnd": "--detach",
    },
}
CLI_NAMES = {CODEX: "Codex CLI", GEMINI_CLI: "Gemini CLI"}


def add_gateway_options(parser: argparse.ArgumentParser) -> None:
    """``--codex`` / ``--gemini-cli``: install into (or remove from) that CLI instead."""
    which = parser.add_mutually_exclusive_group()
    for gateway, where in ((CODEX, "~/.codex/hooks.json"), (GEMINI_CLI, "~/.gemini/settings.json")):
        which.add_argument(
            f"--{gateway}",
            dest="gateway",
            action="store_const",
            const=gateway,
            help=f"{CLI_NAMES[gateway]}'s hooks ({where}; --project: the same under ./)",
        )
    if parser.prog.endswith(" install"):
        parser.add_argument(
            "--codex-bin",
            metavar="PATH",
            help="the codex command that trusts the hooks (default: codex on PATH)",
        )


def cli_settings_path(gateway: str, scope: str, explicit: str | None) -> str:
    """Where a CLI keeps its hooks for the chosen scope (Codex honours CODEX_HOME)."""
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    folder, name = (".codex", "hooks.json") if gateway == CODEX else (".gemini", "settings.json")
    if scope == "project":
        return os.path.abspath(os.path.join(folder, name))
    if gateway == CODEX and os.environ.get("CODEX_HOME"):
        return os.path.join(os.path.expanduser(os.environ["CODEX_HOME"]), name)
    return os.path.join(os.path.expanduser("~"), folder, name)


def cli_hook_command(gateway: str, mode: str, command: str | None = None) -> str:
    """The shell command a CLI runs for one hook (both run hooks through a shell)."""
    import shlex

    tail = f"--gateway {gateway}"
    if command:
        return f"{command} hook {mode} {tail}" if mode else f"{command} hook {tail}"
    python = shlex.quote(os.path.abspath(sys.executable))
    if mode == "--queue" and hasattr(os, "fork"):
        return f"{python} -S {shlex.quote(queue_script_path())} {tail}"
    mode = "--detach" if mode == "--queue" else mode  # no fork, no queue: the whole client
    words = [python, "-S", shlex.quote(CLIENT_PATH), "hook", *([mode] if mode else []), tail]
    return " ".join(words)


def cli_hook_entry(gateway: str, event: str, command: str | None = None) -> dict:
    """One hook entry: Codex counts its timeout in seconds, Gemini CLI in milliseconds."""
    run = cli_hook_command(gateway, CLI_HOOKS[gateway][event], command)
    if gateway == CODEX:
        return {"type": "command", "command": run, "timeout": INSTALL_HOOK_TIMEOUT}
    return {
        "name": "sessionhub",
        "type": "command",
        "command": run,
        "timeout": INSTALL_HOOK_TIMEOUT * 1000,
    }


def merge_cli_hooks(settings: dict, gateway: str, command: str | None = None) -> dict:
    """Add or update this client's entries in a CLI's hooks, keeping every other hook
    (and, in Gemini CLI's settings.json, every other setting)."""
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError('"hooks" in the settings file is not an object')
    for event in CLI_HOOKS[gateway]:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise ValueError(f'"hooks.{event}" in the settings file is not a list')
        wanted = cli_hook_entry(gateway, event, command)
        found = False
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
                    entry.clear()
                    entry.update(wanted)
                kept.append(entry)
            group["hooks"] = kept
        groups[:] = [g for g in groups if not (isinstance(g, dict) and g.get("hooks") == [])]
        if not found:
            groups.append({"hooks": [wanted]})
    return settings


def install_cli_hooks(args: argparse.Namespace, out: TextIO) -> None:
    """``install --codex`` / ``--gemini-cli``: write the hooks, then (Codex) trust them."""
    gateway = args.gateway
    path = cli_settings_path(gateway, args.scope or "user", args.settings)
    try:
        current = _load_json_file(path)
    except ValueError as exc:  # Gemini CLI's settings may hold comments: left as they are
        raise ValueError(f"{path} is not plain JSON, so it is left alone ({exc})") from exc
    settings = merge_cli_hooks(current, gateway, args.hook_command)
    if not args.hook_command:
        write_queue_script()
    changed = _write_json_file(path, settings)
    out.write(f"{'updated' if changed else 'unchanged'}: {path}\n")
    out.write(f"hook command: {cli_hook_command(gateway, '', args.hook_command)}\n")
    if gateway == CODEX:
        codex_trust_hooks(path, args.codex_bin, out)


def codex_trust_hooks(hooks_file: str, codex_bin: str | None, out: TextIO) -> None:
    """Trust this client's hooks in Codex, as its /hooks screen does: Codex runs a hook
    only once its exact definition is trusted, and remembers that by the definition's
    hash in config.toml (``hooks.state``). Codex's own app server lists the hooks with
    their hashes and writes the trust; the other hooks are left as they are."""
    import shutil

    codex = codex_bin or shutil.which("codex")
    manual = (
        "open codex, type /hooks and trust the SessionHub hooks "
        "(Codex skips a hook nobody trusted, without a word)"
    )
    if not codex:
        out.write(f"codex is not on PATH: {manual}, or run install again with --codex-bin\n")
        return
    try:
        trusted, total = _codex_trust(codex, hooks_file)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        out.write(f"could not trust the hooks through {codex} ({exc}): {manual}\n")
        return
    if total and trusted == total:
        out.write(f"trusted in Codex: {total} hook(s)\n")
    else:
        out.write(f"Codex lists {trusted} of {total} hook(s) as trusted: {manual}\n")


def _codex_trust(codex: str, hooks_file: str) -> tuple[int, int]:
    """(hooks of this client trusted, hooks of this client found) in ``hooks_file``."""
    import subprocess
    import threading

    proc = subprocess.Popen(  # noqa: S603 - the codex the user named, no shell
        [codex, "app-server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    timer = threading.Timer(60, proc.kill)
    timer.start()
    stdin, stdout = proc.stdin, proc.stdout
    assert stdin is not None and stdout is not None  # piped above
    calls = iter(range(1, 100))

    def call(method: str, params: dict) -> dict:
        ident = next(calls)
        stdin.write(json.dumps({"id": ident, "method": method, "params": params}) + "\n")
        stdin.flush()
        for line in stdout:
            message = json.loads(line)
            if message.get("id") != ident:
                continue  # a notification
            if "error" in message:
                raise ValueError(f"{method}: {message['error']}")
            return message["result"]
        raise ValueError(f"{method}: codex app-server closed")

    def ours() -> list[dict]:
        listed = call("hooks/list", {"cwds": [os.getcwd()]})["data"]
        return [
            h
            for entry in listed
            for h in entry.get("hooks") or []
            if os.path.realpath(str(h.get("sourcePath"))) == os.path.realpath(hooks_file)
            and any(m in str(h.get("command")) for m in OUR_COMMAND_MARKERS)
        ]

    try:
        call("initialize", {"clientInfo": {"name": "sessionhub-hook", "version": VERSION}})
        stdin.write(json.dumps({"method": "initialized"}) + "\n")
        stdin.flush()
        pending = {h["key"]: {"trusted_hash": h["currentHash"]} for h in ours()}
        if pending:
            edit = {"keyPath": "hooks.state", "mergeStrategy": "upsert", "value": pending}
            call("config/batchWrite", {"edits": [edit]})
        found = ours()
        return sum(1 for h in found if h.get("trustStatus") == "trusted"), len(found)
    finally:
        timer.cancel()
        stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
