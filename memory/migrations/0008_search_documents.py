"""Stored search documents of summaries and features (PostgreSQL generated columns; NULL
on SQLite). Adding a stored generated column computes it for every existing row, so the
sessions already summarised have their documents when this migration ends."""

import django.contrib.postgres.search
import memory.models
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0007_curated_memory'),
    ]

    operations = [
        migrations.AddField(
            model_name='sessionfeatures',
            name='continuity_document',
            field=models.GeneratedField(db_persist=True, expression=memory.models.Lexemes('hot_topics', as_text=False, joiners=False), output_field=django.contrib.postgres.search.SearchVectorField(null=True)),
        ),
        migrations.AddField(
            model_name='sessionfeatures',
            name='search_document',
            field=models.GeneratedField(db_persist=True, expression=memory.models.Lexemes('hot_topics', as_text=True, joiners=True), output_field=django.contrib.postgres.search.SearchVectorField(null=True)),
        ),
        migrations.AddField(
            model_name='summary',
            name='continuity_document',
            field=models.GeneratedField(db_persist=True, expression=memory.models.Lexemes('request', 'learned', 'completed', 'next_steps', as_text=False, joiners=False), output_field=django.contrib.postgres.search.SearchVectorField(null=True)),
        ),
        migrations.AddField(
            model_name='summary',
            name='search_document',
            field=models.GeneratedField(db_persist=True, expression=memory.models.Lexemes('request', 'investigated', 'learned', 'completed', 'next_steps', 'final_message', as_text=False, joiners=True), output_field=django.contrib.postgres.search.SearchVectorField(null=True)),
        ),
    ]
