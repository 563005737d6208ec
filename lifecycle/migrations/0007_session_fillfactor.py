"""Leave room on each page of the session table for the row's next versions.

Every event rewrites its session's row. When the new version fits on the same page and
no indexed column changed, PostgreSQL keeps it heap-only: no index takes a new entry.
With pages packed full, the next version lands on another page and every index of the
table is written; a fill factor of 70 keeps about 30 % of each page for them.
"""

from typing import Any

from django.db import migrations


def _set_fillfactor(value: int) -> Any:
    def apply(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return  # SQLite has no such setting
        table = schema_editor.quote_name(apps.get_model("lifecycle", "Session")._meta.db_table)
        schema_editor.execute(f"ALTER TABLE {table} SET (fillfactor = {value})")

    return apply


class Migration(migrations.Migration):
    dependencies = [("lifecycle", "0006_gateway_codex_gemini_cli")]

    operations = [migrations.RunPython(_set_fillfactor(70), _set_fillfactor(100))]
