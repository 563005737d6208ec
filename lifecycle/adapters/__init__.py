"""Adapters turn each gateway's payloads into :class:`NormalizedEvent` objects.

What the rest of SessionHub needs to know of a gateway it reads from here, never from a
switch of its own on the source: the facts each adapter sets on an event (``summarize``
on a turn whose end is where memory is distilled, ``follows_cleared`` on a start that
continues a cleared session, ``subagent``, ``injected``...), and where a stored tool
call's input and output lie in the gateway's payload (:func:`tool_io`).
"""

from collections.abc import Callable
from typing import Any

from lifecycle.models import Source

from . import canonical, claude_code, codex, gemini_cli, openclaw
from .base import EventInvalid, NormalizedEvent

__all__ = ["EventInvalid", "NormalizedEvent", "tool_io"]

_TOOL_IO: dict[str, Callable[[dict[str, Any]], tuple[Any, Any]]] = {
    Source.CLAUDE_CODE: claude_code.tool_io,
    Source.OPENCLAW: openclaw.tool_io,
    Source.CODEX: codex.tool_io,
    Source.GEMINI_CLI: gemini_cli.tool_io,
}


def tool_io(source: str, payload: dict[str, Any] | None) -> tuple[Any, Any]:
    """(input, output) of a stored tool-use event, by the gateway that sent it; an output
    is the tool's error when it failed."""
    return _TOOL_IO.get(source, canonical.tool_io)(payload or {})
