"""The client's constants: its version, the server's endpoints, the gateways, time
budgets and size limits, and which events are registered how.
"""

from __future__ import annotations

VERSION = "0.1.0"
CLIENT = f"sessionhub-hook/{VERSION}"

HOOKS_PATH = "/api/v1/hooks/claude-code"
CONTINUITY_PATH = "/api/v1/continuity"
# The CLIs this client serves, by the gateway name a hook passes (``hook --gateway NAME``;
# none is Claude Code), and the endpoint that takes each one's hook bodies.
CLAUDE_CODE = "claude-code"
CODEX = "codex"
GEMINI_CLI = "gemini-cli"
GATEWAY_PATHS = {
    CLAUDE_CODE: HOOKS_PATH,
    CODEX: "/api/v1/hooks/codex",
    GEMINI_CLI: "/api/v1/hooks/gemini-cli",
}
MCP_PATH = "/api/v1/mcp"
# The name the MCP server is registered under: Claude Code calls its tools
# mcp__sessionhub__<tool>.
MCP_SERVER_NAME = "sessionhub"

DEFAULT_TIMEOUT = 2.0
# Time kept back from the network so the spool can still be written before the deadline.
SPOOL_RESERVE = 0.25
FLUSH_COMMAND_TIMEOUT = 30.0

MAX_BATCH_EVENTS = 1000
MAX_BATCH_BYTES = 1 << 20
MAX_RESPONSE_BYTES = 1 << 20

TAIL_CHARS = 2000
TRANSCRIPT_WINDOW = 256 * 1024
TRANSCRIPT_WINDOW_MAX = 4 * 1024 * 1024

LOG_MAX_BYTES = 1 << 20

# Environment variables that make requests go through urllib (it applies proxies).
PROXY_VARIABLES = (
    "https_proxy",
    "http_proxy",
    "HTTPS_PROXY",
    "HTTP_PROXY",
)

# Answers that will not get better by sending the same body again.
PERMANENT_CODES = frozenset({400, 401, 403, 404, 413})
# A refused token is a configuration problem, not a property of the events: they wait in
# the spool (bounded, oldest dropped first) until the token works.
AUTH_CODES = frozenset({401, 403})
SPOOL_MAX_EVENTS = 10_000
# The spool is counted (to keep it bounded) only once it holds this many bytes per event
# allowed (no event's line is shorter): a spool of a few waiting events costs no read.
SPOOL_LINE_MIN_BYTES = 100
WHOAMI_PATH = "/api/v1/whoami"

TRANSCRIPT_EVENTS = frozenset({"Stop", "SubagentStop", "SessionEnd"})
# Events on which the client looks for the earlier session the transcript continues (a
# fork or a resume under a new id writes its transcript at its first turn).
PREDECESSOR_EVENTS = frozenset({"SessionStart", "Stop", "SessionEnd"})
# Strings longer than this are cut before sending, with a marker saying how much: the
# server keeps far less of any one string, and a body over its limit would be refused
# whole (an Edit of a large file carries the whole file in tool_response.originalFile).
MAX_STRING_CHARS = 64 * 1024
MAX_EVENT_BYTES = 2 * 1024 * 1024
# SessionStart sources that get no preamble: after a compaction the conversation goes on,
# and the preamble served at its start is already part of the compacted summary.
NO_PREAMBLE_SOURCES = frozenset({"compact"})

INSTALL_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Notification",
    "Stop",
    "StopFailure",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "SessionEnd",
)
TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})
# Events whose answer nobody reads: registered "async": true, so the agent never waits.
# Not PostCompact: after `/compact` in `claude -p` it is the last hook before SessionEnd,
# and Claude Code 2.1.330 killed it before it could start (the real-CLI test lost it).
# Registered blocking and detached, it costs the agent one interpreter start-up per
# compaction.
ASYNC_EVENTS = frozenset(
    {
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "Notification",
        "SubagentStop",
        "PreCompact",
    }
)
# Events sent from a detached child process (``hook --detach``): Claude Code kills hooks
# still running when it exits (async ones, the fire-and-forget StopFailure); a child in
# its own session outlives that and still sends or spools the event. SessionEnd stays in
# the foreground: Claude Code waits for it (up to its timeout) before it exits, and that
# wait is what gives the hooks fired just before the end the time to hand off.
DETACHED_EVENTS = ASYNC_EVENTS | {"StopFailure", "PostCompact"}
INSTALL_HOOK_TIMEOUT = 10  # seconds; Claude Code's own limit, the client stops well before
OUR_COMMAND_MARKERS = ("sessionhub-hook", "sessionhub_hook")
