"""The dashboard in a real browser: Playwright drives Debian's Chromium against a live
server fed by replaying the gateway fixtures over HTTP. Each page is saved as a
screenshot in ``screenshots/`` (git-ignored).

Chromium comes from Debian (``apt-get install chromium``), never from Playwright's own
download; without it these tests skip and say why.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from lifecycle.models import Session, SessionStatus
from memory.models import ContinuityRecord
from sessionhub.models import Team
from sessionhub.services import team_get_or_create
from tests.conftest import claude_code_hooks, openclaw_hooks
from tests.factories import (
    AgentFactory,
    MembershipFactory,
    SessionFactory,
    SummaryFactory,
    UserFactory,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = os.environ.get("SESSIONHUB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "screenshots"
PASSWORD = "pw-for-tests"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        pytest.skip(
            f"!!! BROWSER TESTS SKIPPED: no Chromium at {CHROMIUM} "
            "(apt-get install -y chromium) !!!"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip(
            "!!! BROWSER TESTS SKIPPED: playwright is not installed (pip install playwright) !!!"
        )
    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls
    # are still plain synchronous ones.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    # Every page runs under the Content-Security-Policy: Chromium reports each thing it
    # refused (an inline script or style, a foreign source) on the console.
    refused: list[str] = []
    page.on(
        "console",
        lambda message: (
            refused.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    yield page
    context.close()
    assert refused == [], refused


def shot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def replay(live_server: Any, token: str, path: str, lines: list[dict[str, Any]]) -> None:
    for line in lines:
        response = requests.post(
            f"{live_server.url}/api/v1/{path}",
            json=line,
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert response.status_code == 200, response.text


def log_in(page: Any, live_server: Any, username: str, path: str = "/") -> None:
    page.goto(f"{live_server.url}{path}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()


@pytest.fixture
def world(live_server: Any, team: Team, make_token: Any) -> dict[str, Any]:
    """Real sessions for ``acme`` (and one for another team), a member and an admin."""
    token = make_token(team)[1]
    for scenario in ("basic", "compact", "clear", "crash"):
        replay(live_server, token, "hooks/claude-code", claude_code_hooks(scenario))
    for scenario in ("basic", "restart"):
        replay(live_server, token, "hooks/openclaw", openclaw_hooks(scenario))
    other = team_get_or_create(slug="globex", name="Globex")
    replay(live_server, make_token(other)[1], "hooks/openclaw", openclaw_hooks("idle"))

    member = MembershipFactory(team=team, user=UserFactory(username="alice")).user
    admin_user = UserFactory(username="root", is_staff=True, is_superuser=True)
    MembershipFactory(team=team, user=admin_user)
    return {
        "token": token,
        "member": member,
        "admin": admin_user,
        "basic": Session.objects.get(external_id=claude_code_hooks("basic")[0]["session_id"]),
        "crash": Session.objects.get(external_id=claude_code_hooks("crash")[0]["session_id"]),
        "foreign": Session.objects.get(external_id=openclaw_hooks("idle")[0]["event"]["sessionId"]),
    }


def test_member_browses_filters_searches_and_reads_a_session(
    page: Any, live_server: Any, world: dict[str, Any]
) -> None:
    log_in(page, live_server, "alice")
    page.get_by_role("heading", name=re.compile("Overview")).wait_for()
    assert page.locator("svg.chart").count() >= 6
    assert page.get_by_role("heading", name=re.compile("Sessions started per day")).is_visible()
    shot(page, "01-overview")

    page.get_by_role("link", name="Sessions", exact=True).click()
    rows = page.locator("table.sessions tbody tr")
    assert rows.count() == 6  # four Claude Code sessions and two OpenClaw ones, no other team's
    assert world["foreign"].external_id not in page.content()
    shot(page, "02-sessions")

    page.get_by_label("Status").select_option("active")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url(re.compile(r"status=active"))
    assert rows.count() == 1
    assert world["crash"].external_id[:20] in rows.first.inner_text()
    shot(page, "03-sessions-active")

    page.get_by_role("link", name="Clear filters").click()
    page.get_by_label("Search").fill("refunds")
    page.get_by_label("Source").select_option("claude-code")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url(re.compile(r"q=refunds"))
    found = page.locator("table.sessions tbody").inner_text()
    assert world["basic"].external_id[:20] in found
    for scenario in ("basic", "restart"):  # no OpenClaw session talks about refunds
        assert openclaw_hooks(scenario)[0]["event"]["sessionId"][:20] not in found
    shot(page, "04-sessions-search")

    page.get_by_role("link", name=re.compile(world["basic"].external_id[:12])).first.click()
    page.get_by_role("heading", name="Timeline").wait_for()
    assert page.locator("ol.timeline li.ev").count() == world["basic"].event_count
    assert page.locator("ol.timeline li.k-turn").count() >= 1
    tail = page.locator("#tail")
    assert "regression test for a refund" in tail.inner_text()
    summary = page.locator("#summary")
    assert "request" in summary.inner_text().lower()
    assert "negative amounts" in summary.inner_text().lower()
    shot(page, "05-session-detail")

    page.get_by_role("link", name="Edit the agent's pins").click()
    page.get_by_role("heading", name="Pin something").wait_for()
    form = page.locator("#new-pin")
    form.get_by_label("Label").fill("deploy window")
    form.get_by_label("Content").fill("Only deploy ledger-sync on Tuesdays")
    form.get_by_label("Priority").select_option("critical")
    form.get_by_role("button", name="Pin").click()
    page.get_by_text("Pinned “deploy window”.").wait_for()
    assert page.locator("#pins li.pin").count() == 1
    shot(page, "06-agent")

    # Keyboard: the skip link is the first stop and moves focus to the content.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"

    # A phone-sized screen: the list still fits (the table scrolls inside its box).
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/sessions/")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width}px wide on a 390px screen"
    shot(page, "12-sessions-phone")


def test_open_session_updates_without_a_reload(
    page: Any, live_server: Any, world: dict[str, Any]
) -> None:
    crash = world["crash"]
    log_in(page, live_server, "alice", path=f"/sessions/{crash.pk}/")
    page.get_by_role("heading", name="Timeline").wait_for()
    before = page.locator("ol.timeline li.ev").count()

    line = dict(claude_code_hooks("crash")[1], prompt="one more thing about the footer")
    replay(live_server, world["token"], "hooks/claude-code", [line])
    page.locator("ol.timeline li.ev").nth(before).wait_for(timeout=15_000)
    assert "one more thing about the footer" in page.locator("ol.timeline").inner_text()
    assert page.locator('[data-live="event_count"]').inner_text() == str(before + 1)


def test_admin_continues_a_session_and_the_record_shows_on_its_page(
    page: Any, live_server: Any, world: dict[str, Any]
) -> None:
    source, target = world["basic"], world["crash"]
    assert target.status == SessionStatus.ACTIVE
    log_in(page, live_server, "root", path="/admin/lifecycle/session/")
    page.get_by_role("heading", name=re.compile("Select session to change")).wait_for()
    shot(page, "07-admin-sessions")

    page.locator(f'input[name="_selected_action"][value="{source.pk}"]').check()
    page.locator('select[name="action"]').select_option("continue_from")
    page.get_by_role("button", name="Go").click()
    page.get_by_text("The session you choose will inherit").wait_for()
    page.get_by_label("Session that continues").select_option(str(target.pk))
    shot(page, "08-admin-continue")
    page.get_by_role("button", name="Continue").click()
    # Two projects, two agents: the admin says what will happen and asks first.
    page.get_by_text(re.compile("This continue crosses agents")).wait_for()
    assert not ContinuityRecord.objects.filter(session=target).exists()
    page.get_by_label("Continue across agents or projects").check()
    page.get_by_role("button", name="Continue").click()
    page.get_by_text(re.compile(r"now continues from")).wait_for()
    shot(page, "09-admin-continued")

    record = ContinuityRecord.objects.get(session=target)
    assert record.trigger == ContinuityRecord.Trigger.MANUAL
    assert list(record.sources.all()) == [source]

    page.get_by_role("link", name="See it on the dashboard").click()
    continuity = page.locator("#continuity")
    continuity.get_by_text("Manual continue").wait_for()
    assert source.external_id[:16] in continuity.inner_text()
    assert "used" in continuity.inner_text()
    assert "by root" in continuity.inner_text()
    shot(page, "10-session-continued")

    page.goto(f"{live_server.url}/admin/admin/logentry/")
    page.get_by_text(re.compile("Continued from session")).first.wait_for()
    shot(page, "11-admin-log")


def test_an_mcp_call_shows_on_the_pages_of_the_session_that_asked_and_of_the_one_it_named(
    page: Any, live_server: Any, team: Team, make_token: Any
) -> None:
    """An agent's search over MCP (named by the client as the OpenClaw plugin does) shows
    on the asking session's page, with the answer, and on the page of the session it
    handed out."""
    token = make_token(team)[1]
    agent = AgentFactory(team=team, source="openclaw", project="/srv/support-bot")
    asking = SessionFactory(agent=agent, external_id="oc-asking", status="active")
    past = SessionFactory(agent=agent, external_id="oc-past")
    SummaryFactory(session=past, request="Rotate the webhook signing secret")
    response = requests.post(
        f"{live_server.url}/api/v1/mcp",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "search_memory", "arguments": {"query": "webhook signing"}},
        },
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "X-SessionHub-Source": "openclaw",
            "X-SessionHub-Session": "oc-asking",
        },
        timeout=30,
    )
    assert response.status_code == 200 and not response.json()["result"]["isError"]
    MembershipFactory(team=team, user=UserFactory(username="alice"))
    log_in(page, live_server, "alice", path=f"/sessions/{asking.pk}/")
    section = page.locator("#mcp")
    section.get_by_text("search_memory").first.wait_for()
    assert "Asked from this session" in section.inner_text()
    assert "webhook signing" in section.inner_text()  # the arguments
    section.get_by_text("Answer handed to the agent").click()
    assert str(past.pk) in section.locator("pre").inner_text()
    section.get_by_role("link", name="oc-past").click()
    page.locator("#mcp").get_by_text("This session's memory handed out").wait_for()
    shot(page, "session-mcp")
