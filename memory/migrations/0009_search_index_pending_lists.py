"""The full-text indexes the MCP search reads on memory's tables (the dashboard's, created
by ``dashboard/migrations/0001_search_indexes.py``) keep a short pending list (PostgreSQL
only).

A GIN index takes new rows into a pending list, merged into the index when it passes
``gin_pending_list_limit`` (4 MB by default) or when the table is vacuumed, and every
search reads the whole list. With the default, the summaries' list after 100,000 sessions
had 498 pages and the bitmap of a four-word search took 10.6 ms instead of 1.8 ms once
merged. At 256 kB a search reads at most 32 pages of it; the summaries and final messages
are written by the memory worker, which merges the list more often, each time a shorter
one.
"""

from django.db import migrations

INDEXES = ("dashboard_fts_summary", "dashboard_fts_tail")
PENDING_LIST_KB = 256


def shorten(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in INDEXES:
        schema_editor.execute(
            f"ALTER INDEX IF EXISTS {name} SET (gin_pending_list_limit = {PENDING_LIST_KB})"
        )


def restore(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in INDEXES:
        schema_editor.execute(f"ALTER INDEX IF EXISTS {name} RESET (gin_pending_list_limit)")


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0008_search_documents"),
        ("dashboard", "0001_search_indexes"),
    ]

    operations = [migrations.RunPython(shorten, restore, elidable=False)]
