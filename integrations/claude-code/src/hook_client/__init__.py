# The hook client's sources: build.py (beside src/) joins these modules, in its order, into
# the one file users copy, sessionhub_hook.py. The docstring below is that file's.
"""SessionHub hook client for Claude Code (and for Codex CLI and Gemini CLI).

Claude Code runs this file as a command hook: it reads the hook's JSON on stdin, adds a
``sessionhub`` key (event id, timestamp, git remote, final message, reasoning tail), and
posts it to ``{SESSIONHUB_URL}/api/v1/hooks/claude-code``. When the server cannot be
reached the event goes to a local spool that the next hook call (or ``flush``) sends
first. On ``SessionStart`` (a project-level preamble) and on the session's first
``UserPromptSubmit`` (a preamble chosen by relevance to the prompt) it asks the server for
continuity and prints it as ``hookSpecificOutput.additionalContext``; nothing else is
ever written to stdout in hook mode, and the hook never fails. Codex CLI and Gemini CLI
run it the same way with ``hook --gateway codex`` or ``--gateway gemini-cli`` (their part
is the section "Codex, Gemini" below).

Standard library only, and only cheap modules imported at start-up: hooks run on the
agent's hot path, so everything heavier is imported where it is used.

Subcommands: (none) hook mode, ``install`` (which also registers SessionHub's MCP
server with Claude Code), ``uninstall``, ``status``, ``flush``, ``mcp-headers`` (what
Claude Code runs for the MCP server's Authorization header), ``--version``. Run
``sessionhub_hook.py --help`` for details.
"""

from __future__ import annotations
