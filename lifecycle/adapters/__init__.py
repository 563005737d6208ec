"""Adapters turn each gateway's payloads into :class:`NormalizedEvent` objects.

What the rest of SessionHub needs to know of a gateway it reads from here, never from a
switch of its own on the source: the facts each adapter sets on an event (``summarize``
on a turn whose end is where memory is distilled, ``follows_cleared`` on a start that
continues a cleared session, ``subagent``, ``injected``...), and where a stored tool
call's input and output lie in the gateway's payload (:func:`tool_io`; the input alone,
read by the database, :func:`tool_input_sql`).
"""

from collections.abc import Callable
from typing import Any

from django.db.models import Case, F, When
from django.db.models.expressions import Expression

from lifecycle.models import Source
from sessionhub.db.json import JSONAt, JSONHas

from . import canonical, claude_code, codex, gemini_cli, openclaw
from .base import EventInvalid, KeyPath, NormalizedEvent

__all__ = ["EventInvalid", "NormalizedEvent", "tool_input_sql", "tool_io"]

_TOOL_IO: dict[str, Callable[[dict[str, Any]], tuple[Any, Any]]] = {
    Source.CLAUDE_CODE: claude_code.tool_io,
    Source.OPENCLAW: openclaw.tool_io,
    Source.CODEX: codex.tool_io,
    Source.GEMINI_CLI: gemini_cli.tool_io,
}


def tool_io(source: str, payload: Any) -> tuple[Any, Any]:
    """(input, output) of a stored tool-use event, by the gateway that sent it; an output
    is the tool's error when it failed. A payload that is not an object holds neither."""
    return _TOOL_IO.get(source, canonical.tool_io)(payload if isinstance(payload, dict) else {})


_TOOL_INPUT: dict[str, tuple[KeyPath, ...]] = {
    Source.CLAUDE_CODE: claude_code.TOOL_INPUT,
    Source.OPENCLAW: openclaw.TOOL_INPUT,
    Source.CODEX: codex.TOOL_INPUT,
    Source.GEMINI_CLI: gemini_cli.TOOL_INPUT,
}


def tool_input_sql() -> Expression:
    """:func:`tool_io`'s input of a stored tool-use event, read by the database: its JSON
    text (or SQL NULL when there is none), for a query over many events that needs their
    inputs and not their outputs, which are most of a payload's bytes."""
    column = F("payload")

    def first_present(paths: tuple[KeyPath, ...]) -> Expression:
        *earlier, last = paths
        if not earlier:
            return JSONAt(column, last)
        return Case(
            *[When(JSONHas(column, path), then=JSONAt(column, path)) for path in earlier],
            default=JSONAt(column, last),
        )

    return Case(
        *[When(source=name, then=first_present(paths)) for name, paths in _TOOL_INPUT.items()],
        default=first_present(canonical.TOOL_INPUT),
    )
