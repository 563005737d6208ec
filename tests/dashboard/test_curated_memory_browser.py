"""Curated memory in a real browser: what a lead pins on an agent's page reaches the
agent's next sessions (Playwright and Debian's Chromium against a live server)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import requests

from lifecycle.models import Agent
from memory.models import ContinuityRecord, Pin
from sessionhub.models import Team
from tests.conftest import claude_code_hooks
from tests.dashboard.test_browser import browser, log_in, page, replay, shot  # noqa: F401
from tests.factories import MembershipFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RULE = "Never deploy billing-api on Fridays; staging first"


def start_session(live_server: Any, token: str, prompt: str | None = None) -> dict[str, Any]:
    """A new Claude Code session of the fixture's agent asks for its preamble at its start
    (the start carried in the request, as the hook client sends it), and at its first
    prompt when ``prompt`` is given; the last answer."""
    start = dict(claude_code_hooks("basic")[0])
    start["session_id"] = str(uuid.uuid4())
    body: dict[str, Any] = {"source": "claude-code", "session_id": start["session_id"]}
    answer = requests.post(
        f"{live_server.url}/api/v1/continuity",
        json={**body, "event": start},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    if prompt is not None:
        answer = requests.post(
            f"{live_server.url}/api/v1/continuity",
            json={**body, "prompt": prompt},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_critical_pin_set_on_the_agent_page_is_in_every_next_preamble_until_unpinned(
    page: Any,  # noqa: F811 - the fixture
    live_server: Any,
    team: Team,
    make_token: Any,
) -> None:
    token = make_token(team)[1]
    replay(live_server, token, "hooks/claude-code", claude_code_hooks("basic"))
    agent = Agent.objects.get(team=team)
    MembershipFactory(team=team, user=UserFactory(username="lead"))

    log_in(page, live_server, "lead", path=f"/agents/{agent.pk}/")
    explained = page.locator("#pins-explained").inner_text()
    assert "every preamble until it is unpinned" in explained
    form = page.locator("#new-pin")
    form.get_by_label("Label").fill("Billing deploys")
    form.get_by_label("Content").fill(RULE)
    form.get_by_label("Priority").select_option("critical")
    form.get_by_role("button", name="Pin").click()
    page.get_by_text("Pinned “Billing deploys”.").wait_for()
    assert "pinned by lead" in page.locator("#pins").inner_text()
    shot(page, "curated-01-critical-pin")
    pin = Pin.objects.get(agent=agent, label="Billing deploys")
    assert (pin.priority, pin.pinned_by) == ("critical", "lead")

    # The next session's start: the rule, who pinned it and when.
    first = start_session(live_server, token)
    when = pin.pinned_at.strftime("%Y-%m-%d")
    assert RULE in first["preamble"]
    assert f"pinned by lead on {when}" in first["preamble"]
    assert len(first["preamble"]) <= 960  # within the budget: at most ~240 tokens
    record = ContinuityRecord.objects.get(pk=first["record_id"])
    assert [p["label"] for p in record.curated_pins] == ["Billing deploys"]
    # And the one after it, at its first prompt as well as at its start.
    again = start_session(live_server, token, prompt="Rename the export job's log file")
    second = ContinuityRecord.objects.filter(session_id=again["session_id"])
    assert all(RULE in r.preamble for r in second if r.preamble)
    assert any(RULE in r.preamble for r in second)

    # Unpinned on the page: gone from the next preamble.
    page.get_by_role("button", name="Unpin Billing deploys").click()
    page.get_by_text("No active pin.").wait_for()
    after = start_session(live_server, token)
    assert RULE not in after["preamble"]
