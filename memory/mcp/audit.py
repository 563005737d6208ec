"""The record of every MCP tool call: who asked, what, which sessions and pins the answer
named, the answer itself and its size. Written in the request, like a continuity record."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from lifecycle.models import Session
from sessionhub.models import ApiToken
from sessionhub.text.redaction import RULES_VERSION, redact_value

from ..models import McpCall
from ..statements import mcp_call_insert


def mcp_call_record(
    *,
    token: ApiToken,
    session: Session | None,
    client: str,
    tool: str,
    arguments: Any,
    tool_use_id: str,
    returned: Iterable[uuid.UUID],
    returned_pins: Iterable[int],
    answer: str,
    is_error: bool,
    duration_ms: float,
    created_at: datetime,
) -> McpCall:
    """Store one tool call with the sessions its answer named (one statement on
    PostgreSQL)."""
    record = McpCall(
        team_id=token.team_id,
        session=session,
        token=token,
        requested_by=f"token:{token.prefix}",
        client=client[:200],
        tool=tool[:100],
        arguments=redact_value(arguments if isinstance(arguments, dict) else {}),
        tool_use_id=tool_use_id[:200],
        returned_pins=list(dict.fromkeys(returned_pins)),
        answer=answer,
        answer_chars=len(answer),
        is_error=is_error,
        duration_ms=round(duration_ms, 3),
        created_at=created_at,
        redaction_version=RULES_VERSION,
    )
    mcp_call_insert(record, list(dict.fromkeys(returned)))
    return record


def mcp_calls_link(*, team_id: int, session: Session, tool_use_ids: Iterable[str]) -> int:
    """Name the calling session of the calls Claude Code made from it (by the ids of the
    tool uses), once those tool uses reach SessionHub."""
    ids = [i for i in dict.fromkeys(tool_use_ids) if i]
    if not ids:
        return 0
    return McpCall.objects.filter(
        team_id=team_id, session__isnull=True, tool_use_id__in=ids
    ).update(session=session)
