"""The observations' foreign keys without constraints in the database.

The memory worker inserts one observation per tool use, hundreds in one statement, and
each constraint checked every row at commit: three row locks per observation (its team,
its session, its event), as much of PostgreSQL's work as the insert itself. The insert
now locks the session once and writes nothing for a session that is gone
(``memory.statements.rows_insert``); Django's cascade still deletes the observations of a
deleted session, event or team. The indexes stay.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("lifecycle", "0009_session_chain_indexes"),
        ("memory", "0009_search_index_pending_lists"),
        ("sessionhub", "0002_token_events_and_refusals"),
    ]

    operations = [
        migrations.AlterField(
            model_name="observation",
            name="event",
            field=models.OneToOneField(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="observation",
                to="lifecycle.lifecycleevent",
            ),
        ),
        migrations.AlterField(
            model_name="observation",
            name="session",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="observations",
                to="lifecycle.session",
            ),
        ),
        migrations.AlterField(
            model_name="observation",
            name="team",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="observations",
                to="sessionhub.team",
            ),
        ),
    ]
