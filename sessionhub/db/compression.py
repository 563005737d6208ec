"""How PostgreSQL compresses the large values of a table (TOAST), set by migrations.

PostgreSQL compresses a row's large values (past about 2 KB) with ``pglz`` unless a
column names another method. ``lz4`` compresses and decompresses several times faster
for about the same size, which matters where every ingested event carries a few KB of
tool output: it is the biggest part of what the database does per event after the
index updates. Only where the server was built with lz4 (most distributions' packages
are); elsewhere, and on other databases, nothing changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import migrations


def _lz4_available(cursor: Any) -> bool:
    cursor.execute(
        "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
    )
    row = cursor.fetchone()
    return bool(row and row[0])


def _set(table: str, columns: Sequence[str], method: str) -> Any:
    def apply(apps: Any, schema_editor: Any) -> None:
        connection = schema_editor.connection
        if connection.vendor != "postgresql":
            return
        quote = schema_editor.quote_name
        with connection.cursor() as cursor:
            if method == "lz4" and not _lz4_available(cursor):
                return
            changes = ", ".join(
                f"ALTER COLUMN {quote(column)} SET COMPRESSION {method}" for column in columns
            )
            # A catalogue change only: rows already stored keep the method they were
            # written with, and PostgreSQL reads both.
            cursor.execute(f"ALTER TABLE {quote(table)} {changes}")

    return apply


def compress_with_lz4(table: str, columns: Sequence[str]) -> migrations.RunPython:
    """A migration operation: new large values of these columns are compressed with lz4
    (undone by going back to the server's default)."""
    return migrations.RunPython(_set(table, columns, "lz4"), _set(table, columns, "default"))
