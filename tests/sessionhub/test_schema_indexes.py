"""Every foreign key of SessionHub's own tables leads some index of its table.

Several foreign keys have no index of their own (``db_index=False``) because a composite
index that starts with them serves the same lookups for one write fewer. This holds
whoever changes the models next to that: a foreign key no index starts with makes every
join on it, and every cascade from a deleted row (a session, a team), a scan of the
table. Checked on the migrated test database, PostgreSQL or SQLite.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from django.db import connection, models

pytestmark = pytest.mark.django_db

OWN_APPS = ("sessionhub", "lifecycle", "memory", "dashboard")


def _foreign_keys() -> list[tuple[str, str]]:
    """(table, column) of every foreign key of the project's own models."""
    keys = []
    for config in apps.get_app_configs():
        if config.label not in OWN_APPS:
            continue
        for model in config.get_models():
            if model._meta.managed and not model._meta.proxy:
                for field in model._meta.concrete_fields:
                    if isinstance(field, models.ForeignKey):
                        keys.append((model._meta.db_table, field.column))
    return keys


def _leading_columns(table: str) -> set[str]:
    """The first column of each index, unique constraint and primary key of the table."""
    with connection.cursor() as cursor:
        constraints: dict[str, Any] = connection.introspection.get_constraints(cursor, table)
    return {
        spec["columns"][0]
        for spec in constraints.values()
        if spec["columns"] and (spec["index"] or spec["unique"] or spec["primary_key"])
    }


def test_the_project_has_foreign_keys_to_check() -> None:
    keys = _foreign_keys()
    assert ("memory_observation", "session_id") in keys
    assert ("lifecycle_lifecycleevent", "session_id") in keys


@pytest.mark.parametrize(("table", "column"), _foreign_keys())
def test_an_index_starts_with_each_foreign_key(table: str, column: str) -> None:
    assert column in _leading_columns(table), f"no index of {table} starts with {column}"
