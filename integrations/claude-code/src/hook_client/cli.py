"""The command line: hook mode (no arguments, or ``hook``), ``install``,
``uninstall``, ``status``, ``flush``, ``mcp-headers`` and the sender's ``drain``.
"""

from __future__ import annotations

import json
import os
import sys

from .cli_install import add_gateway_options, cli_settings_path, install_cli_hooks
from .config import Config
from .constants import (
    ASYNC_EVENTS,
    AUTH_CODES,
    CLAUDE_CODE,
    FLUSH_COMMAND_TIMEOUT,
    GATEWAY_PATHS,
    VERSION,
    WHOAMI_PATH,
)
from .deadline import Deadline
from .gateways import remember_cli_process
from .hook import run_hook
from .install import (
    _load_json_file,
    _write_json_file,
    hook_entry,
    merge_hooks,
    remove_hooks,
    settings_path,
    write_queue_script,
)
from .logfile import log
from .mcp import _install_mcp, mcp_config_path, mcp_headers, remove_mcp
from .queue_script import queue_dir, queue_event
from .sender import _queued_files, drain, flush_spool, move_queue
from .spool import Spool
from .transport import post_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import BinaryIO, TextIO


def _parser() -> argparse.ArgumentParser:
    """Build the argument parser (only for subcommands; hook mode never imports argparse)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="sessionhub-hook",
        description="Claude Code (and Codex CLI, Gemini CLI) hook client for SessionHub. "
        "Without a subcommand it reads one hook event on stdin and sends it.",
    )
    parser.add_argument("--version", action="version", version=f"sessionhub-hook {VERSION}")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("hook", help="hook mode (the default): read one event on stdin")
    install = sub.add_parser("install", help="add the hook entries to Claude Code's settings")
    uninstall = sub.add_parser("uninstall", help="remove the hook entries again")
    for p in (install, uninstall):
        scope = p.add_mutually_exclusive_group()
        scope.add_argument(
            "--user",
            dest="scope",
            action="store_const",
            const="user",
            help="~/.claude/settings.json (default)",
        )
        scope.add_argument(
            "--project",
            dest="scope",
            action="store_const",
            const="project",
            help="./.claude/settings.json",
        )
        p.add_argument("--settings", metavar="PATH", help="an explicit settings.json path")
        add_gateway_options(p)
        p.add_argument(
            "--mcp-config",
            metavar="PATH",
            help="where the MCP server entry goes (default: ~/.claude.json, or ./.mcp.json "
            "with --project)",
        )
        p.add_argument(
            "--no-mcp",
            action="store_true",
            help="leave Claude Code's MCP servers alone",
        )
    install.add_argument("--url", help="SessionHub base URL, saved in the config file")
    install.add_argument(
        "--token", help="API token (scope ingest) saved in the config file; - reads it from stdin"
    )
    install.add_argument(
        "--command",
        dest="hook_command",
        metavar="CMD",
        help="the command to register (default: found automatically)",
    )
    sub.add_parser("mcp-headers", help="print the MCP server's headers (Claude Code runs it)")
    sub.add_parser("status", help="show the configuration and the spool")
    sub.add_parser("flush", help="send the spooled events now")
    return parser


def cmd_install(args: argparse.Namespace, out: TextIO) -> None:
    """Write the hook entries (and, with --url/--token, the config file)."""
    if getattr(args, "gateway", None):
        install_cli_hooks(args, out)  # Codex CLI or Gemini CLI
    else:
        path = settings_path(args.scope or "user", args.settings)
        settings = merge_hooks(_load_json_file(path), args.hook_command)
        if not args.hook_command:
            write_queue_script()
        changed = _write_json_file(path, settings)
        out.write(f"{'updated' if changed else 'unchanged'}: {path}\n")
        example = hook_entry("PostToolUse", args.hook_command)
        shown = " ".join([example["command"], *example.get("args", [])])
        out.write(f"hook command: {shown} (async for {', '.join(sorted(ASYNC_EVENTS))})\n")
    if args.url or args.token:
        cfg = Config()
        data = _load_json_file(cfg.config_path)
        if args.url:
            data["url"] = args.url.strip()
        if args.token:
            from_stdin = args.token.strip() == "-"
            token = sys.stdin.readline() if from_stdin else args.token
            data["token"] = token.strip()
        _write_json_file(cfg.config_path, data, mode=0o600)
        out.write(f"config written: {cfg.config_path} (mode 600)\n")
    if not getattr(args, "gateway", None) and not args.no_mcp:
        _install_mcp(args, out)  # Claude Code's MCP servers
    cfg = Config()
    if not cfg.configured:
        out.write(
            "note: no URL/token yet; set SESSIONHUB_URL and SESSIONHUB_TOKEN or run "
            "install again with --url and --token\n"
        )


def cmd_uninstall(args: argparse.Namespace, out: TextIO) -> None:
    """Remove this client's hook entries and (for Claude Code) its MCP server, leaving
    every other one alone."""
    gateway = getattr(args, "gateway", None)
    if gateway:
        path = cli_settings_path(gateway, args.scope or "user", args.settings)
    else:
        path = settings_path(args.scope or "user", args.settings)
    if not os.path.exists(path):
        out.write(f"nothing to do: {path} does not exist\n")
    else:
        changed = _write_json_file(path, remove_hooks(_load_json_file(path)))
        out.write(f"{'updated' if changed else 'unchanged'}: {path}\n")
    mcp_path = mcp_config_path(args.scope or "user", args.mcp_config)
    if not gateway and not args.no_mcp and os.path.exists(mcp_path):
        mode = os.stat(mcp_path).st_mode & 0o777
        changed = _write_json_file(mcp_path, remove_mcp(_load_json_file(mcp_path)), mode=mode)
        out.write(f"{'updated' if changed else 'unchanged'}: {mcp_path}\n")


def server_check(cfg: Config, deadline: Deadline) -> str:
    """Ask the server who the token is (``whoami``): one line saying whether it works."""
    if not cfg.configured:
        return "not asked: set SESSIONHUB_URL and SESSIONHUB_TOKEN"
    reply = post_json(cfg.url + WHOAMI_PATH, cfg.token, b"{}", deadline)
    data = reply.data if isinstance(reply.data, dict) else {}
    if reply.kind == "ok":
        scopes = ", ".join(str(s) for s in data.get("scopes") or [])
        works = "ok" if "ingest" in scopes or "admin" in scopes else "WARNING: no ingest scope"
        return f"{works}: token {data.get('token')!s} ({scopes}) of team {data.get('team')!s}" + (
            f" [{data.get('team_name')}]" if data.get("team_name") else ""
        )
    if reply.code in AUTH_CODES:
        message = data.get("message") or reply.describe()
        return (
            f"TOKEN REFUSED (HTTP {reply.code}: {message}); events are kept in the spool "
            "until the token works"
        )
    if reply.code == 404:
        return f"no SessionHub answers at {cfg.url} (HTTP 404): check SESSIONHUB_URL"
    if reply.code:
        return f"answered with an error: {reply.describe()}; events wait in the spool"
    return f"not reachable: {reply.describe()}"


def cmd_status(out: TextIO) -> None:
    """Print the configuration (never the token), whether the server takes the token,
    and the spool size."""
    cfg = Config()
    spool = Spool(cfg.spool_path, cfg.spool_max)
    lines = [
        f"sessionhub-hook {VERSION}",
        f"url:     {cfg.url or '(not set)'}" + (f" [{cfg.url_source}]" if cfg.url else ""),
        f"token:   {'set' if cfg.token else 'not set'}"
        + (f" [{cfg.token_source}]" if cfg.token else ""),
        f"config:  {cfg.config_path}" + ("" if os.path.exists(cfg.config_path) else " (absent)"),
        f"server:  {server_check(cfg, Deadline(max(cfg.timeout, 5.0)))}",
        f"timeout: {cfg.timeout:g} s",
        f"spool:   {cfg.spool_path} ({spool.count()} event(s) waiting, "
        f"at most {cfg.spool_max} kept)",
        f"queue:   {queue_dir()} ({len(_queued_files(queue_dir()))} hook(s) not yet spooled)",
        f"log:     {cfg.log_path}",
    ]
    last = _last_log_line(cfg.log_path)
    if last:
        lines.append(f"last log line: {last}")
    if cfg.file_error:
        lines.append(f"warning: {cfg.file_error}")
    out.write("\n".join(lines) + "\n")


def _last_log_line(path: str) -> str:
    """The newest line of the log, or an empty string."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 4096))
            lines = handle.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""


def cmd_flush(out: TextIO) -> None:
    """Send the whole spool now, with a longer time budget than a hook has."""
    cfg = Config()
    if not cfg.configured:
        out.write("not configured: set SESSIONHUB_URL and SESSIONHUB_TOKEN\n")
        return
    spool = Spool(cfg.spool_path, cfg.spool_max)
    deadline = Deadline(max(cfg.timeout, FLUSH_COMMAND_TIMEOUT))
    while move_queue(cfg, spool, deadline, wait=1.0):  # queued hooks first, oldest first
        pass
    before = spool.count()
    state = "ok"
    while state == "ok" and spool.has_events() and deadline.net_remaining() > 0:
        state = flush_spool(cfg, spool, deadline)
    after = spool.count()
    message = {
        "busy": "another process is sending the spool; try again in a moment",
        "transient": "the server is not reachable right now; events kept",
        "auth": "the server refused the token; events kept until it works "
        "(check it with `sessionhub-hook status`)",
        "stop": "the server refused the batch (see the log); events kept",
    }.get(state, "done")
    out.write(f"sent {max(before - after, 0)}, waiting {after}: {message}\n")


def main(
    argv: list[str] | None = None, stdin: BinaryIO | None = None, stdout: TextIO | None = None
) -> int:
    """Entry point for hook mode and the subcommands; always returns 0."""
    try:
        args = sys.argv[1:] if argv is None else list(argv)
        out = stdout if stdout is not None else sys.stdout
        if args == ["drain"]:
            drain(Config())
            return 0
        if args == ["mcp-headers"]:
            out.write(json.dumps(mcp_headers(Config())) + "\n")
            return 0
        mode = hook_mode(args)
        if mode is not None and mode[0] == "--queue":
            raw = _read_all(stdin or sys.stdin)
            if raw.strip():
                try:
                    named = "" if mode[1] == CLAUDE_CODE else mode[1]
                    queue_event(raw, start_sender=stdin is None, gateway=named)
                except OSError as exc:
                    log(f"cannot queue the event, sending it now: {exc}")
                    run_hook(raw, Config(), out, Deadline(Config().timeout), mode[1])
            return 0
        if mode is not None:
            if os.environ.get("SESSIONHUB_DISABLE", "").strip() in ("1", "true", "yes"):
                return 0
            cfg = Config()
            deadline = Deadline(cfg.timeout)
            source = stdin if stdin is not None else sys.stdin
            if stdin is None and hasattr(source, "isatty") and source.isatty():
                sys.stderr.write(
                    "sessionhub-hook: expects a Claude Code hook event on stdin (see --help)\n"
                )
                return 0
            raw = _read_all(source)
            remember_cli_process(raw, mode[1])
            if mode[0] == "--detach" and stdin is None and _detach():
                return 0  # the parent: Claude Code sees the hook done at once
            run_hook(raw, cfg, out, deadline, mode[1])
            return 0
        import contextlib

        with contextlib.redirect_stdout(out):  # --help and --version go to `out` too
            options = _parser().parse_args(args)
        if options.command == "install":
            cmd_install(options, out)
        elif options.command == "uninstall":
            cmd_uninstall(options, out)
        elif options.command == "status":
            cmd_status(out)
        elif options.command == "flush":
            cmd_flush(out)
        else:
            _parser().print_help(out)
        return 0
    except SystemExit:  # argparse's --help, --version and usage errors
        return 0
    except BaseException as exc:  # noqa: BLE001 - the hook must never fail the agent
        log(f"unexpected error: {exc!r}")
        if args_are_cli(argv):
            sys.stderr.write(f"sessionhub-hook: {exc}\n")
        return 0


def _detach() -> bool:
    """Fork a child in a session of its own that does the sending; True in the parent.

    The child closes the hook's stdin, stdout and stderr (Claude Code waits for them to
    close) and is not in the hook's process group, so Claude Code exiting or killing the
    hook does not reach it. Without fork (Windows) the hook runs in place.
    """
    if not hasattr(os, "fork"):
        return False
    try:
        pid = os.fork()
    except OSError:
        return False
    if pid:
        return True
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
    except OSError:
        pass
    return False


def args_are_cli(argv: list[str] | None) -> bool:
    """Whether main was called for a subcommand (errors may then go to stderr)."""
    args = sys.argv[1:] if argv is None else argv
    return bool(args) and hook_mode(list(args)) is None


def hook_mode(args: list[str]) -> tuple[str, str] | None:
    """(mode, gateway) of a hook-mode call: ``[hook [--queue|--detach] [--gateway NAME]]``
    (no arguments is hook mode too); None for a subcommand. The mode is '' (in place),
    ``--queue`` or ``--detach``; the gateway is Claude Code's unless named."""
    if not args:
        return "", CLAUDE_CODE
    if args[0] != "hook":
        return None
    rest, gateway = args[1:], CLAUDE_CODE
    if rest[-2:-1] == ["--gateway"]:
        gateway, rest = rest[-1], rest[:-2]
        if gateway not in GATEWAY_PATHS:
            return None
    if rest in ([], ["--queue"], ["--detach"]):
        return (rest[0] if rest else ""), gateway
    return None


def _read_all(source: BinaryIO | TextIO) -> bytes:
    """Read stdin fully as bytes, whether given a text or a binary stream."""
    stream = getattr(source, "buffer", source)
    data = stream.read()
    if isinstance(data, str):
        return data.encode("utf-8", "replace")
    return data or b""


if __name__ == "__main__":
    sys.exit(main())
