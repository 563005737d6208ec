"""Agents named by earlier versions ("<project> (<gateway>)") read as the project after
lifecycle 0008, their gateway becoming the developer of them and of their sessions."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("lifecycle", "0007_session_fillfactor")]
AFTER = [("lifecycle", "0008_developers_projects_tokens")]


def test_old_agent_names_become_project_and_developer() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    apps: Any = executor.loader.project_state(BEFORE).apps
    Team = apps.get_model("sessionhub", "Team")
    Agent = apps.get_model("lifecycle", "Agent")
    Session = apps.get_model("lifecycle", "Session")
    team = Team.objects.create(slug="acme", name="Acme")
    made = {
        "cc": Agent.objects.create(
            team=team,
            source="claude-code",
            external_id="first-token:/x/api",
            name="api (first-token)",
        ),
        "oc": Agent.objects.create(
            team=team,
            source="openclaw",
            external_id="first-token/5c43b530-1111-4222-8333-444455556666:research",
            name="research (first-token/5c43b530-1111-4222-8333-444455556666)",
        ),
        "named": Agent.objects.create(
            team=team,
            source="openclaw",
            external_id="t/laptop-bob:main",
            name="main (t/laptop-bob)",
        ),
        "generic": Agent.objects.create(
            team=team, source="generic", external_id="x", name="ops (night shift)"
        ),
    }
    Session.objects.create(team=team, agent=made["cc"], source="claude-code", external_id="s1")

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(AFTER)
    apps = executor.loader.project_state(AFTER).apps
    Agent = apps.get_model("lifecycle", "Agent")
    Session = apps.get_model("lifecycle", "Session")
    got = {key: Agent.objects.get(pk=a.pk) for key, a in made.items()}
    assert (got["cc"].name, got["cc"].developer) == ("api", "first-token")
    assert (got["oc"].name, got["oc"].developer) == ("research", "first-token")
    assert (got["named"].name, got["named"].developer) == ("main", "laptop-bob")
    assert (got["generic"].name, got["generic"].developer) == ("ops (night shift)", "")
    assert Session.objects.get(external_id="s1").developer == "first-token"

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
