"""The OpenClaw plugin against a live SessionHub: its own Node test suite (``npm test``) in
live mode, then the database.

The plugin's replay test loads the plugin with a stand-in ``api`` that records the
``api.on`` registrations, fires every line of ``openclaw/*.jsonl`` through the registered
handlers (plus one ``before_prompt_build`` on the first prompt of each new session) and
writes a report of what it sent, what the server answered and what
``before_prompt_build`` returned. Here we check that report against the database: every
fixture event stored exactly once under the plugin's event id, each session in the right
state, and each preamble the one SessionHub recorded.

The server's clock is moved to just after the fixtures' last event, so which prior
sessions count as recent does not depend on the day the suite runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.db.models import Count

from lifecycle.models import LifecycleEvent, Session
from memory.models import ContinuityRecord
from tests.conftest import FIXTURES, OPENCLAW_SCENARIOS, openclaw_hooks
from tests.lifecycle.test_replay_http import EXPECTED_OPENCLAW

pytestmark = pytest.mark.django_db(transaction=True)

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "integrations" / "openclaw"
NPM_TIMEOUT = 600


def _installed_matches_lock() -> bool:
    """node_modules holds exactly what package-lock.json pins (npm's hidden lockfile)."""
    try:
        wanted = json.loads((PLUGIN / "package-lock.json").read_text())["packages"]
        have = json.loads((PLUGIN / "node_modules" / ".package-lock.json").read_text())["packages"]
    except (OSError, ValueError, KeyError):
        return False
    versions = lambda packages: {k: v.get("version") for k, v in packages.items() if k}  # noqa: E731
    if versions(wanted) != versions(have):
        return False
    return all((PLUGIN / path / "package.json").exists() for path in versions(wanted))


@pytest.fixture(scope="session")
def plugin_ready() -> Path:
    """node and npm present, dev dependencies installed once (skipped when up to date)."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        pytest.skip(
            f"!!! SKIPPED: {' and '.join(missing)} not found on PATH: the OpenClaw plugin's "
            "live test needs Node.js 20+ (CI has it) !!!"
        )
    if not _installed_matches_lock():
        command = ["npm", "ci"] if (PLUGIN / "package-lock.json").exists() else ["npm", "install"]
        done = subprocess.run(
            [*command, "--no-audit", "--no-fund"],
            cwd=PLUGIN,
            capture_output=True,
            text=True,
            timeout=NPM_TIMEOUT,
            check=False,
        )
        assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}"
    return PLUGIN


def _fixture_lines() -> dict[str, list[dict[str, Any]]]:
    return {name: openclaw_hooks(name) for name in OPENCLAW_SCENARIOS}


def _ts(value: int) -> datetime:
    return datetime.fromtimestamp(value / 1000, tz=UTC)


def test_plugin_replays_the_fixtures_against_a_live_server(
    plugin_ready: Path, live_server: Any, token: str, tmp_path: Path
) -> None:
    fixtures = _fixture_lines()
    total = sum(len(lines) for lines in fixtures.values())
    last_ts = max(line["ts"] for lines in fixtures.values() for line in lines)
    report_path = tmp_path / "openclaw-report.json"
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SESSIONHUB_", "NODE_OPTIONS"))
    } | {
        "SESSIONHUB_URL": live_server.url,
        "SESSIONHUB_TOKEN": token,
        "SESSIONHUB_TEST_REPORT": str(report_path),
        "SESSIONHUB_FIXTURES_DIR": str(FIXTURES / "openclaw"),
        "SESSIONHUB_TIMEOUT_MS": "15000",
    }

    with time_machine.travel(_ts(last_ts) + timedelta(hours=1), tick=True):
        done = subprocess.run(
            ["npm", "test"],
            cwd=plugin_ready,
            env=env,
            capture_output=True,
            text=True,
            timeout=NPM_TIMEOUT,
            check=False,
        )
        output = (done.stdout + done.stderr)[-12000:]
        assert done.returncode == 0, f"npm test failed:\n{output}"
        assert report_path.exists(), f"the replay test wrote no report:\n{output}"
        report = json.loads(report_path.read_text())
        _check(report, fixtures, total)


def _check(report: dict[str, Any], fixtures: dict[str, list[dict[str, Any]]], total: int) -> None:
    assert report["mode"] == "live"
    assert report["queuedLeft"] == 0
    assert report["errors"] == []
    sent = report["sent"]
    assert len(sent) == total

    # Every fixture event, once, under the event id the plugin gave it.
    for item in sent:
        statuses = [a["status"] for a in item["answers"] if a["httpStatus"] == 200]
        assert statuses and statuses[0] == "accepted", item
    assert LifecycleEvent.objects.count() == total
    doubled = LifecycleEvent.objects.values("event_id").annotate(n=Count("id")).filter(n__gt=1)
    assert list(doubled) == []
    assert LifecycleEvent.objects.filter(session__isnull=True).count() == 0
    assert set(LifecycleEvent.objects.values_list("event_id", flat=True)) == {
        item["eventId"] for item in sent
    }

    sessions: dict[str, Session] = {}
    for name, lines in fixtures.items():
        session = Session.objects.get(external_id=lines[0]["event"]["sessionId"])
        sessions[name] = session
        status, reason, messages, suspends, compactions = EXPECTED_OPENCLAW[name]
        assert session.status == status, name
        assert session.end_reason == reason, name
        assert session.message_count == messages, name
        assert session.suspend_count == suspends, name
        assert session.compaction_count == compactions, name
        # The gateway is part of the agent (every install's default agent is "main"): the
        # token's name, then the instance id the plugin made for itself.
        assert session.agent.external_id.startswith(f"{session.team.slug}-gw/")
        assert session.agent.external_id.endswith(":" + lines[0]["ctx"]["agentId"])
        assert session.channel == "telegram"
        assert session.session_key == lines[0]["event"]["sessionKey"]
        assert session.started_at == _ts(lines[0]["ts"])
        assert session.ended_at == _ts(lines[-1]["ts"])
        assert (session.tool_use_count, session.turn_count) == (1, 1)
        mine = [item for item in sent if item["scenario"] == f"{name}.jsonl"]
        assert [item["hook"] for item in mine] == [line["hook"] for line in lines]
        assert [item["ts"] for item in mine] == [line["ts"] for line in lines]
        events = session.events.order_by("occurred_at", "id")
        assert [e.event_id for e in events] == [item["eventId"] for item in mine], name
        assert session.event_count == len(lines)

    # before_prompt_build: asked once per new session; returned what SessionHub recorded.
    # (A later prompt asks only what waits for its session: a manual continue.)
    asked = [
        c
        for c in report["continuity"]
        if c["hook"] == "before_prompt_build" and not c["skipped"] and not c.get("waiting")
    ]
    by_session = {c["sessionId"]: c for c in asked}
    assert len(asked) == len(by_session) == len(fixtures)
    order = list(fixtures)  # the replay goes through the files in name order
    for name in order:
        session = sessions[name]
        call = by_session[session.external_id]
        assert call["httpStatus"] == 200, call
        assert session.agent.external_id.endswith(":" + call["agentId"])
        record = ContinuityRecord.objects.get(
            session=session, trigger=ContinuityRecord.Trigger.AUTOMATIC
        )
        assert call["preamble"] == record.preamble
        sources = set(record.sources.values_list("external_id", flat=True))
        earlier_same_agent = {
            sessions[other].external_id
            for other in order[: order.index(name)]
            if sessions[other].agent_id == session.agent_id
        }
        assert sources <= earlier_same_agent, (name, sources)
        if earlier_same_agent:
            # A prior session of the same agent, ended an hour or so ago: a warm start.
            assert sources, f"{name}: no prior session chosen ({record.candidates})"
            assert record.preamble.startswith("[SESSION CONTINUITY")
            assert call["returned"] == {"prependContext": record.preamble}
        else:
            # The agent's first session: a cold start, nothing prepended.
            assert record.preamble == ""
            assert call["returned"] is None

    # The first of each agent is cold, the later ones of "ops" are warm.
    assert by_session[sessions["basic"].external_id]["returned"] is None
    assert by_session[sessions["reset"].external_id]["returned"] is None
    compact = by_session[sessions["compact"].external_id]["returned"]["prependContext"]
    assert "backup job on db-2" in compact.lower()  # what the basic session was asked
