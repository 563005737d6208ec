"""Large values are compressed with lz4 where PostgreSQL offers it: what an ingested
event's payload is stored as, and what the migrations' operation does elsewhere."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from lifecycle.models import LifecycleEvent
from sessionhub.db import compression

pytestmark = pytest.mark.django_db


def _lz4_offered() -> bool:
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        return compression._lz4_available(cursor)


def test_a_large_payload_is_stored_lz4_compressed(api: APIClient) -> None:
    if not _lz4_offered():
        pytest.skip("PostgreSQL with lz4 only (SQLite, or a server built without lz4)")
    session_id = str(uuid.uuid4())
    # About 6 KB: compressed, and under the trim.
    output = "".join(f"line {n}: nothing secret here\n" for n in range(200))
    response = api.post(
        "/api/v1/hooks/claude-code",
        {
            "session_id": session_id,
            "cwd": "/src/app",
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "make"},
            "tool_response": {"stdout": output, "stderr": ""},
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    event = LifecycleEvent.objects.get(session__external_id=session_id)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_column_compression(payload) FROM lifecycle_lifecycleevent WHERE id = %s",
            [event.pk],
        )
        assert cursor.fetchone()[0] == "lz4"
    assert event.payload["tool_response"]["stdout"] == output


class _Editor:
    def __init__(self, vendor: str) -> None:
        self.connection = type("C", (), {"vendor": vendor})()

    def quote_name(self, name: str) -> str:
        return f'"{name}"'


def test_the_operation_leaves_other_databases_alone() -> None:
    """SQLite (embedded mode) has no such setting: the migration does nothing there."""
    forward = compression._set("t", ["a"], "lz4")
    forward(None, _Editor("sqlite"))  # would fail on a cursor if it tried anything


def test_the_operation_skips_a_server_without_lz4(monkeypatch: Any) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    monkeypatch.setattr(compression, "_lz4_available", lambda cursor: False)
    editor = _Editor("postgresql")
    editor.connection = connection  # type: ignore[assignment]
    # A table that does not exist: an ALTER would fail, so passing means none was sent.
    compression._set("no_such_table", ["a"], "lz4")(None, editor)
