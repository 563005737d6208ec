"""Drop the single-column session index of observations, stream tails and continuity
records: each table has a composite index that starts with the session and serves every
lookup by session (and the cascade from a deleted session).

Only the index goes. ``AlterField`` alone would also drop and re-add the foreign key,
and re-adding it checks every row of the table under a lock: on a database of months,
the worker would wait on it. The index names are the ones Django gave them, the same on
PostgreSQL and SQLite.
"""

import django.db.models.deletion
from django.db import migrations, models

# (model, table, index the foreign key made, related name)
_DROPPED = [
    ("continuityrecord", "memory_continuityrecord", "memory_continuityrecord_session_id_75e23de8", "continuity_records"),
    ("observation", "memory_observation", "memory_observation_session_id_a83e7d08", "observations"),
    ("streamtail", "memory_streamtail", "memory_streamtail_session_id_b4660c60", "tails"),
]


class Migration(migrations.Migration):

    dependencies = [
        ("lifecycle", "0005_session_memory_run_at"),
        ("memory", "0003_lz4_compression"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name=model,
                    name="session",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name=related,
                        to="lifecycle.session",
                    ),
                )
                for model, _, _, related in _DROPPED
            ],
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{index}"',
                    reverse_sql=f'CREATE INDEX IF NOT EXISTS "{index}" ON "{table}" ("session_id")',
                )
                for _, table, index, _ in _DROPPED
            ],
        ),
    ]
