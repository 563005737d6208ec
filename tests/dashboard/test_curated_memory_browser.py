"""Curated memory in a real browser: what a lead pins on an agent's page reaches the
agent's next sessions (Playwright and Debian's Chromium against a live server)."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import requests

from lifecycle.models import Agent, Session
from memory.models import ContinuityRecord, Pin
from sessionhub.models import Team
from sessionhub.services import membership_add
from tests.conftest import claude_code_hooks
from tests.dashboard.test_browser import browser, log_in, page, replay, shot  # noqa: F401
from tests.factories import MembershipFactory, UserFactory
from tests.integrations.test_hook_client_continuity import CWD, post_past_session
from tests.integrations.test_hook_client_e2e import HookClient

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


def test_a_continue_made_in_the_admin_reaches_the_running_session_at_its_next_prompt(
    page: Any,  # noqa: F811 - the fixture
    live_server: Any,
    team: Team,
    make_token: Any,
    tmp_path: Path,
) -> None:
    token = make_token(team)[1]
    old = str(uuid.uuid4())
    post_past_session(
        live_server.url,
        token,
        old,
        hours_ago=26,
        prompt="Make the notifier retry webhooks with backoff",
        final="Backoff added to webhooks/retry.py. TODO: task-8120 cap the retries at ten.",
    )
    client = HookClient(tmp_path, live_server.url, token)
    new = str(uuid.uuid4())
    common = {"session_id": new, "cwd": CWD, "transcript_path": str(tmp_path / "t.jsonl")}
    client.hook(common | {"hook_event_name": "SessionStart", "source": "startup"})
    client.hook(common | {"hook_event_name": "UserPromptSubmit", "prompt": "Tidy the README"})
    target = Session.objects.get(external_id=new)
    source = Session.objects.get(external_id=old)
    admin = UserFactory(username="root", is_staff=True, is_superuser=True)
    membership_add(team=team, user=admin, role="admin")

    log_in(page, live_server, "root", path="/admin/lifecycle/session/")
    page.get_by_role("heading", name=re.compile("Select session to change")).wait_for()
    assert "Make the notifier retry webhooks" in page.locator("#result_list").inner_text()
    page.locator(f'input[name="_selected_action"][value="{source.pk}"]').check()
    page.locator('select[name="action"]').select_option("continue_from")
    page.get_by_role("button", name="Go").click()
    assert "at its next prompt" in page.locator("#continue-explained").inner_text()
    # The running session is offered by its first prompt and agent.
    choice = page.get_by_label("Session that continues")
    label = choice.locator(f'option[value="{target.pk}"]').inner_text()
    assert label.startswith("“Tidy the README” · ") and "Active" in label
    choice.select_option(str(target.pk))
    page.get_by_role("button", name="Continue").click()
    page.get_by_text(re.compile("handed to the session at its next prompt")).wait_for()
    shot(page, "curated-02-admin-continue")
    record = ContinuityRecord.objects.get(session=target, trigger="manual")
    assert record.delivered_at is None and "task-8120" in record.preamble

    # The session's next prompt, through the real hook client: handed over, once.
    out = client.hook(common | {"hook_event_name": "UserPromptSubmit", "prompt": "go on"})
    assert json.loads(out)["hookSpecificOutput"]["additionalContext"] == record.preamble
    assert client.hook(common | {"hook_event_name": "UserPromptSubmit", "prompt": "ok"}) == ""
    record.refresh_from_db()
    assert record.delivered_at is not None

    page.goto(f"{live_server.url}/sessions/{target.pk}/")
    continuity = page.locator("#continuity")
    continuity.get_by_text("Delivered").wait_for()
    shot(page, "curated-03-delivered")
