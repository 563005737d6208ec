"""GIN indexes for the session list's full-text search (PostgreSQL only).

Each index is on exactly the expression dashboard.selectors._search_postgres filters on,
so a search reads the index instead of computing a tsvector for every row of the team
(measured: ~0.35 s with 5,000 sessions without them, seconds with 100,000). The tables
belong to lifecycle and memory; the indexes live here because only the dashboard's
search needs them. tests/dashboard/test_search_indexes.py checks that the planner uses
them, so a change to the search expression cannot leave them silently unused.
"""

from django.db import migrations

INDEXES = {
    "dashboard_fts_prompt": (
        "lifecycle_lifecycleevent",
        "to_tsvector('english'::regconfig, COALESCE((facts ->> 'text'), ''))",
        "WHERE kind = 'prompt'",
    ),
    "dashboard_fts_summary": (
        "memory_summary",
        "to_tsvector('english'::regconfig, COALESCE(request, '') || ' ' || "
        "COALESCE(investigated, '') || ' ' || COALESCE(learned, '') || ' ' || "
        "COALESCE(completed, '') || ' ' || COALESCE(next_steps, '') || ' ' || "
        "COALESCE(final_message, ''))",
        "",
    ),
    "dashboard_fts_tail": (
        "memory_streamtail",
        "to_tsvector('english'::regconfig, COALESCE(final_message, ''))",
        "",
    ),
}


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, (table, expression, where) in INDEXES.items():
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON {table} USING gin ({expression}) {where}"
        )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [
        ("lifecycle", "0001_initial"),
        ("memory", "0001_initial"),
    ]

    operations = [migrations.RunPython(create, drop, elidable=False)]
