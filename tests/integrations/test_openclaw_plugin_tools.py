"""The OpenClaw plugin's memory tools are the MCP endpoint's tools: the definitions it
ships (``integrations/openclaw/memory-tools.json``) are the server's ``tools/list``, and
its manifest declares each (OpenClaw refuses a tool its manifest does not name)."""

from __future__ import annotations

import json
from pathlib import Path

from memory.mcp.tools import TOOLS

PLUGIN = Path(__file__).resolve().parents[2] / "integrations" / "openclaw"


def test_the_plugin_ships_the_servers_tool_definitions() -> None:
    shipped = json.loads((PLUGIN / "memory-tools.json").read_text())
    assert shipped == [tool.definition() for tool in TOOLS.values()], (
        "integrations/openclaw/memory-tools.json differs from the server's tools: write it "
        "again from memory.mcp.tools.TOOLS"
    )


def test_the_manifest_declares_every_tool_and_the_package_ships_them() -> None:
    manifest = json.loads((PLUGIN / "openclaw.plugin.json").read_text())
    assert manifest["contracts"]["tools"] == [f"sessionhub_{name}" for name in TOOLS]
    package = json.loads((PLUGIN / "package.json").read_text())
    assert "memory-tools.json" in package["files"]
