"""The MCP server entry.

``install`` also registers SessionHub's MCP endpoint with Claude Code, so the agent can
search its team's memory mid-session. The entry names no token: Claude Code runs its
``headersHelper`` (this client's ``mcp-headers``) when it connects, which prints the
Authorization header from the same config file and environment the hooks read. The
token stays in one place, and a new token from ``install --token`` reaches both.
"""

from __future__ import annotations

import os
import sys

from .config import Config, _clean_base_url
from .constants import MCP_PATH, MCP_SERVER_NAME, OUR_COMMAND_MARKERS
from .install import _load_json_file, _write_json_file
from .queue_script import CLIENT_PATH

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import TextIO


def mcp_config_path(scope: str, explicit: str | None) -> str:
    """Where Claude Code keeps MCP servers for the scope: ~/.claude.json (user scope) or
    the project's .mcp.json (project scope, a file to commit)."""
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    if scope == "project":
        return os.path.abspath(".mcp.json")
    return os.path.join(os.path.expanduser("~"), ".claude.json")


def mcp_entry(url: str, command: str | None = None) -> dict:
    """The MCP server entry: Streamable HTTP at the server's endpoint, headers from this
    client (``CMD mcp-headers`` with ``--command``, else this interpreter and file)."""
    if command:
        helper = f"{command} mcp-headers"
    else:
        import shlex

        words = [os.path.abspath(sys.executable), "-S", CLIENT_PATH, "mcp-headers"]
        helper = " ".join(shlex.quote(word) for word in words)
    return {"type": "http", "url": _clean_base_url(url) + MCP_PATH, "headersHelper": helper}


def _is_our_mcp(entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    helper = entry.get("headersHelper")
    return isinstance(helper, str) and any(m in helper for m in OUR_COMMAND_MARKERS)


def merge_mcp(config: dict, entry: dict) -> tuple[dict, bool]:
    """Add or update the SessionHub entry under ``mcpServers``; (config, done). A server
    of that name that this client did not write is left alone."""
    servers = config.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise ValueError('"mcpServers" in the MCP config file is not an object')
    current = servers.get(MCP_SERVER_NAME)
    if current is not None and not _is_our_mcp(current):
        return config, False
    servers[MCP_SERVER_NAME] = entry
    return config, True


def remove_mcp(config: dict) -> dict:
    """Remove the SessionHub entry this client wrote, keeping every other server."""
    servers = config.get("mcpServers")
    if isinstance(servers, dict) and _is_our_mcp(servers.get(MCP_SERVER_NAME)):
        del servers[MCP_SERVER_NAME]
    return config


def mcp_headers(cfg: Config) -> dict:
    """What ``mcp-headers`` prints: the Authorization header, or nothing without a token
    (Claude Code then shows the server as needing authentication)."""
    return {"Authorization": f"Bearer {cfg.token}"} if cfg.token else {}


def _install_mcp(args: argparse.Namespace, out: TextIO) -> None:
    cfg = Config()
    path = mcp_config_path(args.scope or "user", args.mcp_config)
    if not cfg.url:
        out.write(f"MCP server not registered: no SessionHub URL yet ({path})\n")
        return
    existing = _load_json_file(path)
    mode = 0o600
    if os.path.exists(path):
        mode = os.stat(path).st_mode & 0o777
    config, done = merge_mcp(existing, mcp_entry(cfg.url, args.hook_command))
    if not done:
        out.write(
            f"MCP server not registered: {path} already has a server named "
            f"{MCP_SERVER_NAME!r} that this client did not write\n"
        )
        return
    changed = _write_json_file(path, config, mode=mode)
    out.write(
        f"{'updated' if changed else 'unchanged'}: {path} (MCP server {MCP_SERVER_NAME!r} at "
        f"{cfg.url + MCP_PATH}; its tools are mcp__{MCP_SERVER_NAME}__*)\n"
    )
